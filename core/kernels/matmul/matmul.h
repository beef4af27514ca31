/* matmul.h — the linear layers' products on row-independent kernels. Internal to core/. */
#ifndef KR_MATMUL_H
#define KR_MATMUL_H

#include "layers.h"

/* y[T][out] = x[T][in] W^T + b. Each element is one fused multiply-add chain over in, in
 * order, plus the bias: its bits depend on its own row alone (not on T, the thread count
 * or the SIMD level). */
void kr_linear_forward(float *y, const float *x, int T, const kr_linear *l);
/* y[T][out] += x[T][in] W^T + b: each element of the product (as kr_linear_forward rounds
 * it) added to y's, in the product's own tasks (a residual connection, without a pass of
 * its own over y or the product stored first). */
void kr_linear_forward_add(float *y, const float *x, int T, const kr_linear *l);
/* The same product, its out columns cut into n equal blocks, block i written to ys[i] as
 * [T][out / n] (a stacked q|k|v or w1|w3 layer straight into its parts). -1, writing
 * nothing, unless out / n is a whole number of 16-column panels. */
int kr_linear_forward_parts(float *const *ys, int n, const float *x, int T, const kr_linear *l);

/* Called by the task that wrote them, once they are all written: rows [r0, r1) and columns
 * [c0, c1) of every part (the same columns of each), while they are still in its cache. Runs
 * on any of the pool's threads, for disjoint blocks: a row-wise step on those columns alone
 * (SwiGLU's silu(h1) * h3) instead of a pass of its own over the rows. */
typedef void (*kr_linear_epilogue)(void *ctx, int r0, int r1, int c0, int c1);
/* kr_linear_forward_parts, then epi over all it wrote, block by block (epi NULL: none).
 * One part (n = 1) takes any width. */
int kr_linear_forward_then(float *const *ys, int n, const float *x, int T, const kr_linear *l,
                           kr_linear_epilogue epi, void *ctx);

/* The packed form the kernels read: panels of 16 output columns, [panel][in][16], the last
 * panel zero-padded. */
size_t kr_linear_packed_floats(int out, int in);
void kr_linear_pack(float *dst, const float *w, int out, int in);
/* (BF16 weights, the layer's wh: matmul_bf16.h; int8: matmul_q8.h) */

/* Switches the kernels to level s (tests compare every level the CPU has); -1 when the CPU
 * lacks it. Not for use while products run. */
int kr_simd_set(kr_simd s);

#endif
