/* candles.c — candles <-> normalised rows <-> token pairs: the columns checked, upstream's
 * per-column normalisation computed the way numpy computes it on float32 arrays (pairwise
 * float32 sums down each column), so that the normalised context equals upstream's bit for
 * bit, and tokenizing / detokenizing with it. */
#include "forecast_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kr_column_names[KR_D_IN] = {"open", "high", "low", "close", "volume", "amount"};

/* ---- the columns ----------------------------------------------------------------------- */

int kr_candle_value_check(double x, char *why, size_t n) {
    if (isnan(x)) {
        snprintf(why, n, "NaN is not allowed");
    } else if (isinf(x)) {
        snprintf(why, n, "infinity is not allowed");
    } else if (fabs(x) > FLT_MAX) {
        snprintf(why, n,
                 "%g is outside the float32 range the model computes in (magnitude up to %.6g)", x,
                 (double)FLT_MAX);
    } else {
        return 0;
    }
    return -1;
}

int kr_check_columns(const kr_candles *r, kr_error *err) {
    for (int c = 0; c < KR_VOLUME; c++)
        if (!r->columns[c])
            return kr_fail_code(err, KR_E_INVALID, "candles.%s: missing", kr_column_names[c]);
    if (!r->columns[KR_VOLUME] && r->columns[KR_AMOUNT])
        return kr_fail_code(err, KR_E_INVALID, "candles.amount: given without candles.volume");
    char why[128];
    for (int c = 0; c < KR_D_IN; c++)
        for (int i = 0; r->columns[c] && i < r->n; i++)
            if (kr_candle_value_check(r->columns[c][i], why, sizeof why))
                return kr_fail_code(err, KR_E_INVALID, "candles.%s[%d]: %s", kr_column_names[c], i,
                                    why);
    return 0;
}

int kr_check_increasing(const int64_t *ts, int n, const char *path, kr_error *err) {
    for (int i = 1; i < n; i++)
        if (ts[i] <= ts[i - 1])
            return kr_fail_code(err, KR_E_INVALID, "%s[%d]: not after the previous timestamp", path,
                                i);
    return 0;
}

void kr_raw_candles(const kr_candles *r, float *x) {
    for (int i = 0; i < r->n; i++) {
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

/* ---- normalisation --------------------------------------------------------------------- */

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

int kr_check_normalisation(const kr_norm *r, kr_error *err) {
    for (int c = 0; r && r->pinned && c < KR_D_IN; c++) {
        if (!isfinite(r->mean[c]))
            return kr_fail_code(err, KR_E_INVALID, "normalization.mean.%s: must be finite",
                                kr_column_names[c]);
        if (!isfinite(r->std[c]) || !(r->std[c] >= 0.0f))
            return kr_fail_code(err, KR_E_INVALID,
                                "normalization.std.%s: must be finite and >= 0, got %g",
                                kr_column_names[c], (double)r->std[c]);
    }
    return 0;
}

int kr_normalise_for(const kr_norm *r, const float *raw, int n, float *xn, float mean[KR_D_IN],
                     float std[KR_D_IN], kr_error *err) {
    if (!r || !r->pinned) return kr_normalise(raw, n, xn, mean, std, err);
    memcpy(mean, r->mean, KR_D_IN * sizeof(float));
    memcpy(std, r->std, KR_D_IN * sizeof(float));
    kr_normalise_rows(raw, n, mean, std, xn);
    return 0;
}

float *kr_normalised(const kr_candles *c, const kr_norm *norm, float mean[KR_D_IN],
                     float std[KR_D_IN], const char *what, kr_error *err) {
    float *raw = malloc((size_t)c->n * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)c->n * KR_D_IN * sizeof(float));
    if (!raw || !xn) {
        kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory for %d candles", what, c->n);
    } else {
        kr_raw_candles(c, raw);
        if (kr_normalise_for(norm, raw, c->n, xn, mean, std, err) == 0) {
            free(raw);
            return xn;
        }
    }
    free(raw);
    free(xn);
    return NULL;
}

/* ---- tokens ---------------------------------------------------------------------------- */

int kr_tokenize_candles(const kr_model *m, const kr_candles *r, const kr_norm *norm, int32_t *s1,
                        int32_t *s2, float mean[KR_D_IN], float std[KR_D_IN], kr_error *err) {
    int L = r->n;
    if (L < 1) return kr_fail_code(err, KR_E_INVALID, "candles: at least 1 candle is required");
    if (kr_check_columns(r, err) || kr_check_normalisation(norm, err)) return -1;
    float *xn = kr_normalised(r, norm, mean, std, "tokenize", err);
    if (!xn) return -1;
    int rc = kr_tokenizer_encode(m, xn, L, s1, s2, err);
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
