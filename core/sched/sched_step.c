/* sched_step.c — one step of the scheduler (kr_sched_step): admission, every active job's
 * rows into one ragged append per model (room made, jobs stalled or preempted when a pool
 * runs dry), the s1 draws, one batched s2-logits call per model for every drawing row, the
 * s2 draws. sched_impl.h says what a step is.
 */
#include <limits.h>

#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- the step cost ------------------------------------------------------------------------ */

/* A measured step's weight in the fit decays by this factor a step: about the last hundred
 * steps count. */
#define COST_DECAY 0.99

static void cost_observe(kr_sched *s, int rows, double ms) {
    s->cost_w = s->cost_w * COST_DECAY + 1;
    s->cost_n = s->cost_n * COST_DECAY + rows;
    s->cost_t = s->cost_t * COST_DECAY + ms;
    s->cost_nn = s->cost_nn * COST_DECAY + (double)rows * rows;
    s->cost_nt = s->cost_nt * COST_DECAY + rows * ms;
}

bool sched_step_cost(const kr_sched *s, double *fixed, double *per_row) {
    if (s->cost_w < 8) return false; /* too few steps yet */
    double mn = s->cost_n / s->cost_w, mt = s->cost_t / s->cost_w;
    double var = s->cost_nn / s->cost_w - mn * mn, cov = s->cost_nt / s->cost_w - mn * mt;
    if (var < 64) return false; /* steps of about one size: no slope to tell */
    double b = cov / var, a = mt - b * mn;
    if (!(b > 0)) return false;
    *fixed = a > 0 ? a : 0;
    *per_row = b;
    return true;
}

/* A measured fixed cost counts as at most an eighth of step-tokens' rows: a fit thrown off
 * by a noisy machine (a slope near zero) cannot give the heavy jobs whole steps. */
double sched_fixed_rows(const kr_sched *s) {
    double a, b;
    if (s->cfg.step_fixed_rows > 0) return s->cfg.step_fixed_rows;
    if (!sched_step_cost(s, &a, &b)) return -1;
    return a / b < s->cfg.step_tokens / 8.0 ? a / b : s->cfg.step_tokens / 8.0;
}

/* The window rows that jobs other than the light ones may add to a step that holds `rows`
 * rows so far, so that it takes at most light_step_factor times as long as without them;
 * fallback when the step cost is not known yet. At least one. */
static int others_rows(const kr_sched *s, int rows, int fallback) {
    double fixed_rows = sched_fixed_rows(s);
    if (fixed_rows < 0) return fallback > 0 ? fallback : 1;
    double n = (s->cfg.light_step_factor - 1) * (fixed_rows + rows);
    return n < 1 ? 1 : n > s->cfg.step_tokens ? s->cfg.step_tokens : (int)n;
}

/* The window rows a step without light jobs may hold beside its `rows` so far, while light
 * jobs came recently: what keeps its cost within light_wait times a light job's alone (at
 * least one row); budget when that does not apply. */
static int light_wait_rows(kr_sched *s, int rows, int budget) {
    double fixed_rows = sched_fixed_rows(s), alone = s->stats.light_alone_rows;
    s->stats.light_recent = s->cfg.light_recent_ms > 0 && s->light_seen_ms > 0 && alone > 0 &&
                            fixed_rows >= 0 &&
                            kr_now_ms() - s->light_seen_ms < s->cfg.light_recent_ms;
    if (!s->stats.light_recent) return budget;
    double n = s->cfg.light_wait * alone - fixed_rows - rows;
    return n < 1 ? 1 : n < budget ? (int)n : budget;
}

/* Each light job's cost alone, step by step: the step's fixed cost and its own rows (the
 * batch's owners are read here, before any job of the step ends and is freed). */
static void count_light_rows(kr_sched *s) {
    const step_batch *b = &s->batch;
    for (int g = 0; g < b->n_groups; g++)
        b->owner[g]->step_rows += b->T[g];
    double fixed_rows = sched_fixed_rows(s);
    for (sched_job *j = s->active; j; j = j->next)
        if (j->light && j->step_rows > 0 && fixed_rows >= 0)
            j->alone_rows += fixed_rows + j->step_rows;
}

/* ---- one step ----------------------------------------------------------------------------- */

/* The append of groups [g0, g1) (rows from row0), with the logits copied where wanted:
 * written straight into the groups' arrays when these follow one another (a forecast's
 * paths), else through the scheduler's kept buffer (an append writes nothing when it
 * fails). */
static int append_groups(kr_sched *s, int g0, int g1, int row0, kr_error *err) {
    step_batch *b = &s->batch;
    int v1 = 1 << b->owner[g0]->m->pc.s1_bits;
    float *direct = b->l1[g0];
    for (int g = g0; direct && g < g1; g++)
        if (b->l1[g] != direct + (size_t)(g - g0) * v1) direct = NULL;
    if (direct)
        return kr_cache_append_ragged(b->caches + g0, g1 - g0, b->T + g0, b->s1 + row0,
                                      b->s2 + row0, b->st + row0, direct, err);
    if (g1 - g0 > s->l1_cap) {
        int cap = sched_next_cap(s->l1_cap, g1 - g0);
        if (sched_resize((void **)&s->l1_buf, cap * v1, sizeof *s->l1_buf))
            return kr_fail_code(err, KR_E_NO_MEMORY, "scheduler: out of memory for logits");
        s->l1_cap = cap;
    }
    float *l1 = s->l1_buf;
    int rc = kr_cache_append_ragged(b->caches + g0, g1 - g0, b->T + g0, b->s1 + row0, b->s2 + row0,
                                    b->st + row0, l1, err);
    for (int g = g0; rc == 0 && g < g1; g++)
        if (b->l1[g]) memcpy(b->l1[g], l1 + (size_t)(g - g0) * v1, (size_t)v1 * sizeof(float));
    return rc;
}

/* The groups [g0, g1) of one model at once; when its pool runs dry, room is made while it
 * can be, then each job's rows go alone and the jobs that still do not fit wait (stalled)
 * or end. Whether any of its rows ran. */
static bool append_model(kr_sched *s, int g0, int g1, int row0) {
    step_batch *b = &s->batch;
    kr_error err;
    for (;;) {
        if (append_groups(s, g0, g1, row0, &err) == 0) return true;
        if (err.code != KR_E_POOL_EXHAUSTED || !sched_make_room(s, b->owner[g0]->pool)) break;
    }
    bool progressed = false;
    for (int a = g0, r0 = row0; a < g1;) {
        int z = a, rows = 0;
        while (z < g1 && b->owner[z] == b->owner[a])
            rows += b->T[z++];
        sched_job *j = b->owner[a];
        int rc;
        while ((rc = append_groups(s, a, z, r0, &j->err)) != 0 &&
               j->err.code == KR_E_POOL_EXHAUSTED && sched_make_room(s, j->pool))
            ;
        if (rc) {
            for (int g = a; g < z; g++) /* its rows are not appended: nothing to copy */
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
        a = z;
        r0 += rows;
    }
    return progressed;
}

/* The batch, one append per model (its groups are grouped by model, regroup); when every
 * job with rows stalled, the youngest forecast is preempted. */
static void run_append(kr_sched *s) {
    step_batch *b = &s->batch;
    if (b->n_groups == 0) return;
    bool progressed = false;
    for (int g0 = 0, row0 = 0; g0 < b->n_groups;) {
        int g1 = g0, rows = 0;
        while (g1 < b->n_groups && b->owner[g1]->m == b->owner[g0]->m)
            rows += b->T[g1++];
        const double t0 = kr_now_ms();
        progressed |= append_model(s, g0, g1, row0);
        sched_model_time(s, b->owner[g0]->m, rows, kr_now_ms() - t0);
        g0 = g1;
        row0 += rows;
    }
    s->stalled = !progressed;
    /* jobs that sat this step out go on at the next, when nothing sits out (short_pool) */
    if (progressed || s->sitting_out) return;
    /* every job that had rows is stalled: none will free memory, so the youngest forecast
     * gives its memory back and starts again later, from scratch (its answer is the same:
     * nothing in it depends on when it runs); with no forecast to preempt, it ends (503) */
    sched_job *youngest = NULL;
    for (sched_job *j = s->active; j; j = j->next)
        if (j->stalled) youngest = j;
    if (!youngest) return;
    youngest->stalled = false;
    if (youngest->ops->reset && youngest != s->active)
        sched_preempt(s, youngest);
    else
        youngest->failed = true;
}

/* The batch's groups regrouped so that each model's are consecutive (models in the order
 * they first come, each model's groups in their order): one append per model. Nothing
 * changes when the step holds one model, or when out of memory (the append then goes
 * group run by group run, as it is). */
static void regroup(kr_sched *s) {
    step_batch *b = &s->batch, *r = &s->regroup;
    bool mixed = false;
    for (int g = 1; g < b->n_groups && !mixed; g++)
        mixed = b->owner[g]->m != b->owner[0]->m;
    if (!mixed) return;
    r->n_groups = r->n_rows = 0;
    for (int g = 0; g < b->n_groups; g++) {
        const kr_model *m = b->owner[g]->m;
        bool first = true;
        for (int e = 0; e < g && first; e++)
            first = b->owner[e]->m != m;
        if (!first) continue;
        for (int h = 0, row = 0; h < b->n_groups; row += b->T[h++]) {
            if (b->owner[h]->m != m) continue;
            if (step_batch_add(r, b->owner[h], b->caches[h], b->T[h], b->s1 + row, b->s2 + row,
                               b->st + row, 1, b->l1[h]))
                return;
        }
    }
    r->side_rows = b->side_rows;
    r->encoded = b->encoded;
    step_batch t = *b;
    *b = *r;
    *r = t;
}

/* The s2 logits of every drawing row of model m, in one call (one job at a time when it
 * fails); a job that draws alone gets them straight into its array. */
static void run_s2_model(kr_sched *s, const kr_model *m) {
    int n = 0, v2 = 1 << m->pc.s2_bits, n_ready = 0;
    sched_job *alone = NULL;
    for (sched_job *j = s->active; j; j = j->next)
        if (j->ready && j->m == m) {
            n_ready++;
            alone = j;
        }
    if (n_ready == 1) {
        if (kr_cache_s2_logits(alone->draw_caches, alone->n_draw, alone->draw_s1, alone->draw_l2,
                               &alone->err)) {
            alone->ready = false;
            alone->failed = true;
        }
        return;
    }
    for (sched_job *j = s->active; j; j = j->next) {
        if (!j->ready || j->m != m) continue;
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
        if (!j->ready || j->m != m) continue;
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

/* The s2 logits of every drawing row: one call per model, models in the order their first
 * drawing job came. */
static void run_s2(kr_sched *s) {
    for (sched_job *j = s->active; j; j = j->next)
        j->drawing = j->ready; /* a failed call clears ready: drawing keeps who drew */
    for (sched_job *j = s->active; j; j = j->next) {
        if (!j->drawing) continue;
        bool first = true;
        for (sched_job *e = s->active; e != j && first; e = e->next)
            first = !(e->drawing && e->m == j->m);
        if (!first) continue;
        const double t0 = kr_now_ms();
        run_s2_model(s, j->m);
        sched_model_time(s, j->m, 0, kr_now_ms() - t0);
    }
}

/* Ends j if its rows could not run this step; whether it did. */
static bool ended_failed(kr_sched *s, sched_job *j) {
    if (!j->failed) return false;
    sched_end_active(s, j);
    return true;
}

/* A job that had window rows to fill and got none this many steps in a row goes first. */
enum { AGE_STEPS = 8 };

/* Whether a fills its window before b: light jobs first; in each class the aged first,
 * then the least left to fill; ties (and the aged among themselves) in admission order,
 * which the insertion keeps. */
static bool fills_before(const sched_job *a, const sched_job *b) {
    if (a->light != b->light) return a->light;
    bool aged_a = a->starved >= AGE_STEPS, aged_b = b->starved >= AGE_STEPS;
    if (aged_a != aged_b) return aged_a;
    return !aged_a && a->ops->fill_left(a) < b->ops->fill_left(b);
}

/* This step's window-fill order in s->order; how many jobs, or -1 when out of memory. */
static int fill_order(kr_sched *s) {
    int n = 0;
    for (sched_job *j = s->active; j; j = j->next)
        n++;
    if (n > s->order_cap) {
        int cap = sched_next_cap(s->order_cap, n);
        if (sched_resize((void **)&s->order, cap, sizeof *s->order)) return -1;
        s->order_cap = cap;
    }
    int k = 0;
    for (sched_job *j = s->active; j; j = j->next) {
        int at = k++;
        while (at > 0 && fills_before(j, s->order[at - 1])) {
            s->order[at] = s->order[at - 1];
            at--;
        }
        s->order[at] = j;
    }
    return n;
}

/* Which jobs sit this step out (j->out): while a light job is active, the others, each
 * until it has sat out sit_out_steps steps in a row or sit_out_ms have passed since its
 * last step; none while a job waits for pool memory (the one waiting may need what a job
 * that sits out would free by finishing). How many sit out. */
static int sit_out(kr_sched *s, double t) {
    bool light_on = s->stats.light_active > 0 && !s->short_pool && s->cfg.sit_out_steps > 0;
    int n = 0;
    for (sched_job *j = s->active; j; j = j->next) {
        j->out = light_on && !j->light && j->last_ms > 0 && j->sat_out < s->cfg.sit_out_steps &&
                 t - j->last_ms < s->cfg.sit_out_ms;
        if (j->out) {
            j->sat_out++;
            n++;
        } else {
            j->sat_out = 0;
            j->last_ms = t;
        }
    }
    s->stats.sat_out += (unsigned long long)n;
    return n;
}

/* The step's start: admission, the jobs whose caller gave up ended, who sits out. A job
 * that sits out adds no rows and does nothing after the append: it takes the step after
 * where it left off (its state is as its last appended/drawn left it). */
static void begin_step(kr_sched *s) {
    sched_admit(s);
    step_batch *b = &s->batch;
    b->n_groups = b->n_rows = b->side_rows = b->encoded = 0;
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (sched_check_cancel(j)) sched_end_active(s, j);
    }
    s->sitting_out = sit_out(s, kr_now_ms());
    for (sched_job *j = s->active; j; j = j->next)
        j->step_rows = 0;
}

/* A job's rows could not be added: it ends (its error, or out of memory). */
static void end_unadded(kr_sched *s, sched_job *j) {
    if (!j->err.code) kr_fail_code(&j->err, KR_E_NO_MEMORY, "scheduler: out of memory for a step");
    sched_end_active(s, j);
}

/* Every decode row of the jobs that take part. */
static void add_decode_rows(kr_sched *s) {
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        int none = 0;
        if (!j->out && j->ops->rows(j->m, j, &s->batch, true, &none)) end_unadded(s, j);
    }
}

/* The budget model m's window fills took so far in this step: those of the jobs before
 * the k-th in the fill order. */
static int model_fill_rows(const kr_sched *s, int k, const kr_model *m) {
    int rows = 0;
    for (int i = 0; i < k; i++)
        if (s->order[i]->m == m) rows += s->order[i]->fill_rows;
    return rows;
}

/* Whether model m's pass in this step decodes beside other jobs of m: it holds decode rows
 * (among the batch's first decode_groups groups) and more than one job of m is active. */
static bool model_busy(const kr_sched *s, int decode_groups, const kr_model *m) {
    int jobs = 0;
    for (const sched_job *j = s->active; j && jobs < 2; j = j->next)
        jobs += j->m == m;
    for (int g = 0; jobs > 1 && g < decode_groups; g++)
        if (s->batch.owner[g]->m == m) return true;
    return false;
}

/* Then prefill and window-recompute chunks (and the encodes and summaries that run while
 * they are gathered) under the budget: the whole of step-tokens when one job runs alone,
 * an eighth of it while other jobs of its model decode, so that a long prefill or window
 * recompute slows their tokens down little, and less while light jobs come (light_wait_rows);
 * shared the cheapest fill first, so a short request's prefill never waits behind a long
 * one's recompute, and a job passed over AGE_STEPS steps in a row first of all, so none
 * starves. That budget, and the light jobs' whole of step-tokens, is each model's: a step of
 * several models makes one pass per model, each planned as a one-model step would be, so mixing
 * models does not make their prefills take more steps; what bounds the step's time for light jobs
 * (light_wait_rows, others_rows) is over all models. While a light job runs, the light ones fill
 * first under the whole of step-tokens, and the others add only the rows that keep the step within
 * light_step_factor of its time without them (others_rows), in the steps they do not sit
 * out (sit_out): a light job's every step stays short while the heavy ones still advance.
 * A job that sits out keeps its starved count: it was not passed over. */
static void add_window_rows(kr_sched *s, int decode_rows, int decode_groups) {
    step_batch *b = &s->batch;
    int busy = s->cfg.step_tokens / 8;
    busy = busy < 16 ? (s->cfg.step_tokens < 16 ? s->cfg.step_tokens : 16) : busy;
    bool light_on = s->stats.light_active > 0;
    /* no light job now, but one may come mid-step: a short step while they come */
    int step_left = light_on ? INT_MAX : light_wait_rows(s, decode_rows, INT_MAX);
    int others = -1; /* set at the first other job */
    int n = fill_order(s);
    for (int k = 0; k < n; k++) {
        sched_job *j = s->order[k];
        j->fill_rows = 0;
        if (j->out) continue;
        const int budget = model_busy(s, decode_groups, j->m) ? busy : s->cfg.step_tokens;
        int own = budget - model_fill_rows(s, k, j->m);
        own = own < step_left ? own : step_left;
        int *bud = &own;
        if (light_on && j->light) { /* light ones fill first: only light fills came before */
            own = s->cfg.step_tokens - model_fill_rows(s, k, j->m);
        } else if (light_on) {
            if (others < 0) others = others_rows(s, b->n_rows + b->side_rows, budget);
            bud = &others;
        }
        int before = *bud, left = j->ops->fill_left(j);
        if (j->ops->rows(j->m, j, b, false, bud)) {
            end_unadded(s, j);
            continue;
        }
        j->fill_rows = before - *bud;
        if (bud == &own) step_left -= j->fill_rows;
        j->starved = left > 0 && *bud == before ? j->starved + 1 : 0;
    }
    int all = busy < step_left ? busy : step_left; /* no order (out of memory): one short budget */
    for (sched_job *j = s->active, *next; n < 0 && j; j = next) { /* and jobs as they came */
        next = j->next;
        if (!j->out && j->ops->rows(j->m, j, b, false, &all)) end_unadded(s, j);
    }
}

/* What each job makes of its append: the next phase, fresh logits, or its end. */
static void after_append(kr_sched *s) {
    s->short_pool = false;
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (ended_failed(s, j)) continue;
        if (j->out) continue; /* it sat out: nothing of it ran */
        if (j->stalled) {     /* nothing of it ran: its rows (ops->rows) again at the next step */
            j->stalled = false;
            s->short_pool = true;
            continue;
        }
        int rc = j->ops->appended(j->m, j, &j->err);
        if (rc) sched_end_active(s, j); /* an error, or a job with nothing left to do */
    }
}

/* The s2 draws done, each drawing job records its tokens, and ends when complete. */
static void after_draw(kr_sched *s) {
    for (sched_job *j = s->active, *next; j; j = next) {
        next = j->next;
        if (ended_failed(s, j)) continue;
        if (!j->ready) continue;
        j->ready = false;
        int rc = j->ops->drawn(j->m, j, &j->err);
        if (rc) sched_end_active(s, j); /* complete (err code KR_OK) or failed */
    }
}

int kr_sched_step(kr_sched *s) {
    step_batch *b = &s->batch;
    begin_step(s);
    add_decode_rows(s);
    const int decode_rows = b->n_rows, decode_groups = b->n_groups;
    const double t0 = kr_now_ms(); /* the step's cost counts the encodes and summaries too */
    add_window_rows(s, decode_rows, decode_groups);
    regroup(s);
    s->stats.rows_last_step = b->n_rows;
    s->stats.prefill_rows_last_step = b->n_rows - decode_rows;
    s->stats.encoded_last_step = b->encoded;
    s->stats.encode_rows_last_step = b->side_rows;
    s->stats.rows += (unsigned long long)b->n_rows;
    s->stats.steps++;
    count_light_rows(s); /* before any job of the step can end */
    run_append(s);
    after_append(s);
    for (sched_job *j = s->active; j; j = j->next)
        if (j->ready) j->ops->draw_s1(j->m, j);
    run_s2(s);
    if (b->n_rows + b->side_rows > 0) cost_observe(s, b->n_rows + b->side_rows, kr_now_ms() - t0);
    if (!sched_step_cost(s, &s->stats.step_ms_fixed, &s->stats.step_ms_per_row))
        s->stats.step_ms_fixed = s->stats.step_ms_per_row = 0;
    after_draw(s);
    return s->stats.waiting + s->stats.active;
}
