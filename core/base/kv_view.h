/* kv_view.h — where a sequence's keys and values live, as the attention kernels read them
 * and the caches (decode/pool.c, forecast/series.c) lay them out. */
#ifndef KR_KV_VIEW_H
#define KR_KV_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bf16.h"

/* Where one sequence's keys and values live: blocks of block_len positions, each block
 * holding, per layer, the keys transposed ([d][block_len]: element i of key j at
 * i * block_len + j, so one head's scores over a block's keys are vector operations) and
 * then the values ([block_len][d]). The plain reference path uses a single block as long as
 * the sequence. With bf16 the same layout holds BF16 elements (the blocks' memory read as
 * uint16_t: kr_kv_kcol_h, kr_kv_v_h), each rounded from float32 to the nearest, ties to
 * even, when written; attention widens them back exactly. */
typedef struct {
    float *const *blocks;
    int block_len;
    int d;
    int bf16; /* 1: the elements are BF16 (a model loaded with kv bf16) */
} kr_kv_view;

/* Element 0 of key `pos`; element i is at [i * block_len]. */
static inline float *kr_kv_kcol(const kr_kv_view *v, int layer, int pos) {
    return v->blocks[pos / v->block_len] + (size_t)layer * 2 * v->block_len * v->d +
           pos % v->block_len;
}
static inline float *kr_kv_v(const kr_kv_view *v, int layer, int pos) {
    return v->blocks[pos / v->block_len] + (size_t)(layer * 2 + 1) * v->block_len * v->d +
           (size_t)(pos % v->block_len) * v->d;
}
/* The same places in a BF16 view (elements, not floats, from each block's start) */
static inline uint16_t *kr_kv_kcol_h(const kr_kv_view *v, int layer, int pos) {
    return (uint16_t *)v->blocks[pos / v->block_len] + (size_t)layer * 2 * v->block_len * v->d +
           pos % v->block_len;
}
static inline uint16_t *kr_kv_v_h(const kr_kv_view *v, int layer, int pos) {
    return (uint16_t *)v->blocks[pos / v->block_len] +
           (size_t)(layer * 2 + 1) * v->block_len * v->d + (size_t)(pos % v->block_len) * v->d;
}

/* Writes key row k[d] at `pos`. */
static inline void kr_kv_put_k(const kr_kv_view *v, int layer, int pos, const float *k) {
    if (v->bf16) {
        uint16_t *col = kr_kv_kcol_h(v, layer, pos);
        for (int i = 0; i < v->d; i++)
            col[(size_t)i * v->block_len] = kr_bf16_round(k[i]);
        return;
    }
    float *col = kr_kv_kcol(v, layer, pos);
    for (int i = 0; i < v->d; i++)
        col[(size_t)i * v->block_len] = k[i];
}
/* Writes value row x[d] at `pos`. */
static inline void kr_kv_put_v(const kr_kv_view *v, int layer, int pos, const float *x) {
    if (v->bf16) {
        uint16_t *row = kr_kv_v_h(v, layer, pos);
        for (int i = 0; i < v->d; i++)
            row[i] = kr_bf16_round(x[i]);
        return;
    }
    memcpy(kr_kv_v(v, layer, pos), x, (size_t)v->d * sizeof(float));
}

#endif
