/* q8_block.h — the int8 block format weights = int8's kernels share: the block and panel
 * sizes, a product's quantised rows, and a row's 4 bytes as one vpdpbusd lane. Internal to
 * core/kernels/matmul (matmul_q8.h and the avx2 level's kernels, matmul_q8_avx2.c). */
#ifndef KR_Q8_BLOCK_H
#define KR_Q8_BLOCK_H

#include <stdint.h>
#include <string.h>

#define KR_Q8_BLOCK 32 /* weights and activations share one scale per 32 along the input */
#define KR_Q8_PANEL 16 /* output columns per packed panel */

/* Blocks along an input of n: the last one zero-padded. */
static inline int kr_q8_blocks(int in) {
    return (in + KR_Q8_BLOCK - 1) / KR_Q8_BLOCK;
}

/* Rows of activations quantised block by block: q [row][block][32], d [row][block] the
 * scales, neg [row][block] = -128 * the block's sum of q (what the unsigned weights add). */
typedef struct {
    int8_t *q;
    float *d;
    int32_t *neg;
    int nb;
    int prefetch; /* the whole product's rows are few (the caller's rule): tiles fetch the
                   * next panels */
} kr_q8_rows;

/* The 4 bytes of a row's block from p as one int32: what a vpdpbusd lane multiplies */
static inline int32_t kr_q8_quad(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#endif
