/* series.c — a live candle series (kr_series): raw candles, statistics fixed at creation,
 * the tokenizer encoder's own KV cache, every candle's tokens, and the predictor cache of
 * the window a forecast's first step would prefill.
 *
 * Appending encodes only the new candles, against the encoder's cached keys and values
 * (the encoder is causal), and extends the predictor cache with their tokens; once the
 * series outgrows max_context the predictor window slides as a forecast's does, and its
 * cache is refilled with the new window (positions start at 0 in every window). Every
 * row's arithmetic is its own (nn.h, attention.c), so the tokens and the cache hold the
 * same bits as encoding and prefilling the whole series at once.
 */
#include "forecast_impl.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Positions per encoder-cache and decoder-cache block: blocks are added as the series
 * grows, so nothing is ever re-laid. The decoder's are small: a forecast copies the last,
 * partly filled one for each path. */
#define ENC_BLOCK 256
#define DEC_BLOCK 16

struct kr_series {
    const kr_model *m;
    kr_pool *pool;
    int n, cap, max_candles;
    bool has[KR_D_IN];
    int64_t *timestamps;      /* [cap] */
    double *columns[KR_D_IN]; /* [cap], NULL for a column the series does not have */
    kr_stamp *stamps;         /* [cap] */
    int32_t *s1, *s2;         /* [cap]: every candle's tokens */
    float mean[KR_D_IN], std[KR_D_IN];
    float **enc;    /* encoder cache blocks: [n_enc][K, V][ENC_BLOCK][d] each */
    int enc_blocks; /* allocated */
    kr_cache *pred; /* tokens [pred_start, n) */
    int pred_start;
    bool cacheless; /* no predictor cache is ever held (kr_series_create_cacheless) */
    /* the tokenizer decoder's keys and values of tokens [0, n): a forecast's summary
     * decodes windows that start with them while the window has not slid (n < max_context);
     * dec_len -1 once the series is past that */
    float **dec;
    int dec_blocks, dec_len;
};

int kr_series_length(const kr_series *s) {
    return s->n;
}

int64_t kr_series_last_timestamp(const kr_series *s) {
    return s->timestamps[s->n - 1];
}

void kr_series_stats(const kr_series *s, float mean[KR_D_IN], float std[KR_D_IN]) {
    memcpy(mean, s->mean, sizeof s->mean);
    memcpy(std, s->std, sizeof s->std);
}

const int32_t *kr_series_tokens(const kr_series *s, int which) {
    return which == 1 ? s->s1 : s->s2;
}

static size_t enc_block_floats(const kr_model *m) {
    return (size_t)(m->tok.n_enc > 0 ? m->tok.n_enc : 1) * 2 * ENC_BLOCK * m->tc.d_model;
}

static size_t dec_block_floats(const kr_model *m) {
    return (size_t)(m->tok.n_dec > 0 ? m->tok.n_dec : 1) * 2 * DEC_BLOCK * m->tc.d_model;
}

static void free_decoder(kr_series *s) {
    for (int b = 0; b < s->dec_blocks; b++)
        free(s->dec[b]);
    free(s->dec);
    s->dec = NULL;
    s->dec_blocks = 0;
    s->dec_len = -1;
}

/* The arrays' bytes for cap candles of `cols` columns. */
static size_t array_bytes(int cap, int cols) {
    return (size_t)cap * (sizeof(int64_t) + (size_t)cols * sizeof(double) + sizeof(kr_stamp) +
                          2 * sizeof(int32_t));
}

size_t kr_series_heap_bytes(const kr_series *s) {
    int cols = 0;
    for (int c = 0; c < KR_D_IN; c++)
        cols += s->has[c];
    return array_bytes(s->cap, cols) +
           (size_t)s->enc_blocks * enc_block_floats(s->m) * sizeof(float) +
           (size_t)s->dec_blocks * dec_block_floats(s->m) * sizeof(float);
}

size_t kr_series_bytes(const kr_series *s) {
    return kr_series_heap_bytes(s) + (s->pred ? kr_cache_bytes(s->pred) : 0);
}

size_t kr_series_bytes_for(const kr_model *m, int n, size_t *pool_bytes) {
    if (n <= 0) {
        *pool_bytes = 0;
        return 0;
    }
    int cap = 64; /* as reserve() grows it */
    while (cap < n)
        cap *= 2;
    const int mc = m->max_context;
    const size_t dblocks = n < mc ? (size_t)(n + DEC_BLOCK - 1) / DEC_BLOCK : 0;
    *pool_bytes = kr_pool_bytes_for(m, n < mc ? n : mc);
    return array_bytes(cap, KR_D_IN) +
           (size_t)((n + ENC_BLOCK - 1) / ENC_BLOCK) * enc_block_floats(m) * sizeof(float) +
           dblocks * dec_block_floats(m) * sizeof(float);
}

void kr_series_request(const kr_series *s, kr_forecast_request *req) {
    req->context.n = s->n;
    req->context.timestamps = s->timestamps;
    for (int c = 0; c < KR_D_IN; c++)
        req->context.columns[c] = s->has[c] ? s->columns[c] : NULL;
    req->norm.pinned = true;
    memcpy(req->norm.mean, s->mean, sizeof s->mean);
    memcpy(req->norm.std, s->std, sizeof s->std);
}

void kr_series_set_max_candles(kr_series *s, int max_candles) {
    s->max_candles = max_candles;
}

void kr_series_free(kr_series *s) {
    if (!s) return;
    kr_cache_free(s->pred);
    free_decoder(s);
    for (int b = 0; b < s->enc_blocks; b++)
        free(s->enc[b]);
    free(s->enc);
    free(s->timestamps);
    for (int c = 0; c < KR_D_IN; c++)
        free(s->columns[c]);
    KR_FREE_ALL(s->stamps, s->s1, s->s2, s);
}

/* At least `want` blocks of `floats` floats in *blocks (*have of them now); -1 when out of
 * memory, the blocks made so far kept (and counted). */
static int grow_blocks(float ***blocks, int *have, int want, size_t floats) {
    if (want <= *have) return 0;
    float **e = realloc(*blocks, (size_t)want * sizeof *e);
    if (!e) return -1;
    *blocks = e;
    for (; *have < want; ++*have)
        if (!(e[*have] = malloc(floats * sizeof(float)))) return -1;
    return 0;
}

/* Room for `need` candles in the arrays and the encoder cache. */
static int reserve(kr_series *s, int need, kr_error *err) {
    if (need > s->cap) {
        int cap = s->cap ? s->cap : 64;
        while (cap < need)
            cap *= 2;
        void *p;
#define GROW(field)                                                                                \
    do {                                                                                           \
        if (!(p = realloc(s->field, (size_t)cap * sizeof *s->field))) goto no_memory;              \
        s->field = p;                                                                              \
    } while (0)
        GROW(timestamps);
        GROW(stamps);
        GROW(s1);
        GROW(s2);
        for (int c = 0; c < KR_D_IN; c++)
            if (s->has[c]) GROW(columns[c]);
#undef GROW
        s->cap = cap;
    }
    int dblocks =
        s->dec_len >= 0 && need < s->m->max_context ? (need + DEC_BLOCK - 1) / DEC_BLOCK : 0;
    if (grow_blocks(&s->enc, &s->enc_blocks, (need + ENC_BLOCK - 1) / ENC_BLOCK,
                    enc_block_floats(s->m)) ||
        grow_blocks(&s->dec, &s->dec_blocks, dblocks, dec_block_floats(s->m)))
        goto no_memory;
    return 0;
no_memory:
    return kr_fail_code(err, KR_E_NO_MEMORY, "series: out of memory for %d candles", need);
}

int kr_series_check_append(const kr_series_shape *shape, const kr_candles *r, kr_error *err) {
    if (r->n < 1) return kr_fail_code(err, KR_E_INVALID, "candles: at least 1 candle is required");
    if (!r->timestamps) return kr_fail_code(err, KR_E_INVALID, "candles.timestamps: missing");
    for (int c = 0; c < KR_D_IN; c++) {
        if (shape->has[c] && !r->columns[c])
            return kr_fail_code(err, KR_E_INVALID, "candles.%s: missing; the series has it",
                                kr_column_names[c]);
        if (!shape->has[c] && r->columns[c])
            return kr_fail_code(err, KR_E_INVALID, "candles.%s: given, but the series has none",
                                kr_column_names[c]);
    }
    if (kr_check_columns(r, err)) return -1;
    for (int i = 0; i < r->n; i++) {
        int64_t prev = i ? r->timestamps[i - 1] : shape->last_timestamp;
        if (r->timestamps[i] <= prev)
            return kr_fail_code(err, KR_E_INVALID,
                                i ? "candles.timestamps[%d]: not after the previous timestamp"
                                  : "candles.timestamps[%d]: not after the series' last candle",
                                i);
    }
    if (shape->max_candles > 0 && (long)shape->n + r->n > shape->max_candles)
        return kr_fail_code(err, KR_E_TOO_LARGE,
                            "candles: %d held + %d new exceed the limit of %d candles", shape->n,
                            r->n, shape->max_candles);
    return 0;
}

static int check_append(const kr_series *s, const kr_candles *r, kr_error *err) {
    kr_series_shape shape = {
        .n = s->n, .last_timestamp = s->timestamps[s->n - 1], .max_candles = s->max_candles};
    memcpy(shape.has, s->has, sizeof shape.has);
    return kr_series_check_append(&shape, r, err);
}

int kr_series_check_create(const kr_candles *r, const kr_norm *norm, int max_candles,
                           kr_error *err) {
    if (r->n < 1) return kr_fail_code(err, KR_E_INVALID, "candles: at least 1 candle is required");
    if (!r->timestamps) return kr_fail_code(err, KR_E_INVALID, "candles.timestamps: missing");
    if (kr_check_columns(r, err) || kr_check_normalisation(norm, err) ||
        kr_check_increasing(r->timestamps, r->n, "candles.timestamps", err))
        return -1;
    if (max_candles > 0 && r->n > max_candles)
        return kr_fail_code(err, KR_E_TOO_LARGE, "candles: %d exceed the limit of %d candles", r->n,
                            max_candles);
    return 0;
}

/* The predictor cache for a series of n tokens: appended to while the window starts at 0,
 * refilled (into a new cache, swapped in on success) once it slides. */
static int extend_predictor(kr_series *s, int n_old, int n, bool refill, kr_error *err) {
    int mc = s->m->max_context, start = n > mc ? n - mc : 0;
    if (s->cacheless) return 0;
    if (s->pred && start == s->pred_start && !refill) {
        if (kr_cache_append(&s->pred, 1, s->s1 + n_old, s->s2 + n_old, s->stamps + n_old, n - n_old,
                            NULL, err))
            return -1;
        return 0;
    }
    kr_cache *c = kr_cache_create(s->pool, mc, err);
    if (!c) return -1;
    if (kr_cache_append(&c, 1, s->s1 + start, s->s2 + start, s->stamps + start, n - start, NULL,
                        err)) {
        kr_cache_free(c);
        return -1;
    }
    kr_cache_free(s->pred);
    s->pred = c;
    s->pred_start = start;
    return 0;
}

/* Candles [n, n + k) of r into the series: stored, normalised, encoded, appended. */
static int add_candles(kr_series *s, const kr_candles *r, bool refill, kr_error *err) {
    int n0 = s->n, k = r->n;
    if (reserve(s, n0 + k, err)) return -1;
    kr_norm fixed = {.pinned = true}; /* the series' statistics */
    float mean[KR_D_IN], std[KR_D_IN];
    memcpy(fixed.mean, s->mean, sizeof s->mean);
    memcpy(fixed.std, s->std, sizeof s->std);
    float *xn = kr_normalised(r, &fixed, mean, std, "series", err);
    int rc = -1;
    if (!xn) return -1;
    for (int i = 0; i < k; i++) {
        s->timestamps[n0 + i] = r->timestamps[i];
        s->stamps[n0 + i] = kr_stamp_from_wall(r->timestamps[i]);
        for (int c = 0; c < KR_D_IN; c++)
            if (s->has[c]) s->columns[c][n0 + i] = r->columns[c][i];
    }
    kr_kv_view kv = {s->enc, ENC_BLOCK, s->m->tc.d_model, 0};
    kr_kv_view dv = {s->dec, DEC_BLOCK, s->m->tc.d_model, 0};
    bool decoder = s->dec_len == n0 && n0 + k < s->m->max_context;
    /* positions past n are scratch until n moves: a failure leaves the series as it was */
    if (kr_tokenizer_encode_rows(s->m, xn, k, &kv, n0, s->s1 + n0, s->s2 + n0, err) ||
        (decoder && kr_tokenizer_decoder_extend(s->m, &dv, n0, s->s1 + n0, s->s2 + n0, k, err)) ||
        extend_predictor(s, n0, n0 + k, refill, err))
        goto out;
    s->n = n0 + k;
    if (decoder)
        s->dec_len = s->n;
    else
        free_decoder(s); /* the window slides from now on: a summary never starts at 0 */
    rc = 0;
out:
    free(xn);
    return rc;
}

static kr_series *create(const kr_model *m, kr_pool *pool, const kr_candles *r, const kr_norm *norm,
                         int max_candles, bool cacheless, kr_error *err) {
    if (kr_series_check_create(r, norm, max_candles, err)) return NULL;
    kr_series *s = calloc(1, sizeof *s);
    float *xn = NULL;
    if (!s) {
        kr_fail_code(err, KR_E_NO_MEMORY, "series: out of memory for %d candles", r->n);
        goto fail;
    }
    s->m = m;
    s->pool = pool;
    s->max_candles = max_candles;
    s->cacheless = cacheless;
    for (int c = 0; c < KR_D_IN; c++)
        s->has[c] = r->columns[c] != NULL;
    /* the statistics: as pinned, or those of the first candles, computed as a forecast
     * computes them (kr_normalise_for) */
    if (!(xn = kr_normalised(r, norm, s->mean, s->std, "series", err))) goto fail;
    for (int c = 0; c < KR_D_IN; c++)
        if (!isfinite(s->mean[c]) || !isfinite(s->std[c])) {
            kr_fail_code(err, KR_E_INVALID,
                         "candles.%s: its mean or spread overflows float32; scale it down",
                         kr_column_names[c]);
            goto fail;
        }
    if (add_candles(s, r, false, err)) goto fail;
    free(xn);
    return s;
fail:
    free(xn);
    kr_series_free(s);
    return NULL;
}

kr_series *kr_series_create(const kr_model *m, kr_pool *pool, const kr_candles *r,
                            const kr_norm *norm, int max_candles, kr_error *err) {
    return create(m, pool, r, norm, max_candles, false, err);
}

kr_series *kr_series_create_cacheless(const kr_model *m, kr_pool *pool, const kr_candles *r,
                                      const kr_norm *norm, int max_candles, kr_error *err) {
    return create(m, pool, r, norm, max_candles, true, err);
}

int kr_series_append(kr_series *s, const kr_candles *r, kr_error *err) {
    if (check_append(s, r, err)) return -1;
    return add_candles(s, r, false, err);
}

double kr_series_create_flops(const kr_model *m, int n) {
    const kr_predictor_config *pc = &m->pc;
    const kr_tokenizer_config *tc = &m->tc;
    const int mc = m->max_context, w = n > mc ? mc : n;
    /* every candle encoded (and decoded while the window has not slid), the window prefilled */
    double f = kr_stack_flops(n, n, tc->n_enc_layers - 1, tc->d_model, tc->ff_dim);
    if (n < mc) f += kr_stack_flops(n, n, tc->n_dec_layers - 1, tc->d_model, tc->ff_dim);
    return f + kr_stack_flops(w, w, pc->n_layers, pc->d_model, pc->ff_dim);
}

double kr_series_append_flops(const kr_series *s, int k, bool reclock) {
    const kr_predictor_config *pc = &s->m->pc;
    const kr_tokenizer_config *tc = &s->m->tc;
    const int n = s->n + k, mc = s->m->max_context, start = n > mc ? n - mc : 0;
    const int w = n - start;
    /* the new candles encoded (and decoded while the window has not slid); the predictor
     * extended by them, or its whole window prefilled again once it slides or the clock
     * moves */
    const bool refill = reclock || !s->pred || start != s->pred_start;
    double f = kr_stack_flops(k, n, tc->n_enc_layers - 1, tc->d_model, tc->ff_dim);
    if (s->dec_len >= 0 && n < mc)
        f += kr_stack_flops(k, n, tc->n_dec_layers - 1, tc->d_model, tc->ff_dim);
    if (!s->cacheless)
        f += kr_stack_flops(refill ? w : k, w, pc->n_layers, pc->d_model, pc->ff_dim);
    return f;
}

/* The held candles' timestamps and time features on a clock shift seconds ahead. */
static void move_clock(kr_series *s, int64_t shift) {
    for (int i = 0; i < s->n; i++) {
        s->timestamps[i] += shift;
        s->stamps[i] = kr_stamp_from_wall(s->timestamps[i]);
    }
}

int kr_series_append_shifted(kr_series *s, const kr_candles *r, int64_t shift, kr_error *err) {
    if (shift == 0) return kr_series_append(s, r, err);
    move_clock(s, shift);
    /* the predictor cache holds the old time features: refilled (swapped in on success) */
    const int rc = check_append(s, r, err) || add_candles(s, r, true, err) ? -1 : 0;
    if (rc) move_clock(s, -shift);
    return rc;
}

/* ---- what a forecast job takes from it (job.c, sched/sched_forecast.c) ------------------- */

kr_cache *kr_series_cache(const kr_series *s, int *start) {
    *start = s->pred_start;
    return s->pred;
}

const kr_model *kr_series_model(const kr_series *s) {
    return s->m;
}

kr_pool *kr_series_pool(const kr_series *s) {
    return s->pool;
}

int kr_series_decoder(const kr_series *s, kr_kv_view *kv) {
    *kv = (kr_kv_view){s->dec, DEC_BLOCK, s->m->tc.d_model, 0};
    return s->dec_len > 0 ? s->dec_len : 0;
}

const kr_stamp *kr_series_stamps(const kr_series *s) {
    return s->stamps;
}
