/* matmul_q8.h — int8 weights (weights = int8): packing, the activations' quantisation and the
 * register-blocked tiles of the product. Internal to core/. matmul.c schedules the tasks and
 * writes the results; matmul_q8.c owns the arithmetic. */
#ifndef KR_MATMUL_Q8_H
#define KR_MATMUL_Q8_H

#include "layers.h"
#include "matmul_q8_avx2.h"
#include "q8_block.h"
#include "tile_out.h"

#include <stddef.h>
#include <stdint.h>

/* Layers with a longer input stay float32: a task quantises its rows on its own stack. */
#define KR_Q8_MAX_IN      16384
#define KR_Q8_TILE_ROWS   16 /* rows per task of a product of many rows */
#define KR_Q8_TILE_PANELS 8  /* panels per kr_q8_tile call */

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

/* Whether the CPU has AVX512-VNNI, AMX-TILE and AMX-INT8 and the OS grants the tiles' state
 * (Linux asks once, for the whole process); 0 on other systems. The amx level's condition. */
int kr_q8_amx_ready(void);

#endif
