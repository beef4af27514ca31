/* train_ops.h — the operations both passes of the training step run on: products (each
 * element one fixed-order chain on core/kernels), RMSNorm, SwiGLU, RoPE, attention, dropout.
 * Internal to core/train/. */
#ifndef KR_TRAIN_OPS_H
#define KR_TRAIN_OPS_H

#include "train_model.h"

/* buf holding at least n floats (grown, contents lost), or NULL when out of memory */
float *tr_grow(float **buf, size_t *cap, size_t n);

/* ---- products (train_gemm.c), each element one fixed-order chain on core/kernels ---- */

/* y[R][out] = x[R][in] W^T + b */
int tr_linear_fwd(float *y, const float *x, int R, kr_train_model *m, const tr_linear *l);
/* dx[R][in] (+)= dy[R][out] W; add: accumulate into dx */
int tr_linear_dx(float *dx, const float *dy, int R, kr_train_model *m, const tr_linear *l,
                 bool add);
/* dW += dy^T x, db += the column sums of dy, when the layer trains */
int tr_linear_dw(const float *dy, const float *x, int R, kr_train_model *m, const tr_linear *l);
/* Forgets the kept x^T (tr_linear_dw): before activations are written again. */
void tr_linear_dw_forget(kr_train_model *m);

/* ---- row-wise parts (train_nn.c) and attention (train_attn.c) ---- */

/* y = x / sqrt(mean(x^2) + 1e-5) * w; inv[r] keeps 1 / sqrt(...) */
void tr_rmsnorm_fwd(float *y, float *inv, const float *x, const float *w, int R, int d);
/* dx (+)= the norm's input gradient; dw += its weight gradient (dw NULL: frozen) */
void tr_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *inv,
                    const float *w, int R, int d, bool add);
/* gg = silu(h1) * h3 over n elements; backward: d1 holds gg's gradient on entry, then h1's,
 * and d3 gets h3's */
void tr_swiglu_fwd(float *gg, const float *h1, const float *h3, size_t n);
void tr_swiglu_bwd(float *d1, float *d3, const float *h1, const float *h3, size_t n);
/* RoPE at positions 0..T-1 of each of B windows, heads of hd from column 0; inverse: the
 * transpose (a gradient back through the rotation) */
int tr_rope(float *x, int B, int T, int d, int hd, const float *inv_freq, bool inverse);
/* causal attention of each window's rows: P[B][H][T][T] the softmax, out[R][d] */
typedef struct {
    int B, T, d, H;
    float p_drop;
    uint64_t key; /* the dropout masks' stream */
} tr_attn_shape;
int tr_attn_fwd(float *out, float *P, const float *q, const float *k, const float *v,
                const tr_attn_shape *s);
int tr_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *P, const float *q,
                const float *k, const float *v, const tr_attn_shape *s);

/* The dropout mask's factor (0 or 1 / (1 - p)) of element i of stream key. */
float tr_drop(uint64_t key, uint64_t i, float p);
uint64_t tr_mix(uint64_t a, uint64_t b);
/* x[i] *= the mask of stream key, for n elements (p 0: nothing) */
void tr_drop_apply(float *x, size_t n, uint64_t key, float p);

#endif
