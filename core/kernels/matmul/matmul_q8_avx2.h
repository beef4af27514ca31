/* matmul_q8_avx2.h — weights = int8's tiles at the avx2 level (matmul_q8_avx2.c): its two
 * integer products and the choice between them. Internal to core/kernels/matmul; matmul_q8.c
 * dispatches to it. */
#ifndef KR_MATMUL_Q8_AVX2_H
#define KR_MATMUL_Q8_AVX2_H

#include "layers.h"
#include "q8_block.h"
#include "tile_out.h"

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

#endif
