/* sched.c — the step scheduler's jobs in and out: creation and end of the scheduler, the
 * waiting line, admission (max_rows, the pool's room), cancellation, preemption, and each
 * job's end with the caller's callback. One step is sched_step.c's; what a job does at each
 * point of a step is its kind's table of operations (sched_ops, sched_impl.h).
 */
#include "sched_config.h"
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- the scheduler ------------------------------------------------------------------------ */

/* the weight of the newest light job in the moving average of their cost alone */
#define LIGHT_ALONE_WEIGHT 0.25

kr_sched *kr_sched_create(const kr_model *m, kr_pool *pool, const kr_sched_config *cfg,
                          kr_error *err) {
    kr_sched *s = kr_zalloc(sizeof *s, err, "scheduler: out of memory");
    if (!s) return NULL;
    s->m = m;
    s->pool = pool;
    if (cfg) s->cfg = *cfg;
    sched_config_resolve(&s->cfg);
    return s;
}

bool sched_make_room(kr_sched *s, kr_pool *pool) {
    if (s->cfg.make_room_in) return s->cfg.make_room_in(pool, s->cfg.ctx);
    return s->cfg.make_room && s->cfg.make_room(s->cfg.ctx);
}

/* ---- jobs in: the waiting line and admission ----------------------------------------------- */

sched_job *sched_job_new(const sched_ops *ops, const kr_model *m, kr_pool *pool, void *tag,
                         const kr_cancel *cancel, kr_error *err) {
    sched_job *j = kr_zalloc(sizeof *j, err, "scheduler: out of memory for a job");
    if (!j) return NULL;
    j->ops = ops;
    j->m = m;
    j->pool = pool;
    j->tag = tag;
    j->cancel = cancel;
    return j;
}

/* Ends j (already unlinked): its memory back (a failed job's result too), then the caller's
 * callback. */
static void job_end(kr_sched *s, sched_job *j) {
    kr_error err = j->err;
    void *tag = j->tag;
    if (j->light && err.code == KR_OK && j->alone_rows > 0) {
        double *avg = &s->stats.light_alone_rows;
        *avg = *avg > 0 ? *avg + LIGHT_ALONE_WEIGHT * (j->alone_rows - *avg) : j->alone_rows;
    }
    j->ops->free(j, err.code != KR_OK);
    free(j);
    if (s->cfg.done) s->cfg.done(tag, &err, s->cfg.ctx);
}

void sched_enqueue(kr_sched *s, sched_job *j) {
    j->next = NULL;
    j->light = (j->class_flops > j->flops ? j->class_flops : j->flops) <= s->cfg.light_flops;
    if (s->wait_tail)
        s->wait_tail->next = j;
    else
        s->wait_head = j;
    s->wait_tail = j;
    s->stats.waiting++;
    s->stats.waiting_flops += j->flops;
}

/* 0 to go on, else the job's error is set. */
int sched_check_cancel(sched_job *j) {
    return kr_check_cancel(j->cancel, j->ops->what, &j->err);
}

/* Takes j out of the waiting line; prev is the job before it (NULL: j is the head). */
static void unlink_waiting(kr_sched *s, sched_job *prev, sched_job *j) {
    if (prev)
        prev->next = j->next;
    else
        s->wait_head = j->next;
    if (s->wait_tail == j) s->wait_tail = prev;
}

/* Waiting jobs whose caller gave up end without computing, wherever they are in line, so
 * that they hold no place. */
static void drop_cancelled(kr_sched *s) {
    sched_job *prev = NULL;
    for (sched_job *j = s->wait_head, *next; j; j = next) {
        next = j->next;
        if (!sched_check_cancel(j)) {
            prev = j;
            continue;
        }
        unlink_waiting(s, prev, j);
        s->stats.waiting--;
        s->stats.waiting_flops -= j->flops;
        if (s->stats.waiting == 0) s->stats.waiting_flops = 0;
        job_end(s, j);
    }
}

/* The plans' pool bytes of the running forecasts on pool (each model has its own). */
static size_t committed(const kr_sched *s, const kr_pool *pool) {
    size_t n = 0;
    for (const sched_job *a = s->active; a; a = a->next)
        if (a->pool == pool && a->ops->plans_pool) n += a->pool_bytes;
    return n;
}

/* Whether the job's pool's free memory covers what a forecast's plan may take, on top of
 * what the running forecasts' plans on that pool may still take (counted whole: what they
 * hold is in the used bytes too, so this errs on the side of waiting). A job that still
 * finds no room mid-way waits (stalls) and, at worst, is preempted (run_append). */
static bool pool_has_room(kr_sched *s, const sched_job *j) {
    if (!j->pool || !j->ops->plans_pool) return true;
    kr_pool_stats st;
    kr_pool_stats_get(j->pool, &st);
    size_t free_bytes = st.bytes_total - st.bytes_used, held = committed(s, j->pool);
    return free_bytes >= held && free_bytes - held >= j->pool_bytes;
}

/* Starts j (already out of the waiting line): its state made ready (or it ends), then it
 * joins the active jobs; whether it did. */
static bool start_job(kr_sched *s, sched_job *j, bool cancelled) {
    s->stats.waiting--;
    s->stats.waiting_flops -= j->flops;
    if (s->stats.waiting == 0) s->stats.waiting_flops = 0;
    int rc = cancelled ? -1 : j->ops->start(j->m, j->pool, j, &j->err);
    /* a generation takes its blocks up front: room is made for it while it can be */
    while (rc && j->ops->start_makes_room && j->err.code == KR_E_POOL_EXHAUSTED &&
           sched_make_room(s, j->pool)) {
        j->err = (kr_error){0}; /* a success leaves it as it is */
        rc = j->ops->start(j->m, j->pool, j, &j->err);
    }
    if (rc) {
        job_end(s, j);
        return false;
    }
    j->next = NULL;
    sched_job **tail = &s->active;
    while (*tail)
        tail = &(*tail)->next;
    *tail = j;
    s->active_rows += j->rows;
    s->stats.active++;
    s->stats.light_active += j->light;
    if (j->light) s->light_seen_ms = kr_now_ms();
    /* a job that starts beside a light one sits steps out as if it had just joined one */
    j->last_ms = kr_now_ms();
    if (s->cfg.started) s->cfg.started(j->tag, j->light, s->cfg.ctx);
    return true;
}

/* The window rows (and context candles) the active heavy jobs of model m still have to fill. */
static int heavy_backlog(const kr_sched *s, const kr_model *m) {
    int n = 0;
    for (const sched_job *j = s->active; j; j = j->next)
        if (!j->light && j->m == m) n += j->ops->fill_left(j);
    return n;
}

/* Whether j fits beside the active jobs: its decode rows within max_rows and its plan in
 * the pool (one always may, when none is active). */
static bool fits(kr_sched *s, const sched_job *j) {
    return !s->active || (s->active_rows + j->rows <= s->cfg.max_rows && pool_has_room(s, j));
}

/* Each model's heavy backlog while admitting: a few models remembered, the others counted
 * again when asked. */
enum { BACKLOG_MODELS = 8 };
typedef struct {
    const kr_model *m[BACKLOG_MODELS];
    int rows[BACKLOG_MODELS], n;
} backlogs;

static int *backlog_of(const kr_sched *s, backlogs *bl, const kr_model *m, int *spare) {
    for (int i = 0; i < bl->n; i++)
        if (bl->m[i] == m) return &bl->rows[i];
    int *at = spare;
    if (bl->n < BACKLOG_MODELS) bl->m[bl->n] = m, at = &bl->rows[bl->n++];
    *at = heavy_backlog(s, m);
    return at;
}

/* Waiting jobs start, first come first served, while they fit (fits); when the first in
 * line does not, light jobs behind it that fit start still (a short request never waits
 * for a heavy one's rows; light jobs hold few rows and end soon, so the heavy one at the
 * head starts as soon as the rows it needs are free). Heavy jobs start only while the
 * running heavy ones of their model have less than a step's budget of rows left to fill
 * (the first always may; the budget is each model's, sched_step.c): more would only wait
 * in the steps, each holding its plan's pool memory, where a light job that comes would
 * not find room. */
void sched_admit(kr_sched *s) {
    drop_cancelled(s);
    /* while the pool has no room for the jobs already running, no new one starts */
    sched_job *prev = NULL;
    bool blocked = false; /* a job ahead did not fit: only light ones pass it */
    backlogs bl = {.n = 0};
    for (sched_job *j = s->wait_head, *next; j && !(s->stalled && s->active); j = next) {
        next = j->next;
        bool cancelled = sched_check_cancel(j) != 0;
        int spare, *backlog = j->light ? NULL : backlog_of(s, &bl, j->m, &spare);
        bool full = backlog && *backlog > 0 && *backlog >= s->cfg.step_tokens;
        if (!cancelled && (!fits(s, j) || (blocked && !j->light) || full)) {
            blocked |= !full; /* a full model holds back its own heavy jobs only */
            prev = j;
            continue;
        }
        unlink_waiting(s, prev, j);
        if (start_job(s, j, cancelled) && backlog) *backlog += j->ops->fill_left(j);
    }
}

static void unlink_active(kr_sched *s, sched_job *j) {
    for (sched_job **p = &s->active; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            s->active_rows -= j->rows;
            s->stats.active--;
            s->stats.light_active -= j->light;
            return;
        }
}

void sched_end_active(kr_sched *s, sched_job *j) {
    unlink_active(s, j);
    job_end(s, j);
}

/* ---- preemption ------------------------------------------------------------------------- */

/* Back to the head of the waiting line, its memory returned and its work forgotten. */
void sched_preempt(kr_sched *s, sched_job *j) {
    unlink_active(s, j);
    j->ops->reset(j);
    j->err = (kr_error){0};
    j->ready = j->failed = j->stalled = j->out = false;
    j->sat_out = 0;
    j->last_ms = 0;
    j->next = s->wait_head;
    s->wait_head = j;
    if (!s->wait_tail) s->wait_tail = j;
    s->stats.waiting++;
    s->stats.waiting_flops += j->flops;
    s->stats.preempted++;
}

/* ---- the scheduler's end ---------------------------------------------------------------- */

void kr_sched_stats_get(const kr_sched *s, kr_sched_stats *st) {
    *st = s->stats;
}

void kr_sched_free(kr_sched *s) {
    if (!s) return;
    while (s->active) {
        sched_job *j = s->active;
        kr_fail_code(&j->err, KR_E_CANCELLED, "scheduler: stopped");
        sched_end_active(s, j);
    }
    while (s->wait_head) {
        sched_job *j = s->wait_head;
        s->wait_head = j->next;
        kr_fail_code(&j->err, KR_E_CANCELLED, "scheduler: stopped");
        job_end(s, j);
    }
    step_batch_free(&s->batch);
    step_batch_free(&s->regroup);
    KR_FREE_ALL(s->order, s->s2_caches, s->s2_a, s->s2_l2, s->l1_buf, s->mstats, s);
}
