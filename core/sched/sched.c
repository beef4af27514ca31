/* sched.c — the step scheduler: the waiting line, admission, one ragged append for every
 * active job's rows, the s1 draws, one batched s2-logits call, the s2 draws (sched_impl.h
 * says what a step is). What a job does at each point of a step is its kind's table of
 * operations (sched_ops): sched_forecast.c, sched_generate.c.
 */
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- the scheduler ------------------------------------------------------------------------ */

#define DEFAULT_STEP_TOKENS 256
#define DEFAULT_MAX_ROWS    512

struct kr_sched {
    const kr_model *m;
    kr_pool *pool;
    kr_sched_config cfg;
    sched_job *wait_head, *wait_tail; /* FIFO */
    sched_job *active;                /* in admission order */
    int active_rows;
    bool stalled;     /* the last step had jobs waiting for pool memory */
    size_t committed; /* the plans' pool bytes of the running forecasts */
    step_batch batch;
    /* the s2 call: every drawing row's cache and s1, and its logits */
    kr_cache **s2_caches;
    int32_t *s2_a;
    float *s2_l2;
    int s2_cap;
    kr_sched_stats stats;
};

/* ---- jobs --------------------------------------------------------------------------------- */

kr_sched *kr_sched_create(const kr_model *m, kr_pool *pool, const kr_sched_config *cfg,
                          kr_error *err) {
    kr_sched *s = calloc(1, sizeof *s);
    if (!s) {
        kr_fail_code(err, KR_E_NO_MEMORY, "scheduler: out of memory");
        return NULL;
    }
    s->m = m;
    s->pool = pool;
    if (cfg) s->cfg = *cfg;
    if (s->cfg.step_tokens <= 0) s->cfg.step_tokens = DEFAULT_STEP_TOKENS;
    if (s->cfg.max_rows <= 0) s->cfg.max_rows = DEFAULT_MAX_ROWS;
    return s;
}

const kr_model *sched_model(const kr_sched *s) {
    return s->m;
}

sched_job *sched_job_new(const sched_ops *ops, void *tag, const kr_cancel *cancel, kr_error *err) {
    sched_job *j = calloc(1, sizeof *j);
    if (!j) {
        kr_fail_code(err, KR_E_NO_MEMORY, "scheduler: out of memory for a job");
        return NULL;
    }
    j->ops = ops;
    j->tag = tag;
    j->cancel = cancel;
    return j;
}

/* Ends j (already unlinked): its memory back (a failed job's result too), then the caller's
 * callback. */
static void job_end(kr_sched *s, sched_job *j) {
    kr_error err = j->err;
    void *tag = j->tag;
    j->ops->free(j, err.code != KR_OK);
    free(j);
    if (s->cfg.done) s->cfg.done(tag, &err, s->cfg.ctx);
}

void sched_enqueue(kr_sched *s, sched_job *j) {
    j->next = NULL;
    if (s->wait_tail)
        s->wait_tail->next = j;
    else
        s->wait_head = j;
    s->wait_tail = j;
    s->stats.waiting++;
    s->stats.waiting_flops += j->flops;
}

/* 0 to go on, else the job's error is set. */
static int check_cancel(sched_job *j) {
    return kr_check_cancel(j->cancel, j->ops->what, &j->err);
}

/* Waiting jobs whose caller gave up end without computing, wherever they are in line, so
 * that they hold no place. */
static void drop_cancelled(kr_sched *s) {
    sched_job *prev = NULL;
    for (sched_job *j = s->wait_head, *next; j; j = next) {
        next = j->next;
        if (!check_cancel(j)) {
            prev = j;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            s->wait_head = next;
        if (s->wait_tail == j) s->wait_tail = prev;
        s->stats.waiting--;
        s->stats.waiting_flops -= j->flops;
        if (s->stats.waiting == 0) s->stats.waiting_flops = 0;
        job_end(s, j);
    }
}

/* Whether the pool's free memory covers what a forecast's plan may take, on top of what
 * the running forecasts' plans may still take (counted whole: what they hold is in the
 * used bytes too, so this errs on the side of waiting). A job that still finds no room
 * mid-way waits (stalls) and, at worst, is preempted (run_append). */
static bool pool_has_room(kr_sched *s, const sched_job *j) {
    if (!s->pool || !j->ops->plans_pool) return true;
    kr_pool_stats st;
    kr_pool_stats_get(s->pool, &st);
    size_t free_bytes = st.bytes_total - st.bytes_used;
    return free_bytes >= s->committed && free_bytes - s->committed >= j->pool_bytes;
}

/* Waiting jobs start, first come first served, while their decode rows fit max_rows (one
 * always may, when none is active). */
static void admit(kr_sched *s) {
    drop_cancelled(s);
    /* while the pool has no room for the jobs already running, no new one starts */
    while (s->wait_head && !(s->stalled && s->active)) {
        sched_job *j = s->wait_head;
        bool cancelled = check_cancel(j) != 0;
        if (!cancelled && s->active && s->active_rows + j->rows > s->cfg.max_rows) break;
        if (!cancelled && s->active && !pool_has_room(s, j)) break;
        s->wait_head = j->next;
        if (!s->wait_head) s->wait_tail = NULL;
        s->stats.waiting--;
        s->stats.waiting_flops -= j->flops;
        if (s->stats.waiting == 0) s->stats.waiting_flops = 0;
        int rc = cancelled ? -1 : j->ops->start(s->m, s->pool, j, &j->err);
        /* a generation takes its blocks up front: room is made for it while it can be */
        while (rc && j->ops->start_makes_room && j->err.code == KR_E_POOL_EXHAUSTED &&
               s->cfg.make_room && s->cfg.make_room(s->cfg.ctx)) {
            j->err = (kr_error){0}; /* a success leaves it as it is */
            rc = j->ops->start(s->m, s->pool, j, &j->err);
        }
        if (rc) {
            job_end(s, j);
            continue;
        }
        j->next = NULL;
        sched_job **tail = &s->active;
        while (*tail)
            tail = &(*tail)->next;
        *tail = j;
        s->active_rows += j->rows;
        if (j->ops->plans_pool) s->committed += j->pool_bytes;
        s->stats.active++;
    }
}

static void unlink_active(kr_sched *s, sched_job *j) {
    for (sched_job **p = &s->active; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            s->active_rows -= j->rows;
            if (j->ops->plans_pool) s->committed -= j->pool_bytes;
            s->stats.active--;
            return;
        }
}

static void end_active(kr_sched *s, sched_job *j) {
    unlink_active(s, j);
    job_end(s, j);
}

/* ---- one step ----------------------------------------------------------------------------- */

/* The append of groups [g0, g1) (rows from row0), with the logits copied where wanted. */
static int append_groups(kr_sched *s, int g0, int g1, int row0, kr_error *err) {
    step_batch *b = &s->batch;
    int v1 = 1 << s->m->pc.s1_bits;
    float *l1 = malloc((size_t)(g1 - g0) * v1 * sizeof(float));
    if (!l1) return kr_fail_code(err, KR_E_NO_MEMORY, "scheduler: out of memory for logits");
    int rc = kr_cache_append_ragged(b->caches + g0, g1 - g0, b->T + g0, b->s1 + row0, b->s2 + row0,
                                    b->st + row0, l1, err);
    for (int g = g0; rc == 0 && g < g1; g++)
        if (b->l1[g]) memcpy(b->l1[g], l1 + (size_t)(g - g0) * v1, (size_t)v1 * sizeof(float));
    free(l1);
    return rc;
}

/* Back to the head of the waiting line, its memory returned and its work forgotten. */
static void preempt(kr_sched *s, sched_job *j) {
    unlink_active(s, j);
    j->ops->reset(j);
    j->err = (kr_error){0};
    j->ready = j->failed = j->stalled = false;
    j->next = s->wait_head;
    s->wait_head = j;
    if (!s->wait_tail) s->wait_tail = j;
    s->stats.waiting++;
    s->stats.waiting_flops += j->flops;
    s->stats.preempted++;
}

/* The whole batch at once; when the pool runs dry, room is made while it can be, then each
 * job's rows go alone and the jobs that still do not fit end. */
static void run_append(kr_sched *s) {
    step_batch *b = &s->batch;
    if (b->n_groups == 0) return;
    kr_error err;
    s->stalled = false;
    for (;;) {
        if (append_groups(s, 0, b->n_groups, 0, &err) == 0) return;
        if (err.code != KR_E_POOL_EXHAUSTED || !s->cfg.make_room || !s->cfg.make_room(s->cfg.ctx))
            break;
    }
    bool progressed = false;
    for (int g0 = 0, row0 = 0; g0 < b->n_groups;) {
        int g1 = g0, rows = 0;
        while (g1 < b->n_groups && b->owner[g1] == b->owner[g0])
            rows += b->T[g1++];
        sched_job *j = b->owner[g0];
        int rc;
        while ((rc = append_groups(s, g0, g1, row0, &j->err)) != 0 &&
               j->err.code == KR_E_POOL_EXHAUSTED && s->cfg.make_room &&
               s->cfg.make_room(s->cfg.ctx))
            ;
        if (rc) {
            for (int g = g0; g < g1; g++) /* its rows are not appended: nothing to copy */
                b->l1[g] = NULL;
            j->ready = false;
            /* no room now: it waits, holding what it has, while the others finish and
             * free theirs; anything else ends it */
            if (j->err.code == KR_E_POOL_EXHAUSTED)
                j->stalled = true;
            else
                j->failed = true;
        } else {
            j->err = (kr_error){0}; /* a try that failed before this one is forgotten */
            progressed = true;
        }
        g0 = g1;
        row0 += rows;
    }
    s->stalled = !progressed;
    if (progressed) return;
    /* every job that had rows is stalled: none will free memory, so the youngest forecast
     * gives its memory back and starts again later, from scratch (its answer is the same:
     * nothing in it depends on when it runs); with no forecast to preempt, it ends (503) */
    sched_job *youngest = NULL;
    for (sched_job *j = s->active; j; j = j->next)
        if (j->stalled) youngest = j;
    if (!youngest) return;
    youngest->stalled = false;
    if (youngest->ops->reset && youngest != s->active)
        preempt(s, youngest);
    else
        youngest->failed = true;
}

/* The s2 logits of every drawing row, in one call (one job at a time when it fails). */
static void run_s2(kr_sched *s) {
    int n = 0, v2 = 1 << s->m->pc.s2_bits;
    for (sched_job *j = s->active; j; j = j->next) {
        if (!j->ready) continue;
        int S = j->n_draw;
        int cap = n + S > s->s2_cap ? sched_next_cap(s->s2_cap, n + S) : s->s2_cap;
        if (cap > s->s2_cap && (sched_resize((void **)&s->s2_caches, cap, sizeof *s->s2_caches) ||
                                sched_resize((void **)&s->s2_a, cap, sizeof *s->s2_a) ||
                                sched_resize((void **)&s->s2_l2, cap * v2, sizeof *s->s2_l2))) {
            kr_fail_code(&j->err, KR_E_NO_MEMORY, "scheduler: out of memory for %d rows", n + S);
            j->ready = false;
            j->failed = true;
            continue;
        }
        s->s2_cap = cap;
        for (int p = 0; p < S; p++) {
            s->s2_caches[n + p] = j->draw_caches[p];
            s->s2_a[n + p] = j->draw_s1[p];
        }
        n += S;
    }
    kr_error err;
    bool whole = n > 0 && kr_cache_s2_logits(s->s2_caches, n, s->s2_a, s->s2_l2, &err) == 0;
    int at = 0;
    for (sched_job *j = s->active; j; j = j->next) {
        if (!j->ready) continue;
        int S = j->n_draw;
        float *l2 = j->draw_l2;
        if (whole)
            memcpy(l2, s->s2_l2 + (size_t)at * v2, (size_t)S * v2 * sizeof(float));
        else if (kr_cache_s2_logits(s->s2_caches + at, S, s->s2_a + at, l2, &j->err)) {
            j->ready = false;
            j->failed = true;
        }
        at += S;
    }
}

int kr_sched_step(kr_sched *s) {
    admit(s);
    step_batch *b = &s->batch;
    b->n_groups = b->n_rows = 0;
    /* jobs whose caller gave up end now */
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (check_cancel(j)) end_active(s, j);
    }
    /* every decode row, then prefill chunks in admission order under the budget: the whole
     * of step-tokens when one job runs alone, an eighth of it while other jobs decode, so
     * that a long prefill or window recompute slows their tokens down little */
    int budget = s->cfg.step_tokens, decode_rows = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) decode_rows = b->n_rows;
        if (pass == 1 && decode_rows > 0 && s->stats.active > 1) {
            int busy = s->cfg.step_tokens / 8;
            budget = busy < 16 ? (s->cfg.step_tokens < 16 ? s->cfg.step_tokens : 16) : busy;
        }
        for (sched_job *j = s->active, *next; j; j = next) {
            next = j->next;
            if (j->ops->rows(s->m, j, &s->batch, pass == 0, &budget)) {
                kr_fail_code(&j->err, KR_E_NO_MEMORY, "scheduler: out of memory for a step");
                end_active(s, j);
            }
        }
    }
    s->stats.rows_last_step = b->n_rows;
    s->stats.prefill_rows_last_step = b->n_rows - decode_rows;
    s->stats.rows += (unsigned long long)b->n_rows;
    s->stats.steps++;
    run_append(s);
    /* what each job makes of its append: the next phase, fresh logits, or its end */
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (j->failed) {
            end_active(s, j);
            continue;
        }
        if (j->stalled) { /* nothing of it ran: its rows (ops->rows) again at the next step */
            j->stalled = false;
            continue;
        }
        int rc = j->ops->appended(s->m, j, &j->err);
        if (rc) end_active(s, j); /* an error, or a job with nothing left to draw */
    }
    for (sched_job *j = s->active; j; j = j->next)
        if (j->ready) j->ops->draw_s1(s->m, j);
    run_s2(s);
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (j->failed) {
            end_active(s, j);
            continue;
        }
        if (!j->ready) continue;
        j->ready = false;
        int rc = j->ops->drawn(s->m, j, &j->err);
        if (rc) end_active(s, j); /* complete (err code KR_OK) or failed */
    }
    return s->stats.waiting + s->stats.active;
}

void kr_sched_stats_get(const kr_sched *s, kr_sched_stats *st) {
    *st = s->stats;
}

void kr_sched_free(kr_sched *s) {
    if (!s) return;
    while (s->active) {
        sched_job *j = s->active;
        kr_fail_code(&j->err, KR_E_CANCELLED, "scheduler: stopped");
        end_active(s, j);
    }
    while (s->wait_head) {
        sched_job *j = s->wait_head;
        s->wait_head = j->next;
        kr_fail_code(&j->err, KR_E_CANCELLED, "scheduler: stopped");
        job_end(s, j);
    }
    step_batch_free(&s->batch);
    free(s->s2_caches);
    free(s->s2_a);
    free(s->s2_l2);
    free(s);
}
