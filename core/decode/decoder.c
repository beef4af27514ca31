/* decoder.c — incremental decoding on KV caches: batched chunk append (prefill and
 * single-token decode are the same call) and s2 logits from the cached dependency-layer
 * keys. Token-level generation runs on the scheduler (sched/sched_generate.c). */
#include "cache.h"
#include "parallel.h"
#include "predictor.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Rows per GEMM batch: bounds the scratch of a long prefill over many caches. */
#define KR_MAX_BATCH_ROWS 2048

/* Rows of a chunk from which the caches' bookkeeping (the dependency layer's keys and
 * values, the last state, the s1 logits) runs on the pool's threads: below it a loop's
 * start and join would cost more than the copies. */
#define KR_PARALLEL_STORE_ROWS 4

typedef struct {
    kr_block_scratch blk;
    float *x, *pair, *last, *logits;
    float *heads; /* [S][2d + 2^s1_bits]: dep_kv_s1 of a decode step's rows */
    int32_t *g1, *g2;
    kr_stamp *gs;
    kr_kv_view *views;
    kr_seq *seqs;
    int *left, *n;  /* per cache: rows still to append, rows in this chunk */
    int *row0;      /* per cache: its first row in this chunk */
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
    size_t v1 = (size_t)1 << m->pc.s1_bits,
           heads = kr_linear_is_packed(&m->pred.dep_kv_s1) ? 2 * (size_t)d + v1 : 0;
    size_t at = 0,
           sizes[] = {(size_t)rows * d * sizeof(float),  (size_t)rows * 2 * d * sizeof(float),
                      (size_t)S * d * sizeof(float),     (size_t)S * v1 * sizeof(float),
                      (size_t)S * heads * sizeof(float), (size_t)rows * sizeof *a->g1,
                      (size_t)rows * sizeof *a->g2,      (size_t)rows * sizeof *a->gs,
                      (size_t)S * sizeof *a->views,      (size_t)S * sizeof *a->seqs,
                      (size_t)S * sizeof *a->left,       (size_t)S * sizeof *a->n,
                      (size_t)S * sizeof *a->row0,       (size_t)S * sizeof *a->want};
    void **at_ptr[] = {(void **)&a->x,      (void **)&a->pair,  (void **)&a->last,
                       (void **)&a->logits, (void **)&a->heads, (void **)&a->g1,
                       (void **)&a->g2,     (void **)&a->gs,    (void **)&a->views,
                       (void **)&a->seqs,   (void **)&a->left,  (void **)&a->n,
                       (void **)&a->row0,   (void **)&a->want};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        at = kr_carve(base, at, at_ptr[i], sizes[i]);
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

/* The bookkeeping of a chunk's new rows in their caches, cache by cache (one loop item a
 * cache: items write disjoint memory, as each cache's block at its new positions is its
 * own, kr_cache_reserve): the dependency layer's keys and values (row r's at k, v +
 * r * stride), the last state, the length, and (logits not NULL) the s1 logits (row r's at
 * logits + r * stride). */
typedef struct {
    kr_cache *const *caches;
    const kr_kv_view *views;
    const int *n, *row0;
    const float *x, *k, *v, *logits;
    size_t stride;
    float *s1_logits;
} store_job;

static void store_cache(void *ctx, int i, int worker) {
    (void)worker;
    const store_job *j = ctx;
    kr_cache *c = j->caches[i];
    int n = j->n[i], d = c->m->pc.d_model, dep = c->m->pc.n_layers;
    if (n == 0) return;
    for (int t = 0; t < n; t++) {
        size_t row = (size_t)(j->row0[i] + t);
        kr_kv_put_k(&j->views[i], dep, c->len + t, j->k + row * j->stride);
        kr_kv_put_v(&j->views[i], dep, c->len + t, j->v + row * j->stride);
    }
    size_t last = (size_t)(j->row0[i] + n - 1);
    memcpy(c->h_last, j->x + last * d, (size_t)d * sizeof(float));
    c->len += n;
    if (j->logits) {
        size_t v1 = (size_t)1 << c->m->pc.s1_bits;
        memcpy(j->s1_logits + i * v1, j->logits + last * j->stride, v1 * sizeof(float));
    }
}

/* One chunk: n[i] rows of cache i (concatenated in x order), blocks already reserved. The s1
 * logits of cache i are written when want[i] (its last row is in this chunk). */
static void append_chunk(kr_cache *const *caches, int S, const int *n, const int32_t *s1,
                         const int32_t *s2, const kr_stamp *stamps, const bool *want,
                         float *s1_logits, append_scratch *a) {
    const kr_model *m = caches[0]->m;
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model, R = 0, n_want = 0, v1 = 1 << m->pc.s1_bits;
    for (int i = 0; i < S; i++) {
        a->row0[i] = R;
        R += n[i];
        n_want += want[i];
    }

    kr_predictor_embed(m, s1, s2, stamps, R, a->x, a->pair);
    for (int i = 0; i < S; i++) {
        a->views[i] = kr_cache_view(caches[i]);
        a->seqs[i] = (kr_seq){&a->views[i], caches[i]->len, caches[i]->raw_kv, n[i]};
    }
    for (int l = 0; l < w->n_layers; l++)
        kr_block_forward(&w->blocks[l], l, a->x, S, a->seqs, &a->blk);
    kr_rmsnorm(a->x, a->x, w->norm, R, d);

    /* the dependency layer's keys and values of the new positions (no RoPE there); a decode
     * step (every row the last of its cache, each wanting its logits) takes them and the s1
     * logits in one product */
    store_job j = {caches, a->views, n, a->row0, a->x, a->blk.k, a->blk.v, NULL, (size_t)d, NULL};
    bool fused = s1_logits && n_want == R && kr_linear_is_packed(&w->dep_kv_s1);
    if (fused) {
        kr_linear_forward(a->heads, a->x, R, &w->dep_kv_s1);
        j.k = a->heads;
        j.v = a->heads + d;
        j.logits = a->heads + 2 * d;
        j.stride = 2 * (size_t)d + v1;
        j.s1_logits = s1_logits;
    } else {
        kr_predictor_dep_kv(m, a->x, R, a->blk.k, a->blk.v, a->blk.stacked);
    }
    kr_parallel_for_if(R >= KR_PARALLEL_STORE_ROWS, S, store_cache, &j);
    /* only the last position of each cache is projected to the vocabulary */
    if (fused || !s1_logits || n_want == 0) return;
    for (int i = 0, k = 0; i < S; i++)
        if (want[i])
            memcpy(a->last + (size_t)k++ * d, caches[i]->h_last, (size_t)d * sizeof(float));
    kr_linear_forward(a->logits, a->last, n_want, &w->proj_s1);
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
