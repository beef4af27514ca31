/* summary.c — the forecast's answer from its paths' tokens: each path's last window
 * decoded by the tokenizer, denormalised, then mean, quantiles (numpy's linear rule) and the
 * probability of a higher close. */
#include "forecast_impl.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double quantile_of(double *v, int n, double q) {
    /* numpy's default (linear) on sorted v */
    double pos = q * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every path's last P rows, decoded: [S][P][6]. The cached path decodes the window's
 * shared context part once; the reference decodes each path's whole window. */
static int decode_paths(const kr_model *m, const fc_job *job, bool shared, float *rows,
                        kr_error *err) {
    int L = job->L, P = job->P, S = job->samples;
    int total = L + P, start, w = kr_forecast_window(&job->plan, L, P, &start), np = w - P;
    if (shared && start == 0 && np > 0 && np == job->dec_len) { /* the prefix is a series' */
        int32_t *g1 = malloc((size_t)S * P * sizeof *g1), *g2 = malloc((size_t)S * P * sizeof *g2);
        int rc = g1 && g2 ? 0
                          : kr_fail_code(err, KR_E_NO_MEMORY,
                                         "forecast: out of memory decoding %d paths", S);
        for (int p = 0; rc == 0 && p < S; p++) {
            memcpy(g1 + (size_t)p * P, job->path_s1 + (size_t)p * total + L, (size_t)P * 4);
            memcpy(g2 + (size_t)p * P, job->path_s2 + (size_t)p * total + L, (size_t)P * 4);
        }
        if (rc == 0)
            rc = kr_tokenizer_decode_paths_kv(m, &job->dec_kv, np, g1, g2, S, P, rows, err);
        free(g1);
        free(g2);
        return rc;
    }
    if (shared && np > 0) {
        /* paths per batch: at most 4096 rows, and about 256 MiB of decoder keys and values
         * (each path holds ceil(P / np) blocks of np positions) */
        const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
        size_t path_bytes = (size_t)((P + np - 1) / np) * np * 2 * (size_t)tc->d_model *
                            (size_t)(tc->n_dec_layers > 1 ? tc->n_dec_layers - 1 : 1) *
                            sizeof(float);
        size_t by_mem = ((size_t)256 << 20) / path_bytes;
        int group = 4096 / P > 0 ? 4096 / P : 1;
        if ((size_t)group > by_mem) group = by_mem > 0 ? (int)by_mem : 1;
        int32_t *g1 = malloc((size_t)(group < S ? group : S) * P * sizeof *g1);
        int32_t *g2 = malloc((size_t)(group < S ? group : S) * P * sizeof *g2);
        int rc = g1 && g2 ? 0
                          : kr_fail_code(err, KR_E_NO_MEMORY,
                                         "forecast: out of memory decoding %d paths", S);
        for (int p0 = 0; rc == 0 && p0 < S; p0 += group) {
            int n = S - p0 < group ? S - p0 : group;
            for (int p = 0; p < n; p++) {
                memcpy(g1 + (size_t)p * P, job->path_s1 + (size_t)(p0 + p) * total + L,
                       (size_t)P * sizeof *g1);
                memcpy(g2 + (size_t)p * P, job->path_s2 + (size_t)(p0 + p) * total + L,
                       (size_t)P * sizeof *g2);
            }
            rc = kr_tokenizer_decode_paths(m, job->path_s1 + start, job->path_s2 + start, np, g1,
                                           g2, n, P, rows + (size_t)p0 * P * KR_D_IN, err);
        }
        free(g1);
        free(g2);
        return rc;
    }
    float *dec = malloc((size_t)w * KR_D_IN * sizeof(float));
    if (!dec)
        return kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory decoding a window of %d",
                            w);
    int rc = 0;
    for (int p = 0; rc == 0 && p < S; p++) {
        const int32_t *s1 = job->path_s1 + (size_t)p * total,
                      *s2 = job->path_s2 + (size_t)p * total;
        rc = kr_tokenizer_decode(m, s1 + start, s2 + start, w, dec, err);
        if (rc == 0)
            memcpy(rows + (size_t)p * P * KR_D_IN, dec + (size_t)(w - P) * KR_D_IN,
                   (size_t)P * KR_D_IN * sizeof(float));
    }
    free(dec);
    return rc;
}

/* Decodes each path's last window, denormalises, and fills the result. */
int kr_forecast_summarise(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                          kr_forecast_result *res, kr_error *err) {
    int L = job->L, P = job->P, S = job->samples;
    float *dec = malloc((size_t)S * P * KR_D_IN * sizeof(float));
    float *sum = calloc((size_t)P * KR_D_IN, sizeof(float));
    double *vals = malloc((size_t)S * sizeof(double));
    double *paths = malloc((size_t)S * KR_D_IN * P * sizeof(double));
    int rc = -1;
    if (!dec || !sum || !vals || !paths) {
        kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory summarising %d paths", S);
        goto out;
    }
    memcpy(res->norm_mean, job->mean, sizeof res->norm_mean);
    memcpy(res->norm_std, job->std, sizeof res->norm_std);
    if (decode_paths(m, job, r->use_cache, dec, err)) goto out;
    for (int p = 0; p < S; p++)
        for (int i = 0; i < P; i++)
            for (int c = 0; c < KR_D_IN; c++) {
                float v = dec[((size_t)p * P + i) * KR_D_IN + c];
                sum[(size_t)i * KR_D_IN + c] += v;
                paths[((size_t)p * KR_D_IN + c) * P + i] =
                    (double)(v * (job->std[c] + 1e-5f) + job->mean[c]);
            }
    for (int i = 0; i < P; i++)
        for (int c = 0; c < KR_D_IN; c++) {
            float avg = sum[(size_t)i * KR_D_IN + c] / (float)S;
            res->mean[(size_t)c * P + i] = (double)(avg * (job->std[c] + 1e-5f) + job->mean[c]);
        }
    double last_close = r->context.columns[KR_CLOSE][L - 1];
    for (int i = 0; i < P; i++) {
        int up = 0;
        for (int p = 0; p < S; p++)
            up += paths[((size_t)p * KR_D_IN + KR_CLOSE) * P + i] > last_close;
        res->prob_close_up[i] = (double)up / S;
    }
    for (int c = 0; c < KR_D_IN && r->n_quantiles > 0; c++)
        for (int i = 0; i < P; i++) {
            for (int p = 0; p < S; p++)
                vals[p] = paths[((size_t)p * KR_D_IN + c) * P + i];
            qsort(vals, (size_t)S, sizeof *vals, cmp_double);
            for (int q = 0; q < r->n_quantiles; q++)
                res->quantiles[((size_t)q * KR_D_IN + c) * P + i] =
                    quantile_of(vals, S, r->quantiles[q]);
        }
    if (r->return_paths) {
        res->paths = paths;
        paths = NULL;
    }
    rc = 0;
out:
    free(dec);
    free(sum);
    free(vals);
    free(paths);
    return rc;
}
