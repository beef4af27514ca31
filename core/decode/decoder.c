/* decoder.c — incremental decoding on KV caches: batched chunk append (prefill and
 * single-token decode are the same call) and s2 logits from the cached dependency-layer
 * keys. Token-level generation runs on the scheduler (sched/sched_generate.c). */
#include "cache.h"
#include "predictor.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Rows per GEMM batch: bounds the scratch of a long prefill over many caches. */
#define KR_MAX_BATCH_ROWS 2048

typedef struct {
    kr_block_scratch blk;
    float *x, *pair, *last, *logits;
    int32_t *g1, *g2;
    kr_stamp *gs;
    kr_kv_view *views;
    kr_seq *seqs;
    int *left, *n;  /* per cache: rows still to append, rows in this chunk */
    bool *want;     /* per cache: its last row is in this chunk */
    kr_scratch mem; /* all but blk, one buffer */
} append_scratch;

static void append_scratch_free(append_scratch *a) {
    kr_block_scratch_free(&a->blk);
    kr_scratch_release(&a->mem);
}

/* The arrays in 64-byte steps from base (NULL: only the size) */
static size_t append_layout(append_scratch *a, char *base, const kr_model *m, int S, int rows) {
    int d = m->pc.d_model;
    size_t at = 0, sizes[12] = {(size_t)rows * d * sizeof(float),
                                (size_t)rows * 2 * d * sizeof(float),
                                (size_t)S * d * sizeof(float),
                                (size_t)S * ((size_t)1 << m->pc.s1_bits) * sizeof(float),
                                (size_t)rows * sizeof *a->g1,
                                (size_t)rows * sizeof *a->g2,
                                (size_t)rows * sizeof *a->gs,
                                (size_t)S * sizeof *a->views,
                                (size_t)S * sizeof *a->seqs,
                                (size_t)S * sizeof *a->left,
                                (size_t)S * sizeof *a->n,
                                (size_t)S * sizeof *a->want};
    void **at_ptr[12] = {(void **)&a->x,      (void **)&a->pair,  (void **)&a->last,
                         (void **)&a->logits, (void **)&a->g1,    (void **)&a->g2,
                         (void **)&a->gs,     (void **)&a->views, (void **)&a->seqs,
                         (void **)&a->left,   (void **)&a->n,     (void **)&a->want};
    for (int i = 0; i < 12; i++) {
        at = kr_carve(base, at, at_ptr[i], sizes[i]);
    }
    return at;
}

static int append_scratch_init(append_scratch *a, const kr_model *m, int S, int rows, int max_keys,
                               kr_error *err) {
    int d = m->pc.d_model;
    memset(a, 0, sizeof *a);
    if (kr_block_scratch_init(&a->blk, rows, max_keys, d, m->pc.ff_dim, m->pc.n_heads, err))
        return -1;
    char *base = kr_scratch_take(&a->mem, KR_SCRATCH_APPEND, append_layout(a, NULL, m, S, rows));
    if (!base) {
        append_scratch_free(a);
        return kr_fail_code(err, KR_E_NO_MEMORY, "decoder: out of memory for a batch of %d rows",
                            rows);
    }
    append_layout(a, base, m, S, rows);
    return 0;
}

/* One chunk: n[i] rows of cache i (concatenated in x order), blocks already reserved. The s1
 * logits of cache i are written when want[i] (its last row is in this chunk). */
static void append_chunk(kr_cache *const *caches, int S, const int *n, const int32_t *s1,
                         const int32_t *s2, const kr_stamp *stamps, const bool *want,
                         float *s1_logits, append_scratch *a) {
    const kr_model *m = caches[0]->m;
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model, R = 0, dep = m->pc.n_layers, v1 = 1 << m->pc.s1_bits;
    for (int i = 0; i < S; i++)
        R += n[i];

    kr_predictor_embed(m, s1, s2, stamps, R, a->x, a->pair);
    for (int i = 0; i < S; i++) {
        a->views[i] = kr_cache_view(caches[i]);
        a->seqs[i] = (kr_seq){&a->views[i], caches[i]->len, caches[i]->raw_kv, n[i]};
    }
    for (int l = 0; l < w->n_layers; l++)
        kr_block_forward(&w->blocks[l], l, a->x, S, a->seqs, &a->blk);
    kr_rmsnorm(a->x, a->x, w->norm, R, d);

    /* the dependency layer's keys and values of the new positions (no RoPE there) */
    kr_predictor_dep_kv(m, a->x, R, a->blk.k, a->blk.v, a->blk.stacked);
    int n_last = 0;
    for (int i = 0, row = 0; i < S; i++) {
        kr_cache *c = caches[i];
        for (int t = 0; t < n[i]; t++, row++) {
            kr_kv_put_k(&a->views[i], dep, c->len + t, a->blk.k + (size_t)row * d);
            memcpy(kr_kv_v(&a->views[i], dep, c->len + t), a->blk.v + (size_t)row * d,
                   (size_t)d * sizeof(float));
        }
        if (n[i] == 0) continue;
        memcpy(c->h_last, a->x + (size_t)(row - 1) * d, (size_t)d * sizeof(float));
        c->len += n[i];
        if (want[i]) memcpy(a->last + (size_t)n_last++ * d, c->h_last, (size_t)d * sizeof(float));
    }
    /* only the last position of each cache is projected to the vocabulary */
    if (!s1_logits || n_last == 0) return;
    kr_linear_forward(a->logits, a->last, n_last, &w->proj_s1);
    for (int i = 0, k = 0; i < S; i++)
        if (want[i])
            memcpy(s1_logits + (size_t)i * v1, a->logits + (size_t)k++ * v1,
                   (size_t)v1 * sizeof(float));
}

int kr_cache_append_ragged(kr_cache *const *caches, int S, const int *T, const int32_t *s1,
                           const int32_t *s2, const kr_stamp *stamps, float *s1_logits,
                           kr_error *err) {
    if (S < 1) return kr_fail(err, "append: no caches");
    const kr_model *m = caches[0]->m;
    long total = 0;
    int max_len = 0;
    for (int i = 0; i < S; i++) {
        if (caches[i]->m != m) return kr_fail(err, "append: caches of different models");
        if (T[i] < 0) return kr_fail(err, "append: negative row count %d for cache %d", T[i], i);
        total += T[i];
    }
    if (total < 1) return kr_fail(err, "append: nothing to append");
    if (total > INT_MAX / 2) return kr_fail(err, "append: %ld rows are too many", total);
    if (kr_predictor_check_inputs(m, s1, s2, stamps, (int)total, err)) return -1;
    for (int i = 0; i < S; i++) {
        if (kr_cache_reserve(caches[i], T[i], err)) {
            for (int j = 0; j <= i; j++)
                kr_cache_trim(caches[j]);
            return -1;
        }
        if (caches[i]->len + T[i] > max_len) max_len = caches[i]->len + T[i];
    }
    int rows = total < KR_MAX_BATCH_ROWS ? (int)total : KR_MAX_BATCH_ROWS;
    append_scratch a;
    int rc = -1;
    if (append_scratch_init(&a, m, S, rows, max_len, err)) goto out;
    int *left = a.left, *n = a.n;
    bool *want = a.want;
    memcpy(left, T, (size_t)S * sizeof *left);
    /* chunks of at most `rows` rows, each cache's rows in order; s1, s2 and stamps advance
     * through the rows in the same order as the chunks take them */
    for (long done = 0; done < total;) {
        int budget = rows, taken = 0;
        size_t base = 0;
        for (int i = 0; i < S; i++) {
            n[i] = left[i] < budget ? left[i] : budget;
            budget -= n[i];
            taken += n[i];
            want[i] = n[i] > 0 && n[i] == left[i];
        }
        /* rows of this chunk, gathered in cache order from the caller's layout */
        for (int i = 0, first = 0; i < S; first += T[i++]) {
            size_t src = (size_t)first + (size_t)(T[i] - left[i]);
            memcpy(a.g1 + base, s1 + src, (size_t)n[i] * sizeof *s1);
            memcpy(a.g2 + base, s2 + src, (size_t)n[i] * sizeof *s2);
            memcpy(a.gs + base, stamps + src, (size_t)n[i] * sizeof *stamps);
            base += (size_t)n[i];
            left[i] -= n[i];
        }
        append_chunk(caches, S, n, a.g1, a.g2, a.gs, want, s1_logits, &a);
        done += taken;
    }
    rc = 0;
out:
    if (rc)
        for (int i = 0; i < S; i++)
            kr_cache_trim(caches[i]);
    append_scratch_free(&a);
    return rc;
}

int kr_cache_append(kr_cache *const *caches, int S, const int32_t *s1, const int32_t *s2,
                    const kr_stamp *stamps, int T, float *s1_logits, kr_error *err) {
    if (S < 1 || T < 1) return kr_fail(err, "append: nothing to append (S = %d, T = %d)", S, T);
    int *Ts = malloc((size_t)S * sizeof *Ts);
    if (!Ts) return kr_fail_code(err, KR_E_NO_MEMORY, "append: out of memory for %d caches", S);
    for (int i = 0; i < S; i++)
        Ts[i] = T;
    int rc = kr_cache_append_ragged(caches, S, Ts, s1, s2, stamps, s1_logits, err);
    free(Ts);
    return rc;
}

int kr_cache_s1_logits(const kr_cache *c, float *s1_logits, kr_error *err) {
    if (c->len < 1) return kr_fail(err, "cache: empty, there is no last position");
    kr_linear_forward(s1_logits, c->h_last, 1, &c->m->pred.proj_s1);
    return 0;
}

int kr_cache_s2_logits(kr_cache *const *caches, int S, const int32_t *s1, float *s2_logits,
                       kr_error *err) {
    if (S < 1) return kr_fail(err, "s2 logits: no caches");
    const kr_model *m = caches[0]->m;
    int v1 = 1 << m->pc.s1_bits;
    for (int i = 0; i < S; i++) {
        if (caches[i]->len < 1) return kr_fail(err, "s2 logits: cache %d is empty", i);
        if (s1[i] < 0 || s1[i] >= v1)
            return kr_fail(err, "s2 logits: s1 = %d is outside [0, %d)", (int)s1[i], v1);
    }
    /* the views, rows and last states from the thread's append scratch (free between
     * appends): no allocation a step */
    kr_kv_view *views;
    kr_attn_row *rows;
    const float **h_last;
    void **arrays[3] = {(void **)&views, (void **)&rows, (void **)&h_last};
    size_t sizes[3] = {(size_t)S * sizeof *views, (size_t)S * sizeof *rows,
                       (size_t)S * sizeof *h_last},
           bytes = 0;
    for (int i = 0; i < 3; i++)
        bytes = kr_carve(NULL, bytes, arrays[i], sizes[i]);
    kr_scratch mem;
    char *base = kr_scratch_take(&mem, KR_SCRATCH_APPEND, bytes);
    if (!base)
        return kr_fail_code(err, KR_E_NO_MEMORY, "s2 logits: out of memory for %d caches", S);
    for (size_t i = 0, at = 0; i < 3; i++)
        at = kr_carve(base, at, arrays[i], sizes[i]);
    for (int i = 0; i < S; i++) {
        views[i] = kr_cache_view(caches[i]);
        rows[i] = (kr_attn_row){&views[i], caches[i]->len};
        h_last[i] = caches[i]->h_last;
    }
    int rc = kr_predictor_s2_rows(m, rows, m->pc.n_layers, h_last, s1, S, s2_logits, err);
    kr_scratch_release(&mem);
    return rc;
}
