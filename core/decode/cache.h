/* cache.h — the KV cache's layout, shared by pool.c (lifecycle) and decoder.c (compute).
 * Internal to core/. */
#ifndef KR_CACHE_H
#define KR_CACHE_H

#include "model.h"
#include "nn.h"

#include <pthread.h>

/* Positions per pool block (kr_pool_stats.block_len says it to the library's users). */
#define KR_BLOCK_LEN 16

struct kr_cache {
    kr_pool *pool;
    const kr_model *m;
    int len, capacity;
    int n_blocks;  /* blocks referenced, in position order */
    int *ids;      /* their pool ids */
    float **ptrs;  /* their memory: [n_layers + 1][K, V][KR_BLOCK_LEN][d] */
    float *raw_kv; /* [n_layers][2][d]: unshifted k, v of the last position (kv_shift) */
    float *h_last; /* [d]: normalised hidden state of the last position */
};

/* Makes room for T more positions (new blocks, copy of a shared last block); the cache's
 * length does not change. Fails with nothing taken when the pool cannot supply it all. */
int kr_cache_reserve(kr_cache *c, int T, kr_error *err);
/* kr_cache_append with T[i] rows for cache i (rows concatenated cache after cache in s1,
 * s2 and stamps); s1_logits (optional) [S][2^s1_bits] at each cache's last position (left
 * alone for a cache with no rows). The scheduler's one call per step. */
int kr_cache_append_ragged(kr_cache *const *caches, int S, const int *T, const int32_t *s1,
                           const int32_t *s2, const kr_stamp *stamps, float *s1_logits,
                           kr_error *err);
/* Gives back blocks past the cache's length (after a failed append). */
void kr_cache_trim(kr_cache *c);

static inline kr_kv_view kr_cache_view(const kr_cache *c) {
    return (kr_kv_view){c->ptrs, KR_BLOCK_LEN, c->m->pc.d_model, c->m->kv == KR_PREC_BF16};
}

/* s1 logits [2^s1_bits] at the last position of a non-empty cache (the scheduler's first
 * draw after a fork; the tests). */
int kr_cache_s1_logits(const kr_cache *c, float *s1_logits, kr_error *err);

#endif
