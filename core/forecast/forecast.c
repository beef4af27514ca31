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
#include <stdint.h>
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
        if (kr_check_cancel(&r->cancel, "forecast", err) ||
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

/* The whole forecast on the reference path: its own normalisation and encoding, each path
 * alone, then the same summary as the cached path. */
static int reference_forecast(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                              kr_forecast_result *res, kr_error *err) {
    int rc = -1;
    if (kr_forecast_job_init(m, r, NULL, job, res, err)) goto out;
    int P = r->horizon, S = r->samples;
    for (int p = 0; p < S; p++)
        if (reference_path(m, r, job, p, err)) goto out;
    if (kr_forecast_summarise(m, r, job, res, err)) goto out;
    res->usage.recomputed_steps = P;
    res->usage.generated_tokens = S * P;
    rc = 0;
out:
    kr_forecast_job_free(job);
    if (rc) kr_forecast_result_free(res);
    return rc;
}

/* ---- many requests --------------------------------------------------------------------------- */

typedef struct {
    kr_error *errs;
} batch_ctx;

static void batch_done(void *tag, const kr_error *err, void *ctx) {
    batch_ctx *b = ctx;
    b->errs[(intptr_t)tag] = *err;
}

int kr_forecast_batch(const kr_model *m, kr_pool *pool, const kr_forecast_request *const *reqs,
                      int n, kr_forecast_result *res, kr_error *errs) {
    batch_ctx ctx = {errs};
    kr_sched_config cfg = {
        .step_tokens = 2048, .max_rows = 1 << 30, .done = batch_done, .ctx = &ctx};
    kr_error e;
    kr_sched *s = kr_sched_create(m, pool, &cfg, &e);
    int failed = 0;
    for (int k = 0; k < n; k++) {
        memset(&res[k], 0, sizeof res[k]);
        errs[k].code = 0;
        errs[k].msg[0] = '\0';
        if (!s) {
            errs[k] = e;
        } else if (!reqs[k]->use_cache) { /* the reference path runs each request alone */
            double t0 = now_ms();
            fc_job job = {0};
            if (reference_forecast(m, reqs[k], &job, &res[k], &errs[k]) == 0)
                res[k].usage.elapsed_ms = now_ms() - t0;
        } else {
            kr_sched_add_forecast(s, reqs[k], &res[k], (void *)(intptr_t)k, &errs[k]);
        }
    }
    while (s && kr_sched_step(s) > 0)
        ;
    kr_sched_free(s);
    for (int k = 0; k < n; k++)
        failed += errs[k].code != 0;
    return failed;
}

int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *r,
                kr_forecast_result *res, kr_error *err) {
    kr_error e;
    if (kr_forecast_batch(m, pool, &r, 1, res, &e) == 0) return 0;
    if (err) *err = e;
    return -1;
}
