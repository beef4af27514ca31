/* summary.c — the forecast's answer from its paths' tokens: each path's last window
 * decoded by the tokenizer, in parts that a scheduler's steps can share out, denormalised,
 * then mean, quantiles (numpy's linear rule) and the probability of a higher close. */
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

/* ---- every path's last window, decoded in parts ------------------------------------------ */

/* Positions per block of a prefix's keys and values (as the tokenizer's own batched decode
 * lays them: the same blocks, the same answer). */
#define PREFIX_BLOCK 16

/* The summary's buffers, one allocation headed by rows (kr_carve's layout; base NULL: only
 * the size is summed): every path's rows, then its mode's own: one window's rows, or the
 * paths' tokens and, for a prefix decoded here, its blocks of keys and values. */
static size_t summary_layout(fc_summary *sum, char *base, int S, int P, int w, int blocks,
                             size_t block) {
    size_t at = kr_carve(base, 0, (void **)&sum->rows, (size_t)S * P * KR_D_IN * sizeof(float));
    if (sum->mode == SUM_WHOLE)
        return kr_carve(base, at, (void **)&sum->dec, (size_t)w * KR_D_IN * sizeof(float));
    at = kr_carve(base, at, (void **)&sum->g1, (size_t)S * P * sizeof *sum->g1);
    at = kr_carve(base, at, (void **)&sum->g2, (size_t)S * P * sizeof *sum->g2);
    if (sum->mode == SUM_PREFIX) {
        at = kr_carve(base, at, (void **)&sum->kv_mem, (size_t)blocks * block * sizeof(float));
        at = kr_carve(base, at, (void **)&sum->kv_blocks, (size_t)blocks * sizeof *sum->kv_blocks);
    }
    return at;
}

void kr_summary_free(fc_summary *sum) {
    free(sum->rows); /* and the rest of summary_layout's */
    memset(sum, 0, sizeof *sum);
}

int kr_summary_begin(const kr_model *m, const fc_state *job, bool shared, fc_summary *sum,
                     kr_error *err) {
    const int L = job->L, P = job->P, S = job->samples, total = L + P;
    memset(sum, 0, sizeof *sum);
    const int w = kr_forecast_window(&job->plan, L, P, &sum->start);
    sum->np = w - P;
    sum->mode = !shared || sum->np == 0                      ? SUM_WHOLE
                : sum->start == 0 && sum->np == job->dec_len ? SUM_SERIES
                                                             : SUM_PREFIX;
    const int blocks = (sum->np + PREFIX_BLOCK - 1) / PREFIX_BLOCK, d = m->tc.d_model;
    const size_t block = (size_t)(m->tok.n_dec > 0 ? m->tok.n_dec : 1) * 2 * PREFIX_BLOCK * d;
    char *mem = malloc(summary_layout(sum, NULL, S, P, w, blocks, block));
    if (!mem) {
        kr_summary_free(sum);
        return kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory summarising %d paths", S);
    }
    summary_layout(sum, mem, S, P, w, blocks, block);
    if (sum->mode != SUM_WHOLE)
        for (int p = 0; p < S; p++) {
            memcpy(sum->g1 + (size_t)p * P, job->path_s1 + (size_t)p * total + L,
                   (size_t)P * sizeof(int32_t));
            memcpy(sum->g2 + (size_t)p * P, job->path_s2 + (size_t)p * total + L,
                   (size_t)P * sizeof(int32_t));
        }
    if (sum->mode == SUM_SERIES) {
        sum->kv = job->dec_kv;
        sum->prefix_done = sum->np;
    } else if (sum->mode == SUM_PREFIX) {
        for (int b = 0; b < blocks; b++)
            sum->kv_blocks[b] = sum->kv_mem + (size_t)b * block;
        sum->kv = (kr_kv_view){sum->kv_blocks, PREFIX_BLOCK, d, 0};
    }
    return 0;
}

/* What one path costs to decode: its window alone, or its own rows over the prefix. */
static double path_cost(const kr_model *m, const fc_state *job, const fc_summary *sum) {
    return sum->mode == SUM_WHOLE ? kr_tokenizer_cost_rows(m, m->tok.n_dec, 0, sum->np + job->P)
                                  : kr_tokenizer_cost_rows(m, m->tok.n_dec, sum->np, job->P);
}

double kr_summary_left(const kr_model *m, const fc_state *job, const fc_summary *sum) {
    double prefix =
        sum->prefix_done < sum->np && sum->mode == SUM_PREFIX
            ? kr_tokenizer_cost_rows(m, m->tok.n_dec, sum->prefix_done, sum->np - sum->prefix_done)
            : 0;
    return prefix + (job->samples - sum->paths_done) * path_cost(m, job, sum);
}

int kr_summary_advance(const kr_model *m, const fc_state *job, fc_summary *sum, double rows,
                       double *cost, kr_error *err) {
    const int P = job->P, S = job->samples, total = job->L + P;
    *cost = 0;
    if (sum->mode == SUM_PREFIX && sum->prefix_done < sum->np) { /* its keys, a chunk */
        const int at = sum->prefix_done, left = sum->np - at;
        const int n = kr_tokenizer_fit(m, m->tok.n_dec, at, left, rows);
        const int32_t *s1 = job->path_s1 + sum->start + at, *s2 = job->path_s2 + sum->start + at;
        if (kr_tokenizer_decoder_extend(m, &sum->kv, at, s1, s2, n, err)) return -1;
        sum->prefix_done += n;
        *cost = kr_tokenizer_cost_rows(m, m->tok.n_dec, at, n);
        return 0; /* the paths at the next part */
    }
    const double one = path_cost(m, job, sum);
    int g = one > 0 && rows / one < S - sum->paths_done ? (int)(rows / one) : S - sum->paths_done;
    if (g < 1) g = 1;
    const int p0 = sum->paths_done;
    if (sum->mode == SUM_WHOLE) {
        const int w = sum->np + P;
        for (int p = p0; p < p0 + g; p++) {
            const size_t at = (size_t)p * total + sum->start;
            if (kr_tokenizer_decode(m, job->path_s1 + at, job->path_s2 + at, w, sum->dec, err))
                return -1;
            memcpy(sum->rows + (size_t)p * P * KR_D_IN, sum->dec + (size_t)(w - P) * KR_D_IN,
                   (size_t)P * KR_D_IN * sizeof(float));
        }
    } else if (kr_tokenizer_decode_paths_kv(m, &sum->kv, sum->np, sum->g1 + (size_t)p0 * P,
                                            sum->g2 + (size_t)p0 * P, g, P,
                                            sum->rows + (size_t)p0 * P * KR_D_IN, err)) {
        return -1;
    }
    sum->paths_done += g;
    *cost = g * one;
    return sum->paths_done == S;
}

/* ---- the answer ----------------------------------------------------------------------------- */

int kr_summary_finish(const kr_forecast_request *r, const fc_state *job, const fc_summary *fs,
                      kr_forecast_result *res, kr_error *err) {
    int L = job->L, P = job->P, S = job->samples;
    const float *dec = fs->rows;
    float *sum = calloc((size_t)P * KR_D_IN, sizeof(float));
    double *vals = malloc((size_t)S * sizeof(double));
    double *paths = malloc((size_t)S * KR_D_IN * P * sizeof(double));
    int rc = -1;
    if (!sum || !vals || !paths) {
        kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory summarising %d paths", S);
        goto out;
    }
    memcpy(res->norm_mean, job->mean, sizeof res->norm_mean);
    memcpy(res->norm_std, job->std, sizeof res->norm_std);
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
    free(sum);
    free(vals);
    free(paths);
    return rc;
}

int kr_forecast_summarise(const kr_model *m, const kr_forecast_request *r, fc_state *job,
                          kr_forecast_result *res, kr_error *err) {
    fc_summary sum;
    double cost;
    int rc;
    if (kr_summary_begin(m, job, r->use_cache, &sum, err)) return -1;
    while ((rc = kr_summary_advance(m, job, &sum, 1e300, &cost, err)) == 0)
        ;
    if (rc == 1) rc = kr_summary_finish(r, job, &sum, res, err);
    kr_summary_free(&sum);
    return rc;
}
