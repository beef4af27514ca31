/* kv_view.h — where a sequence's keys and values live, as the attention kernels read them
 * and the caches (decode/pool.c, forecast/series.c) lay them out. */
#ifndef KR_KV_VIEW_H
#define KR_KV_VIEW_H

#include <stddef.h>

/* Where one sequence's keys and values live: blocks of block_len positions, each block
 * holding, per layer, the keys transposed ([d][block_len]: element i of key j at
 * i * block_len + j, so one head's scores over a block's keys are vector operations) and
 * then the values ([block_len][d]). The plain reference path uses a single block as long as
 * the sequence. */
typedef struct {
    float *const *blocks;
    int block_len;
    int d;
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
/* Writes key row k[d] at `pos`. */
static inline void kr_kv_put_k(const kr_kv_view *v, int layer, int pos, const float *k) {
    float *col = kr_kv_kcol(v, layer, pos);
    for (int i = 0; i < v->d; i++)
        col[(size_t)i * v->block_len] = k[i];
}

#endif
