/* forecast.c — candles in, probabilistic forecast out (upstream's KronosPredictor.predict
 * and auto_regressive_inference): the plain reference path, and the cached path that
 * decodes every sample path of one or many requests in lockstep on KV caches.
 *
 * Each request runs its plan (plan.c): the same windows, step by step, on either path.
 * Requests batched together share only the products of a step; every row's arithmetic is
 * its own, so a request's answer is the one it gets alone.
 */
#include "cache.h"
#include "forecast_impl.h"
#include "parallel.h"
#include "predictor.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const kr_column_names[KR_D_IN] = {"open", "high", "low", "close", "volume", "amount"};

void kr_forecast_request_init(kr_forecast_request *req) {
    memset(req, 0, sizeof *req);
    req->samples = 1;
    req->sampling.temperature = 1.0;
    req->sampling.top_k = 0;
    req->sampling.top_p = 0.9;
    req->use_cache = true;
}

void kr_forecast_result_free(kr_forecast_result *res) {
    if (!res) return;
    free(res->timestamps);
    free(res->mean);
    free(res->paths);
    free(res->quantiles);
    free(res->prob_close_up);
    memset(res, 0, sizeof *res);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

uint64_t kr_path_seed(uint64_t seed, int path) {
    /* distinct, reproducible streams per path, whatever order paths run in */
    return seed * 0x9e3779b97f4a7c15ULL + (uint64_t)path * 0xd1b54a32d192ed03ULL + 1;
}

static int cancelled(const kr_cancel *c, kr_error *err) {
    int code = c->check ? c->check(c->ctx) : 0;
    if (code == KR_E_DEADLINE) return kr_fail_code(err, code, "forecast: the deadline passed");
    if (code) return kr_fail_code(err, KR_E_CANCELLED, "forecast: cancelled by the caller");
    return 0;
}

/* ---- the reference path ---------------------------------------------------------------------- */

/* One sample path: recompute the window at every step. */
static int reference_path(const kr_model *m, const kr_forecast_request *r, fc_job *job, int path,
                          kr_error *err) {
    int L = job->L, P = job->P, mc = job->plan.max_context, d = m->pc.d_model;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    int32_t *s1 = job->path_s1 + (size_t)path * (L + P),
            *s2 = job->path_s2 + (size_t)path * (L + P);
    float *context = malloc((size_t)mc * d * sizeof(float));
    float *l1 = malloc((size_t)v1 * sizeof(float)), *l2 = malloc((size_t)v2 * sizeof(float));
    int rc = -1;
    if (!context || !l1 || !l2) {
        kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for a window of %d", mc);
        goto out;
    }
    kr_rng rng;
    kr_rng_seed(&rng, kr_path_seed(job->seed, path));
    for (int i = 0; i < P; i++) {
        int start, w = kr_forecast_window(&job->plan, L, i, &start);
        if (cancelled(&r->cancel, err) ||
            kr_predictor_window(m, s1 + start, s2 + start, job->stamps + start, w, l1, context,
                                err))
            goto out;
        int32_t a = kr_sample(l1, v1, &job->sampling, &rng);
        if (kr_predictor_s2_logits(m, context, w, a, l2, err)) goto out;
        s1[L + i] = a;
        s2[L + i] = kr_sample(l2, v2, &job->sampling, &rng);
    }
    rc = 0;
out:
    free(context);
    free(l1);
    free(l2);
    return rc;
}

/* ---- the cached path: one request's state ------------------------------------------------------
 */

typedef struct {
    const kr_forecast_request *req;
    kr_forecast_result *res;
    kr_error *err;
    bool alive;
    fc_job job;
    kr_pool *pool, *own_pool;
    kr_cache **paths;
    float *l1, *l2; /* [S][vocab] */
    int32_t *a, *b, *t1, *t2;
    kr_stamp *st;
    kr_rng *rng;
} fc_run;

static void free_paths(kr_cache **paths, int S) {
    for (int p = 0; p < S; p++) {
        kr_cache_free(paths[p]);
        paths[p] = NULL;
    }
}

static void run_free(fc_run *x) {
    if (x->paths) free_paths(x->paths, x->job.samples);
    free(x->paths);
    free(x->l1);
    free(x->l2);
    free(x->a);
    free(x->b);
    free(x->t1);
    free(x->t2);
    free(x->st);
    free(x->rng);
    free(x->job.stamps);
    free(x->job.path_s1);
    free(x->job.path_s2);
    kr_pool_free(x->own_pool);
    x->paths = NULL;
    x->l1 = x->l2 = NULL;
    x->a = x->b = x->t1 = x->t2 = NULL;
    x->st = NULL;
    x->rng = NULL;
    x->job.stamps = NULL;
    x->job.path_s1 = x->job.path_s2 = NULL;
    x->own_pool = NULL;
}

/* Ends request x with the error already in x->err. */
static void run_fail(fc_run *x) {
    x->alive = false;
    run_free(x);
    kr_forecast_result_free(x->res);
}

/* The plan, the result's buffers, the normalised and encoded context, each path's stream. */
static int run_init(const kr_model *m, kr_pool *pool, fc_run *x) {
    const kr_forecast_request *r = x->req;
    fc_job *job = &x->job;
    kr_error *err = x->err;
    if (kr_forecast_plan_make(m, r, &job->plan, err)) return -1;
    int L = r->n_context, P = r->horizon, S = r->samples, mc = job->plan.max_context;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    job->L = L;
    job->P = P;
    job->samples = S;
    job->seed = r->seed;
    job->sampling = r->sampling;
    if (kr_forecast_alloc_result(r, x->res, err)) return -1;
    job->stamps = malloc((size_t)(L + P) * sizeof *job->stamps);
    job->path_s1 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    job->path_s2 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    float *raw = malloc((size_t)L * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)L * KR_D_IN * sizeof(float));
    x->paths = calloc((size_t)S, sizeof *x->paths);
    x->l1 = malloc((size_t)S * v1 * sizeof(float));
    x->l2 = malloc((size_t)S * v2 * sizeof(float));
    x->a = malloc((size_t)S * sizeof(int32_t));
    x->b = malloc((size_t)S * sizeof(int32_t));
    x->t1 = malloc((size_t)S * mc * sizeof(int32_t));
    x->t2 = malloc((size_t)S * mc * sizeof(int32_t));
    x->st = malloc((size_t)S * mc * sizeof(kr_stamp));
    x->rng = malloc((size_t)S * sizeof(kr_rng));
    int rc = -1;
    if (!job->stamps || !job->path_s1 || !job->path_s2 || !raw || !xn || !x->paths || !x->l1 ||
        !x->l2 || !x->a || !x->b || !x->t1 || !x->t2 || !x->st || !x->rng) {
        kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for %d candles and %d paths", L,
                     S);
        goto out;
    }
    /* future rows: as given, or continuing at the series' last interval */
    kr_forecast_result *res = x->res;
    int64_t step = r->timestamps[L - 1] - r->timestamps[L - 2];
    for (int i = 0; i < P; i++)
        res->timestamps[i] =
            r->future_timestamps ? r->future_timestamps[i] : r->timestamps[L - 1] + step * (i + 1);
    for (int i = 0; i < L; i++)
        job->stamps[i] = kr_stamp_from_wall(r->timestamps[i]);
    for (int i = 0; i < P; i++)
        job->stamps[L + i] = kr_stamp_from_wall(res->timestamps[i]);
    kr_raw_candles(r, raw);
    if (kr_normalise(raw, L, xn, job->mean, job->std, err) ||
        kr_tokenizer_encode(m, xn, L, job->path_s1, job->path_s2, err))
        goto out;
    for (int p = 1; p < S; p++) {
        memcpy(job->path_s1 + (size_t)p * (L + P), job->path_s1, (size_t)L * sizeof(int32_t));
        memcpy(job->path_s2 + (size_t)p * (L + P), job->path_s2, (size_t)L * sizeof(int32_t));
    }
    for (int p = 0; p < S; p++)
        kr_rng_seed(&x->rng[p], kr_path_seed(job->seed, p));
    x->pool = pool;
    if (r->use_cache && !pool) {
        if (!(x->own_pool = kr_pool_create(m, job->plan.pool_bytes, err))) goto out;
        x->pool = x->own_pool;
    }
    res->usage.context_candles = L;
    rc = 0;
out:
    free(raw);
    free(xn);
    return rc;
}

/* Step i's window when it cannot be served by one more cached token (the first step, or a
 * window that slid): the context part prefilled once, forked for every path, then each
 * path's generated part in one batch; leaves the s1 logits of every path in x->l1. */
static int refill_window(const kr_model *m, fc_run *x, int i) {
    fc_job *job = &x->job;
    int L = job->L, S = job->samples, total = L + job->P, v1 = 1 << m->pc.s1_bits;
    int start, n = L + i, w = kr_forecast_window(&job->plan, L, i, &start);
    int shared = L - start > 0 ? L - start : 0, g = w - shared;
    free_paths(x->paths, S);
    kr_cache *prefix = kr_cache_create(x->pool, job->plan.max_context, x->err);
    if (!prefix) return -1;
    int rc = -1;
    if (shared > 0 && kr_cache_append(&prefix, 1, job->path_s1 + start, job->path_s2 + start,
                                      job->stamps + start, shared, g == 0 ? x->l1 : NULL, x->err))
        goto out;
    for (int p = 0; p < S; p++)
        if (!(x->paths[p] = kr_cache_fork(prefix, x->err))) goto out;
    if (g == 0) {
        for (int p = 1; p < S; p++)
            memcpy(x->l1 + (size_t)p * v1, x->l1, (size_t)v1 * sizeof(float));
    } else {
        int first = n - g;
        for (int p = 0; p < S; p++)
            for (int t = 0; t < g; t++) {
                x->t1[(size_t)p * g + t] = job->path_s1[(size_t)p * total + first + t];
                x->t2[(size_t)p * g + t] = job->path_s2[(size_t)p * total + first + t];
                x->st[(size_t)p * g + t] = job->stamps[first + t];
            }
        if (kr_cache_append(x->paths, S, x->t1, x->t2, x->st, g, x->l1, x->err)) goto out;
    }
    rc = 0;
out:
    kr_cache_free(prefix); /* the forks keep the blocks they share */
    return rc;
}

/* Each path draws from its own stream, so paths can be sampled on any thread. */
typedef struct {
    float *logits;
    int vocab;
    const kr_sampling *sampling;
    kr_rng *rng;
    int32_t *out;
} sample_job;

static void sample_path(void *arg, int p, int worker) {
    (void)worker;
    const sample_job *j = arg;
    j->out[p] = kr_sample(j->logits + (size_t)p * j->vocab, j->vocab, j->sampling, &j->rng[p]);
}

static void sample_all(fc_run *x, float *logits, int vocab, int32_t *out) {
    sample_job sj = {logits, vocab, &x->job.sampling, x->rng, out};
    kr_parallel_for(x->job.samples, sample_path, &sj);
}

/* ---- the cached path: many requests in lockstep -----------------------------------------------
 */

/* Rows of one lockstep step across requests: every path's cache, its new token, and where
 * its logits go. */
typedef struct {
    kr_cache **caches;
    int32_t *a, *b;
    kr_stamp *st;
    float *l1, *l2;
    int *owner; /* request of each row */
    int n, cap;
} step_rows;

static void step_rows_free(step_rows *s) {
    free(s->caches);
    free(s->a);
    free(s->b);
    free(s->st);
    free(s->l1);
    free(s->l2);
    free(s->owner);
}

static int step_rows_init(step_rows *s, const kr_model *m, int cap) {
    memset(s, 0, sizeof *s);
    s->cap = cap > 0 ? cap : 1;
    s->caches = malloc((size_t)s->cap * sizeof *s->caches);
    s->a = malloc((size_t)s->cap * sizeof *s->a);
    s->b = malloc((size_t)s->cap * sizeof *s->b);
    s->st = malloc((size_t)s->cap * sizeof *s->st);
    s->l1 = malloc((size_t)s->cap * ((size_t)1 << m->pc.s1_bits) * sizeof(float));
    s->l2 = malloc((size_t)s->cap * ((size_t)1 << m->pc.s2_bits) * sizeof(float));
    s->owner = malloc((size_t)s->cap * sizeof *s->owner);
    return s->caches && s->a && s->b && s->st && s->l1 && s->l2 && s->owner ? 0 : -1;
}

/* Step i of every live request whose window still starts at token 0: one more token a path,
 * all of them in one append, then the s1 logits copied back to each request. A request
 * whose step fails alone (its pool ran dry) fails; the others go on. */
static void decode_step(const kr_model *m, fc_run *runs, const int *who, int n_who, int i,
                        step_rows *rows) {
    int v1 = 1 << m->pc.s1_bits;
    rows->n = 0;
    for (int k = 0; k < n_who; k++) {
        fc_run *x = &runs[who[k]];
        fc_job *job = &x->job;
        int total = job->L + job->P, n = job->L + i;
        for (int p = 0; p < job->samples; p++) {
            int r = rows->n++;
            rows->caches[r] = x->paths[p];
            rows->a[r] = job->path_s1[(size_t)p * total + n - 1];
            rows->b[r] = job->path_s2[(size_t)p * total + n - 1];
            rows->st[r] = job->stamps[n - 1];
            rows->owner[r] = who[k];
        }
    }
    if (rows->n == 0) return;
    kr_error e;
    if (kr_cache_append(rows->caches, rows->n, rows->a, rows->b, rows->st, 1, rows->l1, &e) == 0) {
        for (int r = 0, k = 0; k < n_who; k++) {
            fc_run *x = &runs[who[k]];
            memcpy(x->l1, rows->l1 + (size_t)r * v1, (size_t)x->job.samples * v1 * sizeof(float));
            r += x->job.samples;
        }
        return;
    }
    /* the batch changed nothing: each request on its own finds out which one cannot go on */
    for (int r = 0, k = 0; k < n_who; k++) {
        fc_run *x = &runs[who[k]];
        if (kr_cache_append(rows->caches + r, x->job.samples, rows->a + r, rows->b + r,
                            rows->st + r, 1, x->l1, x->err))
            run_fail(x);
        r += x->job.samples;
    }
}

/* The s2 logits of every live request's paths for their sampled s1, in one batch. */
static void s2_step(const kr_model *m, fc_run *runs, const int *who, int n_who, step_rows *rows) {
    int v2 = 1 << m->pc.s2_bits;
    rows->n = 0;
    for (int k = 0; k < n_who; k++) {
        fc_run *x = &runs[who[k]];
        if (!x->alive) continue;
        for (int p = 0; p < x->job.samples; p++) {
            rows->caches[rows->n] = x->paths[p];
            rows->a[rows->n++] = x->a[p];
        }
    }
    kr_error e;
    if (rows->n > 0 && kr_cache_s2_logits(rows->caches, rows->n, rows->a, rows->l2, &e) == 0) {
        for (int r = 0, k = 0; k < n_who; k++) {
            fc_run *x = &runs[who[k]];
            if (!x->alive) continue;
            memcpy(x->l2, rows->l2 + (size_t)r * v2, (size_t)x->job.samples * v2 * sizeof(float));
            r += x->job.samples;
        }
        return;
    }
    for (int k = 0; k < n_who; k++) {
        fc_run *x = &runs[who[k]];
        if (x->alive && kr_cache_s2_logits(x->paths, x->job.samples, x->a, x->l2, x->err))
            run_fail(x);
    }
}

static void run_cached(const kr_model *m, fc_run *runs, int n) {
    int max_p = 0, max_rows = 0;
    for (int k = 0; k < n; k++)
        if (runs[k].alive && runs[k].req->use_cache) {
            if (runs[k].job.P > max_p) max_p = runs[k].job.P;
            max_rows += runs[k].job.samples;
        }
    step_rows rows;
    int *who = malloc((size_t)(n > 0 ? n : 1) * sizeof *who);
    if (step_rows_init(&rows, m, max_rows) || !who) {
        for (int k = 0; k < n; k++)
            if (runs[k].alive) {
                kr_fail_code(runs[k].err, KR_E_NO_MEMORY,
                             "forecast: out of memory batching %d rows", max_rows);
                run_fail(&runs[k]);
            }
        step_rows_free(&rows);
        free(who);
        return;
    }
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    for (int i = 0; i < max_p; i++) {
        /* who decodes one cached token this step; who needs its window (re)filled */
        int n_who = 0;
        for (int k = 0; k < n; k++) {
            fc_run *x = &runs[k];
            if (!x->alive || !x->req->use_cache || i >= x->job.P) continue;
            if (cancelled(&x->req->cancel, x->err)) {
                run_fail(x);
                continue;
            }
            int start;
            kr_forecast_window(&x->job.plan, x->job.L, i, &start);
            if (i > 0 && start == 0) {
                who[n_who++] = k;
                x->res->usage.cached_steps++;
            } else if (refill_window(m, x, i)) {
                run_fail(x);
            } else {
                x->res->usage.recomputed_steps += i > 0;
                x->res->usage.cached_steps += i == 0;
            }
        }
        decode_step(m, runs, who, n_who, i, &rows);
        /* every live request at step i samples s1, then all take their s2 logits at once */
        n_who = 0;
        for (int k = 0; k < n; k++)
            if (runs[k].alive && runs[k].req->use_cache && i < runs[k].job.P) {
                sample_all(&runs[k], runs[k].l1, v1, runs[k].a);
                who[n_who++] = k;
            }
        s2_step(m, runs, who, n_who, &rows);
        for (int k = 0; k < n_who; k++) {
            fc_run *x = &runs[who[k]];
            if (!x->alive) continue;
            sample_all(x, x->l2, v2, x->b);
            int total = x->job.L + x->job.P, at = x->job.L + i;
            for (int p = 0; p < x->job.samples; p++) {
                x->job.path_s1[(size_t)p * total + at] = x->a[p];
                x->job.path_s2[(size_t)p * total + at] = x->b[p];
            }
            if (i + 1 == x->job.P) free_paths(x->paths, x->job.samples); /* pool back early */
        }
    }
    step_rows_free(&rows);
    free(who);
}

int kr_forecast_batch(const kr_model *m, kr_pool *pool, const kr_forecast_request *const *reqs,
                      int n, kr_forecast_result *res, kr_error *errs) {
    double t0 = now_ms();
    fc_run *runs = calloc((size_t)(n > 0 ? n : 1), sizeof *runs);
    if (!runs) {
        for (int k = 0; k < n; k++) {
            memset(&res[k], 0, sizeof res[k]);
            kr_fail_code(&errs[k], KR_E_NO_MEMORY, "forecast: out of memory for %d requests", n);
        }
        return n;
    }
    for (int k = 0; k < n; k++) {
        fc_run *x = &runs[k];
        memset(&res[k], 0, sizeof res[k]);
        errs[k].code = 0;
        errs[k].msg[0] = '\0';
        *x = (fc_run){.req = reqs[k], .res = &res[k], .err = &errs[k], .alive = true};
        if (run_init(m, pool, x)) run_fail(x);
    }
    /* the reference path runs each of its requests alone */
    for (int k = 0; k < n; k++) {
        fc_run *x = &runs[k];
        if (!x->alive || x->req->use_cache) continue;
        for (int p = 0; p < x->job.samples && x->alive; p++)
            if (reference_path(m, x->req, &x->job, p, x->err)) run_fail(x);
        if (x->alive) x->res->usage.recomputed_steps = x->job.P;
    }
    run_cached(m, runs, n);
    int failed = 0;
    for (int k = 0; k < n; k++) {
        fc_run *x = &runs[k];
        if (x->alive && kr_forecast_summarise(m, x->req, &x->job, x->res, x->err)) run_fail(x);
        if (x->alive) {
            x->res->usage.generated_tokens = x->job.samples * x->job.P;
            x->res->usage.elapsed_ms = now_ms() - t0;
        }
        failed += !x->alive;
        run_free(x);
    }
    free(runs);
    return failed;
}

int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *r,
                kr_forecast_result *res, kr_error *err) {
    kr_error e;
    if (kr_forecast_batch(m, pool, &r, 1, res, &e) == 0) return 0;
    if (err) *err = e;
    return -1;
}
