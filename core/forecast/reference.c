/* reference.c — the plain reference path (upstream's auto_regressive_inference as it is
 * written): each sample path alone, its whole window recomputed by the predictor at every
 * step, then the same summary as the cached path. It runs the same plan (plan.c): the same
 * windows, step by step, as the scheduler's cached path, which gives the same bits. */
#include "forecast_impl.h"

#include <stdlib.h>
#include <string.h>

/* One sample path: recompute the window at every step. */
static int reference_path(const kr_model *m, const kr_forecast_request *r, fc_state *job, int path,
                          kr_error *err) {
    int L = job->L, P = job->P, mc = job->plan.max_context, d = m->pc.d_model;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    int32_t *s1 = job->path_s1 + (size_t)path * (L + P),
            *s2 = job->path_s2 + (size_t)path * (L + P);
    /* the window's rows, then the s1 and the s2 logits: one buffer */
    float *context = malloc(((size_t)mc * d + v1 + v2) * sizeof(float));
    if (!context)
        return kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for a window of %d", mc);
    float *l1 = context + (size_t)mc * d, *l2 = l1 + v1;
    int rc = -1;
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
    return rc;
}

/* The whole forecast on the reference path: its own normalisation and encoding, each path
 * alone, then the same summary as the cached path. */
static int reference_forecast(const kr_model *m, const kr_forecast_request *r, fc_state *job,
                              kr_forecast_result *res, kr_error *err) {
    int rc = -1;
    memset(res, 0, sizeof *res);
    if (kr_forecast_job_init(m, r, NULL, job, res, err) ||
        kr_forecast_job_encode(m, job, job->L, err))
        goto out;
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

int kr_forecast_reference(const kr_model *m, const kr_forecast_request *req,
                          kr_forecast_result *res, kr_error *err) {
    double t0 = kr_now_ms();
    fc_state job = {0};
    if (reference_forecast(m, req, &job, res, err)) return -1;
    res->usage.elapsed_ms = kr_now_ms() - t0;
    return 0;
}
