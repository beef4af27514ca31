/* matmul_q8.h — int8 weights (weights = int8): packing and the per-row chains. Internal to
 * core/. matmul.c schedules the tasks and writes the results; this file owns the arithmetic. */
#ifndef KR_MATMUL_Q8_H
#define KR_MATMUL_Q8_H

#include "layers.h"

#define KR_Q8_BLOCK 32 /* weights and activations share one scale per 32 along the input */

/* Blocks along an input of n: the last one zero-padded. */
static inline int kr_q8_blocks(int in) {
    return (in + KR_Q8_BLOCK - 1) / KR_Q8_BLOCK;
}

/* w[out][in] quantised: wq [block][out][32] (round(w / d), d = the block's |w| max / 127),
 * ws [block][out] the scales d. wq holds kr_q8_blocks(in) * out * 32 bytes, ws
 * kr_q8_blocks(in) * out floats. */
void kr_q8_pack(int8_t *wq, float *ws, const float *w, int out, int in);

/* One block of n <= 32 values quantised like the weights: q[32] (zero past n), returns d. */
float kr_q8_quantise(int8_t *q, const float *x, int n);

/* acc[c - c0] = row x's product with columns [c0, c1) of l (wq), bias not added: per block b
 * in order, acc = fma(dx_b * dw_b, (float)isum_b, acc), isum_b the block's exact integer dot
 * product. simd picks the integer kernel (vpdpbusd, vpmaddubsw or C); the bits do not depend
 * on it. */
void kr_q8_row(float *acc, const float *x, int c0, int c1, const kr_linear *l, kr_simd simd);

#endif
