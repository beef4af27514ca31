/* matmul_q8.h — int8 weights (weights = int8): packing, the activations' quantisation and the
 * register-blocked tiles of the product. Internal to core/. matmul.c schedules the tasks and
 * writes the results; matmul_q8.c owns the arithmetic. */
#ifndef KR_MATMUL_Q8_H
#define KR_MATMUL_Q8_H

#include "layers.h"
#include "tile_out.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KR_Q8_BLOCK 32 /* weights and activations share one scale per 32 along the input */
#define KR_Q8_PANEL 16 /* output columns per packed panel */
/* Layers with a longer input stay float32: a task quantises its rows on its own stack. */
#define KR_Q8_MAX_IN      16384
#define KR_Q8_TILE_ROWS   16 /* rows per task of a product of many rows */
#define KR_Q8_TILE_PANELS 8  /* panels per kr_q8_tile call */

/* Blocks along an input of n: the last one zero-padded. */
static inline int kr_q8_blocks(int in) {
    return (in + KR_Q8_BLOCK - 1) / KR_Q8_BLOCK;
}

/* Scales of a packed [out][in] weight (one per column and block, columns padded to whole
 * panels); its int8 part holds KR_Q8_BLOCK bytes per scale. */
size_t kr_q8_scales(int out, int in);

/* w[out][in] quantised: per column and block of 32 inputs, q = round(w / d) (half away from
 * zero), d = the block's |w| max / 127. Packed for vpdpbusd: [panel][block][quad of 4 inputs]
 * [16 columns][4 bytes], each byte q + 128 (q ^ 0x80: unsigned), pad columns and inputs q = 0;
 * ws [panel][block][16]. wq holds kr_q8_scales(out, in) * 32 bytes, ws kr_q8_scales floats. */
void kr_q8_pack(int8_t *wq, float *ws, const float *w, int out, int in);

/* The packed layer's quantised weight of column o at input k, and column o's scale of block b */
int kr_q8_weight(const kr_linear *l, int o, int k);
float kr_q8_scale(const kr_linear *l, int o, int b);

/* One block of n <= 32 values quantised like the weights: q[32] (zero past n), returns d. */
float kr_q8_quantise(int8_t *q, const float *x, int n);

/* The 4 bytes of a row's block from p as one int32: what a vpdpbusd lane multiplies */
static inline int32_t kr_q8_quad(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
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

/* x's n rows of in values into xq (its nb = kr_q8_blocks(in)). The bits do not depend on simd. */
void kr_q8_quantise_rows(const kr_q8_rows *xq, const float *x, int n, int in, kr_simd simd);

/* Into t (row i, column c; plus the bias, stored or added: tile_out.h): rows i < rn, columns
 * c < 16 cb (those below t->m), cb <= KR_Q8_TILE_PANELS, row r + i of xq times column
 * 16 p + c of l: per block b in order,
 * acc = fma(dx_b * dw_b, (float)isum_b, acc), isum_b the block's exact integer dot product.
 * simd picks the integer kernel (kr_q8_run_at); the bits do not depend on it, nor on r, rn,
 * p or cb. */
void kr_q8_tile(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                const kr_linear *l, kr_simd simd);

/* The integer product a level's tiles run (kr_q8_product_name names it): AMX-INT8 tiles at
 * amx (groups of 8 rows or more; fewer take vpdpbusd), vpdpbusd at avx512 where the CPU has
 * AVX512-VNNI, at avx2 (and avx512 without VNNI) vpdpbusd on 8 lanes where it has AVX-VNNI,
 * else vpmaddubsw + vpmaddwd; C at generic. The one rule kr_q8_tile follows. */
typedef enum {
    KR_Q8_RUN_AMX,
    KR_Q8_RUN_VNNI512,
    KR_Q8_RUN_VNNI256,
    KR_Q8_RUN_MADDUBS,
    KR_Q8_RUN_C
} kr_q8_run;
kr_q8_run kr_q8_run_at(kr_simd level);

/* The avx2 level's two products (matmul_q8_avx2.c): vpdpbusd on 8 lanes where the CPU has
 * AVX-VNNI, unless the environment variable KRONOS_Q8_PRODUCT=vpmaddubsw asks for the other
 * (to measure one against the other); chosen once. */
typedef enum { KR_Q8_AVX_VNNI, KR_Q8_MADDUBS } kr_q8_avx2_product;
int kr_q8_has_avx_vnni(void);
kr_q8_avx2_product kr_q8_avx2_product_get(void);
/* Switches the avx2 level's product to p (tests run both); -1 when the CPU cannot run it. Not
 * for use while products run. */
int kr_q8_avx2_product_set(kr_q8_avx2_product p);
/* kr_q8_tile at the avx2 level, with the chosen product */
void kr_q8_tile_avx2(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                     const kr_linear *l);

/* Whether the CPU has AVX512-VNNI, AMX-TILE and AMX-INT8 and the OS grants the tiles' state
 * (Linux asks once, for the whole process); 0 on other systems. The amx level's condition. */
int kr_q8_amx_ready(void);

#endif
