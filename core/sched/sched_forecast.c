/* sched_forecast.c — a forecast as a job of the step scheduler: its context normalised when
 * it starts and encoded in chunks under the step's token budget, then, step by step, each
 * path's next token drawn from a window
 * that is either one cached token longer or (first step, or slid past max_context) filled
 * again: its context part into a prefix that every path forks, then each path's own
 * generated part. The windows are the plan's (kr_forecast_window); long fills are cut into
 * chunks under the step's token budget. Two kinds of job share these operations: a forecast
 * (its context encoded when it starts) and a forecast from a series (its tokens, and its
 * first window forked from the series' predictor cache). */
#include "parallel.h"
#include "sched_impl.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void free_paths(sched_forecast *f) {
    for (int p = 0; f->paths && p < f->job.samples; p++) {
        kr_cache_free(f->paths[p]);
        f->paths[p] = NULL;
    }
}

static void fc_release(sched_job *j) {
    sched_forecast *f = &j->u.fc;
    free_paths(f);
    kr_cache_free(f->prefix);
    KR_FREE_ALL(f->paths, f->l1, f->l2, f->a, f->b, f->rng, f->t1, f->t2, f->st);
    kr_forecast_job_free(&f->job);
    kr_summary_free(&f->sum);
    kr_pool_free(f->own_pool);
}

static void fc_free(sched_job *j, bool failed) {
    if (failed) kr_forecast_result_free(j->u.fc.res);
    fc_release(j);
}

/* Back to how it was queued: its memory and its result's returned, its work forgotten. */
static void fc_reset(sched_job *j) {
    sched_forecast *f = &j->u.fc;
    fc_release(j);
    kr_forecast_result_free(f->res);
    const kr_forecast_request *req = f->req;
    kr_forecast_result *res = f->res;
    const kr_series *series = f->series;
    memset(f, 0, sizeof *f);
    f->req = req;
    f->res = res;
    f->series = series;
}

/* Forks every path from the filled prefix, which is then let go (the forks keep its
 * blocks). */
static int fork_paths(sched_forecast *f, kr_error *err) {
    for (int p = 0; p < f->job.samples; p++)
        if (!(f->paths[p] = kr_cache_fork(f->prefix, err))) return -1;
    kr_cache_free(f->prefix);
    f->prefix = NULL;
    return 0;
}

/* Step i's window must be filled again: its context part (prefix_need tokens from
 * prefix_start) and each path's generated part (g tokens). */
static int enter_window(sched_forecast *f, int i, kr_error *err) {
    fc_state *job = &f->job;
    int L = job->L, S = job->samples, total = L + job->P, start;
    int w = kr_forecast_window(&job->plan, L, i, &start);
    free_paths(f);
    f->prefix_start = start;
    f->prefix_need = L - start > 0 ? L - start : 0;
    f->prefix_done = 0;
    f->g = w - f->prefix_need;
    f->g_done = 0;
    f->chunk = 0;
    int first = L + i - f->g;
    for (int p = 0; p < S; p++)
        for (int t = 0; t < f->g; t++) {
            f->t1[(size_t)p * f->g + t] = job->path_s1[(size_t)p * total + first + t];
            f->t2[(size_t)p * f->g + t] = job->path_s2[(size_t)p * total + first + t];
        }
    for (int t = 0; t < f->g; t++)
        f->st[t] = job->stamps[first + t];
    if (i > 0)
        f->res->usage.recomputed_steps++;
    else
        f->res->usage.cached_steps++;
    if (!(f->prefix = kr_cache_create(f->pool, job->plan.max_context, err))) return -1;
    f->phase = FC_PREFIX;
    if (f->prefix_need == 0) { /* the window is all generated tokens */
        if (fork_paths(f, err)) return -1;
        f->phase = FC_PATHS;
    }
    return 0;
}

/* Step 0 from a series: when its predictor cache holds exactly step 0's window, every
 * path forks it and the first draws use its last position's logits (no prefill). Returns
 * whether it did; false (a window of another max_context, or no pool room for the forks)
 * leaves the window to be filled from the tokens as usual. */
static bool series_window(const kr_model *m, sched_forecast *f) {
    fc_state *job = &f->job;
    int start, cstart, v1 = 1 << m->pc.s1_bits;
    int w = kr_forecast_window(&job->plan, job->L, 0, &start);
    kr_cache *c = kr_series_cache(f->series, &cstart);
    kr_error e;
    if (!c || cstart != start || kr_cache_length(c) != w || kr_cache_s1_logits(c, f->l1, &e))
        return false;
    for (int p = 0; p < job->samples; p++)
        if (!(f->paths[p] = kr_cache_fork(c, &e))) {
            free_paths(f);
            return false;
        }
    for (int p = 1; p < job->samples; p++)
        memcpy(f->l1 + (size_t)p * v1, f->l1, (size_t)v1 * sizeof(float));
    f->res->usage.cached_steps++;
    f->phase = FC_FORKED;
    return true;
}

static int fc_start(const kr_model *m, kr_pool *pool, sched_job *jb, kr_error *err) {
    sched_forecast *f = &jb->u.fc;
    const kr_forecast_request *r = f->req;
    fc_state *job = &f->job;
    double t0 = kr_now_ms();
    f->m = m;
    if (kr_forecast_job_init(m, r, f->series, job, f->res, err)) return -1;
    int S = r->samples, mc = job->plan.max_context;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    f->paths = calloc((size_t)S, sizeof *f->paths);
    f->l1 = malloc((size_t)S * v1 * sizeof(float));
    f->l2 = malloc((size_t)S * v2 * sizeof(float));
    f->a = malloc((size_t)S * sizeof(int32_t));
    f->b = malloc((size_t)S * sizeof(int32_t));
    f->rng = malloc((size_t)S * sizeof(kr_rng));
    f->t1 = malloc((size_t)S * mc * sizeof(int32_t));
    f->t2 = malloc((size_t)S * mc * sizeof(int32_t));
    f->st = malloc((size_t)mc * sizeof(kr_stamp));
    if (!f->paths || !f->l1 || !f->l2 || !f->a || !f->b || !f->rng || !f->t1 || !f->t2 || !f->st)
        return kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for %d paths", S);
    for (int p = 0; p < S; p++)
        kr_rng_seed(&f->rng[p], kr_path_seed(job->seed, p));
    jb->n_draw = S;
    jb->draw_caches = f->paths;
    jb->draw_s1 = f->a;
    jb->draw_l2 = f->l2;
    f->pool = f->series ? kr_series_pool(f->series) : pool;
    if (!f->pool) {
        if (!(f->own_pool = kr_pool_create(m, job->plan.pool_bytes, err))) return -1;
        f->pool = f->own_pool;
    }
    f->res->usage.elapsed_ms = -t0; /* completed when the forecast ends */
    f->i = 0;
    if (job->encoded < job->L) { /* its context is encoded first, a chunk a step */
        f->phase = FC_ENCODE;
        return 0;
    }
    return f->series && series_window(m, f) ? 0 : enter_window(f, 0, err);
}

/* Tokenizer work done outside the batch while the step's rows are gathered: its cost (at
 * least a row) out of the budget and into the step's. */
static void charge(sched_job *jb, step_batch *b, int *budget, double cost) {
    int rows = (int)ceil(cost) > 0 ? (int)ceil(cost) : 1;
    *budget -= rows;
    b->side_rows += rows;
    jb->step_rows += rows;
}

static int fc_rows(const kr_model *m, sched_job *jb, step_batch *b, bool decode, int *budget) {
    sched_forecast *f = &jb->u.fc;
    fc_state *job = &f->job;
    int S = job->samples, total = job->L + job->P, v1 = 1 << m->pc.s1_bits;
    f->chunk = 0;
    if (decode) {
        if (f->phase != FC_DECODE) return 0;
        int n = job->L + f->i;
        for (int p = 0; p < S; p++) {
            size_t at = (size_t)p * total + n - 1;
            if (step_batch_add(b, jb, f->paths[p], 1, job->path_s1 + at, job->path_s2 + at,
                               job->stamps + n - 1, 0, f->l1 + (size_t)p * v1))
                return -1;
        }
        return 0;
    }
    if (*budget <= 0) return 0;
    if (f->phase == FC_SUMMARY) { /* a part now, outside the batch */
        double cost;
        int rc = kr_summary_advance(m, job, &f->sum, *budget, &cost, &jb->err);
        if (rc < 0) return -1;
        charge(jb, b, budget, cost);
        if (rc == 0) return 0;
        if (kr_summary_finish(f->req, job, &f->sum, f->res, &jb->err)) return -1;
        kr_summary_free(&f->sum);
        f->res->usage.generated_tokens = job->samples * job->P;
        f->res->usage.elapsed_ms += kr_now_ms();
        f->summarised = true;
        return 0;
    }
    if (f->phase == FC_ENCODE) {     /* a chunk now, outside the batch; its window at once after */
        if (job->encoded < job->L) { /* as many candles as the budget's rows cost */
            int c = kr_encode_fit(m, job->encoded, job->L - job->encoded, *budget);
            double cost = kr_encode_cost_rows(m, job->encoded, c);
            if (kr_forecast_job_encode(m, job, c, &jb->err)) return -1;
            charge(jb, b, budget, cost);
            b->encoded += c;
        }
        if (job->encoded < job->L || *budget <= 0) return 0;
        if (enter_window(f, 0, &jb->err)) return -1;
    }
    if (f->phase == FC_PREFIX) {
        int c = f->prefix_need - f->prefix_done;
        if (c > *budget) c = *budget;
        int at = f->prefix_start + f->prefix_done;
        bool last = f->prefix_done + c == f->prefix_need && f->g == 0;
        if (step_batch_add(b, jb, f->prefix, c, job->path_s1 + at, job->path_s2 + at,
                           job->stamps + at, 1, last ? f->l1 : NULL))
            return -1;
        f->chunk = c;
        *budget -= c;
    } else if (f->phase == FC_PATHS) {
        int c = f->g - f->g_done;
        if (c > *budget / S) c = *budget / S > 0 ? *budget / S : 1; /* at least a row a path */
        bool last = f->g_done + c == f->g;
        for (int p = 0; p < S; p++) {
            size_t at = (size_t)p * f->g + f->g_done;
            if (step_batch_add(b, jb, f->paths[p], c, f->t1 + at, f->t2 + at, f->st + f->g_done, 1,
                               last ? f->l1 + (size_t)p * v1 : NULL))
                return -1;
        }
        f->chunk = c;
        *budget -= S * c;
    }
    return 0;
}

static int fc_fill_left(const sched_job *jb) {
    const sched_forecast *f = &jb->u.fc;
    int S = f->job.samples;
    if (f->phase == FC_SUMMARY) return (int)ceil(kr_summary_left(f->m, &f->job, &f->sum));
    if (f->phase == FC_ENCODE) { /* then step 0's window */
        int start;
        return f->job.L - f->job.encoded + kr_forecast_window(&f->job.plan, f->job.L, 0, &start);
    }
    if (f->phase == FC_PREFIX) return f->prefix_need - f->prefix_done + S * f->g;
    if (f->phase == FC_PATHS) return S * (f->g - f->g_done);
    return 0;
}

static int fc_appended(const kr_model *m, sched_job *jb, kr_error *err) {
    sched_forecast *f = &jb->u.fc;
    int S = f->job.samples, v1 = 1 << m->pc.s1_bits;
    if (f->phase == FC_SUMMARY) return f->summarised; /* complete once summarised */
    if (f->phase == FC_DECODE || f->phase == FC_FORKED) {
        jb->ready = true;
        return 0;
    }
    if (f->chunk == 0) return 0; /* no room in this step's budget */
    if (f->phase == FC_PREFIX) {
        f->prefix_done += f->chunk;
        if (f->prefix_done < f->prefix_need) return 0;
        if (fork_paths(f, err)) return -1;
        if (f->g == 0) {
            for (int p = 1; p < S; p++)
                memcpy(f->l1 + (size_t)p * v1, f->l1, (size_t)v1 * sizeof(float));
            jb->ready = true;
        } else {
            f->phase = FC_PATHS;
        }
        return 0;
    }
    f->g_done += f->chunk;
    if (f->g_done == f->g) jb->ready = true;
    return 0;
}

/* Each path draws from its own stream, so paths can be drawn on any thread. */
typedef struct {
    float *logits;
    int vocab;
    const kr_sampling *sampling;
    kr_rng *rng;
    int32_t *out;
} draw_job;

static void draw_path(void *arg, int p, int worker) {
    (void)worker;
    const draw_job *d = arg;
    d->out[p] = kr_sample(d->logits + (size_t)p * d->vocab, d->vocab, d->sampling, &d->rng[p]);
}

static void draw_all(sched_forecast *f, float *logits, int vocab, int32_t *out) {
    draw_job d = {logits, vocab, &f->job.sampling, f->rng, out};
    kr_parallel_for(f->job.samples, draw_path, &d);
}

static void fc_draw_s1(const kr_model *m, sched_job *jb) {
    draw_all(&jb->u.fc, jb->u.fc.l1, 1 << m->pc.s1_bits, jb->u.fc.a);
}

static int fc_drawn(const kr_model *m, sched_job *jb, kr_error *err) {
    sched_forecast *f = &jb->u.fc;
    fc_state *job = &f->job;
    draw_all(f, f->l2, 1 << m->pc.s2_bits, f->b);
    int total = job->L + job->P, at = job->L + f->i;
    for (int p = 0; p < job->samples; p++) {
        job->path_s1[(size_t)p * total + at] = f->a[p];
        job->path_s2[(size_t)p * total + at] = f->b[p];
    }
    if (++f->i == job->P) { /* drawn: the pool back first, then the summary, in parts */
        free_paths(f);
        kr_pool_free(f->own_pool);
        f->own_pool = NULL;
        if (kr_summary_begin(m, job, f->req->use_cache, &f->sum, err)) return -1;
        f->phase = FC_SUMMARY;
        return 0;
    }
    int start;
    kr_forecast_window(&job->plan, job->L, f->i, &start);
    if (start > 0) return enter_window(f, f->i, err) ? -1 : 0;
    f->phase = FC_DECODE;
    f->res->usage.cached_steps++;
    return 0;
}

/* ---- the two kinds, and how they are queued ---------------------------------------------- */

/* Both kinds run the same operations; a series forecast's caches come from the series'
 * pool, which its plan does not reserve. */
const sched_ops sched_forecast_ops = {SCHED_OPS("forecast", fc), .reset = fc_reset,
                                      .plans_pool = true};
const sched_ops sched_series_ops = {SCHED_OPS("forecast", fc), .reset = fc_reset,
                                    .plans_pool = false};

static int add(kr_sched *s, const sched_ops *ops, const kr_model *m, kr_pool *pool,
               const kr_series *series, const kr_forecast_request *req, kr_forecast_result *res,
               void *tag, kr_error *err) {
    kr_forecast_plan plan;
    memset(res, 0, sizeof *res);
    if (!m) return kr_fail_code(err, KR_E_INVALID, "forecast: no model");
    if (kr_forecast_plan_make(m, req, &plan, err)) return -1;
    if (!req->use_cache)
        return kr_fail_code(err, KR_E_INVALID,
                            "use_cache: false runs the reference path, which the scheduler "
                            "does not batch; call kr_forecast");
    sched_job *j = sched_job_new(ops, m, pool, tag, &req->cancel, err);
    if (!j) return -1;
    j->rows = req->samples;
    j->flops = plan.flops;
    j->class_flops = req->class_flops;
    j->pool_bytes = plan.pool_bytes;
    j->u.fc.req = req;
    j->u.fc.res = res;
    j->u.fc.series = series;
    sched_enqueue(s, j);
    return 0;
}

int kr_sched_add_forecast(kr_sched *s, const kr_forecast_request *req, kr_forecast_result *res,
                          void *tag, kr_error *err) {
    return add(s, &sched_forecast_ops, s->m, s->pool, NULL, req, res, tag, err);
}

int kr_sched_add_forecast_on(kr_sched *s, const kr_model *m, kr_pool *pool,
                             const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                             kr_error *err) {
    return add(s, &sched_forecast_ops, m, pool, NULL, req, res, tag, err);
}

int kr_sched_add_forecast_series(kr_sched *s, const kr_series *series,
                                 const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                                 kr_error *err) {
    if (!series) return kr_fail_code(err, KR_E_INVALID, "forecast: no series");
    if (req->context.n != kr_series_length(series) || !req->norm.pinned)
        return kr_fail_code(err, KR_E_INVALID,
                            "forecast: the request's candles are not the series' (see "
                            "kr_series_request)");
    return add(s, &sched_series_ops, kr_series_model(series), kr_series_pool(series), series, req,
               res, tag, err);
}
