/* pool.c — the arena pool that KV caches live in, and the caches' lifecycle.
 *
 * The budget is allocated once and carved into equal blocks; a cache is a table of block
 * ids. Blocks are reference-counted so that forks share a prefix without copying it.
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

struct kr_pool {
    const kr_model *m;
    int block_len, n_blocks;
    size_t block_floats;
    float *mem;
    int *refcount;   /* per block; 0 = free */
    int *free_stack; /* ids of free blocks */
    int n_free;
    pthread_mutex_t mu;
};

static size_t block_floats(const kr_model *m) {
    /* per layer K and V rows, plus the dependency layer's K and V; kv bf16: two elements a
     * float (KR_BLOCK_LEN is even) */
    size_t elements = (size_t)(m->pc.n_layers + 1) * 2 * KR_BLOCK_LEN * (size_t)m->pc.d_model;
    return m->kv == KR_PREC_BF16 ? elements / 2 : elements;
}

size_t kr_pool_bytes_for(const kr_model *m, int positions) {
    size_t blocks = ((size_t)positions + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN;
    return blocks * block_floats(m) * sizeof(float);
}

kr_pool *kr_pool_create(const kr_model *m, size_t budget_bytes, kr_error *err) {
    size_t bb = block_floats(m) * sizeof(float);
    if (budget_bytes < bb) {
        kr_fail(err, "pool: a budget of %zu bytes is smaller than one block (%zu bytes)",
                budget_bytes, bb);
        return NULL;
    }
    size_t n = budget_bytes / bb;
    if (n > (size_t)1 << 30) {
        kr_fail(err, "pool: a budget of %zu bytes is too large", budget_bytes);
        return NULL;
    }
    kr_pool *p = kr_zalloc(sizeof *p, err, "pool: out of memory");
    if (!p) return NULL;
    p->m = m;
    p->block_len = KR_BLOCK_LEN;
    p->block_floats = block_floats(m);
    p->n_blocks = (int)n;
    /* untouched pages cost nothing until a cache writes them */
    p->mem = kr_alloc_large(n * bb);
    p->refcount = calloc(n, sizeof *p->refcount);
    p->free_stack = malloc(n * sizeof *p->free_stack);
    if (!p->mem || !p->refcount || !p->free_stack) {
        free(p->mem);
        free(p->refcount);
        free(p->free_stack);
        free(p);
        kr_fail(err, "pool: cannot allocate a budget of %zu bytes", n * bb);
        return NULL;
    }
    for (int i = 0; i < p->n_blocks; i++)
        p->free_stack[i] = p->n_blocks - 1 - i;
    p->n_free = p->n_blocks;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void kr_pool_free(kr_pool *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->mu);
    free(p->mem);
    free(p->refcount);
    free(p->free_stack);
    free(p);
}

void kr_pool_stats_get(kr_pool *p, kr_pool_stats *st) {
    pthread_mutex_lock(&p->mu);
    st->block_len = p->block_len;
    st->block_bytes = p->block_floats * sizeof(float);
    st->blocks_total = p->n_blocks;
    st->blocks_used = p->n_blocks - p->n_free;
    pthread_mutex_unlock(&p->mu);
    st->bytes_total = (size_t)st->blocks_total * st->block_bytes;
    st->bytes_used = (size_t)st->blocks_used * st->block_bytes;
}

static float *kr_pool_block(kr_pool *p, int id) {
    return p->mem + (size_t)id * p->block_floats;
}

/* Takes n blocks at once, or none. */
static int pool_take(kr_pool *p, int n, int *ids) {
    pthread_mutex_lock(&p->mu);
    if (p->n_free < n) {
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        ids[i] = p->free_stack[--p->n_free];
        p->refcount[ids[i]] = 1;
    }
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static void pool_release(kr_pool *p, const int *ids, int n) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++)
        if (--p->refcount[ids[i]] == 0) p->free_stack[p->n_free++] = ids[i];
    pthread_mutex_unlock(&p->mu);
}

static void pool_retain(kr_pool *p, const int *ids, int n) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++)
        p->refcount[ids[i]]++;
    pthread_mutex_unlock(&p->mu);
}

static bool pool_shared(kr_pool *p, int id) {
    pthread_mutex_lock(&p->mu);
    bool shared = p->refcount[id] > 1;
    pthread_mutex_unlock(&p->mu);
    return shared;
}

/* ---- caches ------------------------------------------------------------------------------ */

kr_cache *kr_cache_create(kr_pool *pool, int capacity, kr_error *err) {
    const kr_model *m = pool->m;
    if (capacity == 0) capacity = m->max_context;
    if (capacity < 1 || capacity > m->max_context) {
        kr_fail(err, "cache: capacity %d is outside [1, %d] (the model's max_context)", capacity,
                m->max_context);
        return NULL;
    }
    int d = m->pc.d_model, max_blocks = (capacity + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN;
    kr_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->pool = pool;
        c->m = m;
        c->capacity = capacity;
        c->ids = malloc((size_t)max_blocks * sizeof *c->ids);
        c->ptrs = malloc((size_t)max_blocks * sizeof *c->ptrs);
        /* only kv_shift reads the previous token's raw k and v */
        c->raw_kv = m->pc.kv_shift ? calloc((size_t)m->pc.n_layers * 2 * d, sizeof(float)) : NULL;
        c->h_last = calloc((size_t)d, sizeof(float));
    }
    if (!c || !c->ids || !c->ptrs || (m->pc.kv_shift && !c->raw_kv) || !c->h_last) {
        kr_cache_free(c);
        kr_fail_code(err, KR_E_NO_MEMORY, "cache: out of memory");
        return NULL;
    }
    return c;
}

kr_cache *kr_cache_fork(const kr_cache *src, kr_error *err) {
    kr_cache *c = kr_cache_create(src->pool, src->capacity, err);
    if (!c) return NULL;
    int d = src->m->pc.d_model;
    pool_retain(src->pool, src->ids, src->n_blocks);
    memcpy(c->ids, src->ids, (size_t)src->n_blocks * sizeof *c->ids);
    memcpy(c->ptrs, src->ptrs, (size_t)src->n_blocks * sizeof *c->ptrs);
    if (src->raw_kv)
        memcpy(c->raw_kv, src->raw_kv, (size_t)src->m->pc.n_layers * 2 * d * sizeof(float));
    memcpy(c->h_last, src->h_last, (size_t)d * sizeof(float));
    c->n_blocks = src->n_blocks;
    c->len = src->len;
    return c;
}

void kr_cache_reset(kr_cache *c) {
    pool_release(c->pool, c->ids, c->n_blocks);
    c->n_blocks = 0;
    c->len = 0;
}

void kr_cache_free(kr_cache *c) {
    if (!c) return;
    if (c->ids) kr_cache_reset(c);
    free(c->ids);
    free(c->ptrs);
    free(c->raw_kv);
    free(c->h_last);
    free(c);
}

int kr_cache_length(const kr_cache *c) {
    return c->len;
}
int kr_cache_capacity(const kr_cache *c) {
    return c->capacity;
}
size_t kr_cache_bytes(const kr_cache *c) {
    return (size_t)c->n_blocks * c->pool->block_floats * sizeof(float);
}

int kr_cache_reserve(kr_cache *c, int T, kr_error *err) {
    kr_pool *p = c->pool;
    if (c->len + T > c->capacity)
        return kr_fail_code(err, KR_E_CAPACITY,
                            "cache: %d positions + %d new exceed its capacity of %d", c->len, T,
                            c->capacity);
    int need = (c->len + T + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN - c->n_blocks;
    /* a shared, partly filled last block is copied before this cache writes into it */
    int part = c->len / KR_BLOCK_LEN; /* the block that position len falls in */
    int cow = c->len % KR_BLOCK_LEN != 0 && T > 0 && pool_shared(p, c->ids[part]);
    int n = (need > 0 ? need : 0) + cow;
    if (n == 0) return 0;
    int small[64], *ids = n <= 64 ? small : malloc((size_t)n * sizeof *ids);
    if (!ids)
        return kr_fail_code(err, KR_E_NO_MEMORY, "cache: out of memory reserving %d blocks", n);
    if (pool_take(p, n, ids)) {
        if (ids != small) free(ids);
        return kr_fail_code(err, KR_E_POOL_EXHAUSTED,
                            "cache: the KV pool is exhausted (%d more blocks of %zu bytes needed)",
                            n, p->block_floats * sizeof(float));
    }
    int k = 0;
    if (cow) {
        int old = c->ids[part];
        memcpy(kr_pool_block(p, ids[0]), kr_pool_block(p, old), p->block_floats * sizeof(float));
        c->ids[part] = ids[0];
        c->ptrs[part] = kr_pool_block(p, ids[0]);
        pool_release(p, &old, 1);
        k = 1;
    }
    for (; k < n; k++) {
        c->ids[c->n_blocks] = ids[k];
        c->ptrs[c->n_blocks] = kr_pool_block(p, ids[k]);
        c->n_blocks++;
    }
    if (ids != small) free(ids);
    return 0;
}

void kr_cache_trim(kr_cache *c) {
    int keep = (c->len + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN;
    if (c->n_blocks > keep) {
        pool_release(c->pool, c->ids + keep, c->n_blocks - keep);
        c->n_blocks = keep;
    }
}
