/* candles.c — candles <-> normalised rows <-> token pairs: upstream's per-column
 * normalisation, computed the way numpy computes it on float32 arrays (pairwise float32
 * sums down each column), so that the normalised context equals upstream's bit for bit;
 * and a forecast's context made ready for either decoder (kr_forecast_job_init). */
#include "forecast_impl.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The six float32 columns of upstream's DataFrame, missing volume/amount filled in. */
void kr_raw_candles(const kr_forecast_request *r, float *x) {
    for (int i = 0; i < r->n_context; i++) {
        float *row = x + (size_t)i * KR_D_IN;
        for (int c = 0; c < KR_VOLUME; c++)
            row[c] = (float)r->columns[c][i];
        double vol = r->columns[KR_VOLUME] ? r->columns[KR_VOLUME][i] : 0.0, amt = 0.0;
        if (r->columns[KR_AMOUNT])
            amt = r->columns[KR_AMOUNT][i];
        else if (r->columns[KR_VOLUME])
            amt = vol * ((r->columns[KR_OPEN][i] + r->columns[KR_HIGH][i] + r->columns[KR_LOW][i] +
                          r->columns[KR_CLOSE][i]) /
                         4.0);
        row[KR_VOLUME] = (float)vol;
        row[KR_AMOUNT] = (float)amt;
    }
}

/* numpy's pairwise float32 sum (8 accumulators, halves above 128), so that mean and std
 * come out bit-identical to upstream's np.mean / np.std on its float32 columns. */
static float pairwise_sum(const float *a, int n) {
    if (n < 8) {
        float r = 0.0f;
        for (int i = 0; i < n; i++)
            r += a[i];
        return r;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        int i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

int kr_normalise(const float *x, int n, float *xn, float mean[KR_D_IN], float std[KR_D_IN],
                 kr_error *err) {
    float *col = malloc((size_t)n * sizeof(float));
    if (!col)
        return kr_fail_code(err, KR_E_NO_MEMORY, "normalise: out of memory for %d candles", n);
    for (int c = 0; c < KR_D_IN; c++) {
        for (int i = 0; i < n; i++)
            col[i] = x[(size_t)i * KR_D_IN + c];
        float mu = pairwise_sum(col, n) / (float)n;
        for (int i = 0; i < n; i++) {
            float dv = col[i] - mu;
            col[i] = dv * dv;
        }
        mean[c] = mu;
        std[c] = sqrtf(pairwise_sum(col, n) / (float)n);
        if (!isfinite(mu) || !isfinite(std[c])) { /* float32 statistics, as upstream's */
            free(col);
            /* each value is valid; the model cannot serve their statistics: 422 */
            return kr_fail_code(err, KR_E_FAILED,
                                "candles.%s: too large for float32: the column's mean or "
                                "standard deviation overflows; scale it down",
                                kr_column_names[c]);
        }
    }
    free(col);
    kr_normalise_rows(x, n, mean, std, xn);
    return 0;
}

void kr_normalise_rows(const float *x, int n, const float mean[KR_D_IN], const float std[KR_D_IN],
                       float *xn) {
    for (int i = 0; i < n; i++)
        for (int c = 0; c < KR_D_IN; c++) {
            float v = (x[(size_t)i * KR_D_IN + c] - mean[c]) / (std[c] + 1e-5f);
            xn[(size_t)i * KR_D_IN + c] = v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v;
        }
}

int kr_check_normalisation(const kr_forecast_request *r, kr_error *err) {
    for (int c = 0; r->pinned && c < KR_D_IN; c++) {
        if (!isfinite(r->norm_mean[c]))
            return kr_fail_code(err, KR_E_INVALID, "normalization.mean.%s: must be finite",
                                kr_column_names[c]);
        if (!isfinite(r->norm_std[c]) || !(r->norm_std[c] >= 0.0f))
            return kr_fail_code(err, KR_E_INVALID,
                                "normalization.std.%s: must be finite and >= 0, got %g",
                                kr_column_names[c], (double)r->norm_std[c]);
    }
    return 0;
}

int kr_normalise_for(const kr_forecast_request *r, const float *raw, int n, float *xn,
                     float mean[KR_D_IN], float std[KR_D_IN], kr_error *err) {
    if (!r->pinned) return kr_normalise(raw, n, xn, mean, std, err);
    memcpy(mean, r->norm_mean, KR_D_IN * sizeof(float));
    memcpy(std, r->norm_std, KR_D_IN * sizeof(float));
    kr_normalise_rows(raw, n, mean, std, xn);
    return 0;
}

int kr_tokenize_candles(const kr_model *m, const kr_forecast_request *r, int32_t *s1, int32_t *s2,
                        float mean[KR_D_IN], float std[KR_D_IN], kr_error *err) {
    int L = r->n_context;
    if (L < 1) return kr_fail_code(err, KR_E_INVALID, "candles: at least 1 candle is required");
    if (kr_check_columns(r, err) || kr_check_normalisation(r, err)) return -1;
    float *x = malloc((size_t)L * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)L * KR_D_IN * sizeof(float));
    int rc = -1;
    if (!x || !xn) {
        kr_fail_code(err, KR_E_NO_MEMORY, "tokenize: out of memory for %d candles", L);
    } else {
        kr_raw_candles(r, x);
        rc = kr_normalise_for(r, x, L, xn, mean, std, err) ||
                     kr_tokenizer_encode(m, xn, L, s1, s2, err)
                 ? -1
                 : 0;
    }
    free(x);
    free(xn);
    return rc;
}

int kr_detokenize(const kr_model *m, const int32_t *s1, const int32_t *s2, int n,
                  const float mean[KR_D_IN], const float std[KR_D_IN], double *out, kr_error *err) {
    float *y = malloc((size_t)(n > 0 ? n : 1) * KR_D_IN * sizeof(float));
    if (!y) return kr_fail_code(err, KR_E_NO_MEMORY, "detokenize: out of memory for %d tokens", n);
    int rc = kr_tokenizer_decode(m, s1, s2, n, y, err);
    for (int i = 0; rc == 0 && i < n; i++)
        for (int c = 0; c < KR_D_IN; c++)
            out[(size_t)c * n + i] =
                (double)(y[(size_t)i * KR_D_IN + c] * (std[c] + 1e-5f) + mean[c]);
    free(y);
    return rc;
}

int kr_forecast_job_init(const kr_model *m, const kr_forecast_request *r, const kr_series *series,
                         fc_job *job, kr_forecast_result *res, kr_error *err) {
    if (kr_forecast_plan_make(m, r, &job->plan, err)) return -1;
    int L = r->n_context, P = r->horizon, S = r->samples;
    job->L = L;
    job->P = P;
    job->samples = S;
    job->seed = r->seed;
    job->sampling = r->sampling;
    if (kr_forecast_alloc_result(r, res, err)) return -1;
    job->stamps = malloc((size_t)(L + P) * sizeof *job->stamps);
    job->path_s1 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    job->path_s2 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    float *raw = malloc((size_t)L * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)L * KR_D_IN * sizeof(float));
    int rc = -1;
    if (!job->stamps || !job->path_s1 || !job->path_s2 || !raw || !xn) {
        kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for %d candles and %d paths", L,
                     S);
        goto out;
    }
    /* future rows: as given, or continuing at the series' last interval */
    int64_t step = r->timestamps[L - 1] - r->timestamps[L - 2];
    for (int i = 0; i < P; i++)
        res->timestamps[i] =
            r->future_timestamps ? r->future_timestamps[i] : r->timestamps[L - 1] + step * (i + 1);
    for (int i = 0; i < L; i++)
        job->stamps[i] = kr_stamp_from_wall(r->timestamps[i]);
    for (int i = 0; i < P; i++)
        job->stamps[L + i] = kr_stamp_from_wall(res->timestamps[i]);
    if (series) { /* normalised and encoded as the series grew */
        memcpy(job->path_s1, kr_series_tokens(series, 1), (size_t)L * sizeof(int32_t));
        memcpy(job->path_s2, kr_series_tokens(series, 2), (size_t)L * sizeof(int32_t));
        kr_series_stats(series, job->mean, job->std);
        job->dec_len = kr_series_decoder(series, &job->dec_kv);
    } else {
        kr_raw_candles(r, raw);
        if (kr_normalise_for(r, raw, L, xn, job->mean, job->std, err) ||
            kr_tokenizer_encode(m, xn, L, job->path_s1, job->path_s2, err))
            goto out;
    }
    for (int p = 1; p < S; p++) {
        memcpy(job->path_s1 + (size_t)p * (L + P), job->path_s1, (size_t)L * sizeof(int32_t));
        memcpy(job->path_s2 + (size_t)p * (L + P), job->path_s2, (size_t)L * sizeof(int32_t));
    }
    res->usage.context_candles = L;
    rc = 0;
out:
    free(raw);
    free(xn);
    return rc;
}

void kr_forecast_job_free(fc_job *job) {
    free(job->stamps);
    free(job->path_s1);
    free(job->path_s2);
    job->stamps = NULL;
    job->path_s1 = job->path_s2 = NULL;
}
