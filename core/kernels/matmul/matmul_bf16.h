/* matmul_bf16.h — BF16 weights (weights = bf16): packing, the activations' rounding and the
 * register-blocked tiles of the product as BF16 dot products. Internal to core/. matmul.c
 * schedules the tasks and writes the results; matmul_bf16.c owns the arithmetic. */
#ifndef KR_MATMUL_BF16_H
#define KR_MATMUL_BF16_H

#include "layers.h"
#include "matmul_bf16_product.h"
#include "tile_out.h"

#include <stddef.h>
#include <stdint.h>

#define KR_BF16_PANEL       16 /* output columns per packed panel */
#define KR_BF16_TILE_ROWS   24 /* rows per task of a product of many rows */
#define KR_BF16_TILE_PANELS 8  /* panels per kr_bf16_tile call */
/* Layers with a longer input stay float32: a task rounds its rows on its own stack. */
#define KR_BF16_MAX_IN 32768

/* Pairs of inputs (k, k + 1) along an input of n: an odd n padded with a zero. */
static inline int kr_bf16_pairs(int in) {
    return (in + 1) / 2;
}

/* BF16 values of a packed [out][in] weight (columns padded to whole panels, in to pairs). */
size_t kr_bf16_packed(int out, int in);

/* f rounded to the nearest BF16, ties to even, a denormal result flushed to zero (keeping
 * its sign): the BF16 numbers vdpbf16ps reads as they are (it flushes denormal inputs). */
uint16_t kr_bf16_round_daz(float f);

/* w[out][in] rounded by kr_bf16_round_daz and packed for vdpbf16ps: [panel][pair][16 columns]
 * [2], the pair's even input in the low half; pad columns and the pad input zero.
 * kr_bf16_packed(out, in) values. */
void kr_bf16_pack(uint16_t *dst, const float *w, int out, int in);

/* The packed layer's BF16 weight of column o at input k */
uint16_t kr_bf16_weight(const kr_linear *l, int o, int k);

/* x's n rows of in values rounded by kr_bf16_round_daz into xb [row][pair] (32 bits a pair,
 * the even input in the low half, an odd in's pad zero). simd picks the vector width; the
 * bits do not depend on it. */
void kr_bf16_rows(uint32_t *xb, const float *x, int n, int in, kr_simd simd);

/* Into t (row i, column c; plus the bias, stored or added: tile_out.h): rows i < rn of xb,
 * columns c < 16 cb (those below t->m), cb <= KR_BF16_TILE_PANELS, from column 16 p of l,
 * the row times the column:
 * from acc = 0, per pair j in order, acc = add(acc, x[2j+1] w[2j+1]), then
 * acc = add(acc, x[2j] w[2j]), add rounding to nearest even, or giving a zero of the exact
 * sum's sign when that sum rounded to 24 bits (exponent unbounded) is below FLT_MIN in
 * magnitude: what AVX512-BF16's vdpbf16ps computes. simd and the chosen product pick the
 * kernel (kr_bf16_run_at); the bits depend on none of simd, the product, rn, p, cb, few.
 * few: fetch the panels read next into L2 ahead (the caller decides when: matmul.c). */
void kr_bf16_tile(const kr_tile_out *t, const uint32_t *xb, int in, int rn, int p, int cb,
                  const kr_linear *l, kr_simd simd, int few);

#endif
