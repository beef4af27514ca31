/* job.c — a forecast's state (fc_state) made ready for either decoder: the plan, the result's
 * buffers, the stamps of every row, and the context normalised, then encoded into every
 * path's first tokens, whole or in chunks (or a series' tokens and statistics); and each
 * path's random seed. */
#include "forecast_impl.h"
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

uint64_t kr_path_seed(uint64_t seed, int path) {
    /* distinct, reproducible streams per path, whatever order paths run in */
    return seed * 0x9e3779b97f4a7c15ULL + (uint64_t)path * 0xd1b54a32d192ed03ULL + 1;
}

/* Every path's first L tokens: path 0's. */
static void copy_context(fc_state *job) {
    int L = job->L, total = job->L + job->P;
    for (int p = 1; p < job->samples; p++) {
        memcpy(job->path_s1 + (size_t)p * total, job->path_s1, (size_t)L * sizeof(int32_t));
        memcpy(job->path_s2 + (size_t)p * total, job->path_s2, (size_t)L * sizeof(int32_t));
    }
}

int kr_forecast_job_init(const kr_model *m, const kr_forecast_request *r, const kr_series *series,
                         fc_state *job, kr_forecast_result *res, kr_error *err) {
    if (kr_forecast_plan_make(m, r, &job->plan, err)) return -1;
    int L = r->context.n, P = r->horizon, S = r->samples;
    job->L = L;
    job->P = P;
    job->samples = S;
    job->seed = r->seed;
    job->sampling = r->sampling;
    if (kr_forecast_alloc_result(r, res, err)) return -1;
    res->usage.weights = kr_model_weights(m);
    res->usage.kv = kr_model_kv(m);
    job->stamps = malloc((size_t)(L + P) * sizeof *job->stamps);
    job->path_s1 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    job->path_s2 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    if (!job->stamps || !job->path_s1 || !job->path_s2)
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "forecast: out of memory for %d candles and %d paths", L, S);
    /* future rows: as given, or continuing at the series' last interval */
    const int64_t *ts = r->context.timestamps;
    int64_t step = ts[L - 1] - ts[L - 2];
    for (int i = 0; i < P; i++)
        res->timestamps[i] =
            r->future_timestamps ? r->future_timestamps[i] : ts[L - 1] + step * (i + 1);
    for (int i = 0; i < L; i++)
        job->stamps[i] = kr_stamp_from_wall(ts[i]);
    for (int i = 0; i < P; i++)
        job->stamps[L + i] = kr_stamp_from_wall(res->timestamps[i]);
    if (series) { /* normalised and encoded as the series grew */
        memcpy(job->path_s1, kr_series_tokens(series, 1), (size_t)L * sizeof(int32_t));
        memcpy(job->path_s2, kr_series_tokens(series, 2), (size_t)L * sizeof(int32_t));
        kr_series_stats(series, job->mean, job->std);
        job->dec_len = kr_series_decoder(series, &job->dec_kv);
        job->encoded = L;
        copy_context(job);
    } else if (!(job->xn =
                     kr_normalised(&r->context, &r->norm, job->mean, job->std, "forecast", err))) {
        return -1;
    }
    res->usage.context_candles = L;
    return 0;
}

int kr_forecast_job_encode(const kr_model *m, fc_state *job, int n, kr_error *err) {
    const int L = job->L, at = job->encoded, d = m->tc.d_model;
    if (n > L - at) n = L - at;
    if (n <= 0) return 0;
    if (at == 0 && n == L) { /* all at once: no keys and values kept */
        if (kr_tokenizer_encode(m, job->xn, L, job->path_s1, job->path_s2, err)) return -1;
    } else {
        if (!job->enc_kv) {
            const int layers = m->tok.n_enc > 0 ? m->tok.n_enc : 1;
            job->enc_kv = malloc((size_t)layers * 2 * L * d * sizeof(float));
            if (!job->enc_kv)
                return kr_fail_code(err, KR_E_NO_MEMORY,
                                    "forecast: out of memory to encode %d candles", L);
        }
        const kr_kv_view kv = {&job->enc_kv, L, d, 0};
        if (kr_tokenizer_encode_rows(m, job->xn + (size_t)at * KR_D_IN, n, &kv, at,
                                     job->path_s1 + at, job->path_s2 + at, err))
            return -1;
    }
    job->encoded = at + n;
    if (job->encoded < L) return 0;
    free(job->xn);
    free(job->enc_kv);
    job->xn = job->enc_kv = NULL;
    copy_context(job);
    return 0;
}

void kr_forecast_job_free(fc_state *job) {
    free(job->xn);
    free(job->enc_kv);
    job->xn = job->enc_kv = NULL;
    free(job->stamps);
    free(job->path_s1);
    free(job->path_s2);
    job->stamps = NULL;
    job->path_s1 = job->path_s2 = NULL;
}
