/* matmul_bf16_product.h — which product weights = bf16's tiles run, and the flush-to-zero
 * window the FMA product computes in. Internal to core/. */
#ifndef KR_MATMUL_BF16_PRODUCT_H
#define KR_MATMUL_BF16_PRODUCT_H

#include "kronos.h"

/* Whether the CPU has vdpbf16ps */
int kr_bf16_has_dot(void);

#define KR_BF16_FTZ_DAZ 0x8040 /* MXCSR's flush-to-zero and denormals-are-zero */

/* GCC orders _mm_setcsr against memory and other volatile operations, not against arithmetic
 * in registers: an empty volatile asm claiming to change an accumulator, after the flush mode
 * is set, before it is restored and after, keeps every FMA of a chain inside that window
 * and the bias's IEEE add outside it. */
#define KR_PIN(v) __asm__ volatile("" : "+v"(v))

/* The product: vdpbf16ps (the avx512 and amx levels), or two FMAs a pair of the widened BF16
 * values with MXCSR's FTZ and DAZ set (x86's flush of a result tiny after rounding is the
 * contract's, checked on the CPU before it is used; 16 lanes at avx512, 8 at avx2), or the
 * FMAs with each sum near FLT_MIN checked (8 lanes, what runs where the check fails). The
 * avx2 level runs the FTZ FMAs for either of the first two. */
typedef enum { KR_BF16_DOT, KR_BF16_FMA, KR_BF16_AVX2 } kr_bf16_product;

/* The product chosen once: KRONOS_BF16_PRODUCT ("vdpbf16ps" or "fma", where the CPU runs it),
 * else, where the CPU runs both, vdpbf16ps unless a probe finds the FMAs do more than 5/4 of
 * its multiply-adds a second, else the one it runs, else the AVX2 level's (kr_bf16_pack
 * decides it, at load). */
kr_bf16_product kr_bf16_product_get(void);

/* Whether FMAs under FTZ|DAZ (AVX2 and FMA) give the contract's bits on this CPU (checked once on
 * the boundary sums and lanes of every kind; the FMA product runs only where they do) */
int kr_bf16_fma_ftz_exact(void);

/* The kernel a level runs for the chosen product: vdpbf16ps or the FTZ FMAs on 16 lanes at
 * avx512 and amx; below (or for KR_BF16_AVX2) the FTZ FMAs on 8 lanes where
 * kr_bf16_fma_ftz_exact, else the FMAs with each sum checked; C at generic. The one rule the
 * tiles and kr_bf16_product_name follow. */
typedef enum {
    KR_BF16_RUN_DOT,
    KR_BF16_RUN_FMA512,
    KR_BF16_RUN_FMA256,
    KR_BF16_RUN_CHECKED,
    KR_BF16_RUN_C
} kr_bf16_run;
kr_bf16_run kr_bf16_run_at(kr_simd level);

/* Switches the product to p (tests run both); -1 when the CPU cannot run it (vdpbf16ps without
 * AVX512-BF16, the FTZ FMAs without kr_bf16_fma_ftz_exact). Not for use while products run.
 */
int kr_bf16_product_set(kr_bf16_product p);

#endif
