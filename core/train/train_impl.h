/* train_impl.h — the trainable predictor's tensors, the activations a backward pass reads,
 * and the products both passes run on. Internal to core/train/. */
#ifndef KR_TRAIN_IMPL_H
#define KR_TRAIN_IMPL_H

#include "base.h"
#include "kronos_train.h"

#define ST_DIMS 8 /* safetensors.h's ST_MAX_DIMS */

#include <stdbool.h>

typedef struct {
    char *name;
    int64_t shape[ST_DIMS]; /* a vector has shape[1] = 1 */
    int ndim;
    /* a tensor that is not float (an integer buffer): its bytes, carried to a checkpoint
     * unchanged; w is then NULL */
    unsigned char *raw;
    size_t raw_bytes;
    char dtype[16];
    size_t n;
    float *w, *g, *m, *v; /* g, m, v: NULL for a tensor that never trains */
    bool param;           /* a parameter (not a buffer, not a fixed table) */
    bool trains;          /* a parameter the depth leaves trainable: it gets a gradient */
} tr_tensor;

/* Tensor indices of one linear layer (bias -1 when it has none). */
typedef struct {
    int w, b, out, in;
} tr_linear;

typedef struct {
    int norm1, norm2, inv_freq;
    tr_linear q, k, v, o, w1, w2, w3;
} tr_block;

struct kr_train_model {
    kr_predictor_config pc;
    void *config; /* config.json as read (json_t), written back with a checkpoint */
    float p_token, p_attn, p_resid, p_ffn; /* dropout probabilities from config.json */
    tr_tensor *t;
    int n;
    int emb_s1, emb_s2, time[5], norm, dep_norm, dep_inv_freq;
    tr_linear fusion, dep_q, dep_k, dep_v, dep_o, proj_s1, proj_s2;
    tr_block *blocks;
    int depth, steps;
    /* the products' scratch, kept between calls (grow-only: no pages faulted in again each
     * product): packed weights, and a transposed operand */
    float *pack, *trans;
    size_t pack_cap, trans_cap;
    /* the packed x^T of the last weight gradient, reused by the next one on the same x (q, k
     * and v share theirs, w1 and w3 theirs); xpack_of NULL: none kept */
    float *xpack;
    size_t xpack_cap;
    const float *xpack_of;
    int xpack_rows, xpack_cols;
    float *act_mem, *grad_mem; /* a step's activations and gradients, kept the same way */
    size_t act_cap, grad_cap;
};

/* buf holding at least n floats (grown, contents lost), or NULL when out of memory */
float *tr_grow(float **buf, size_t *cap, size_t n);

#define TW(m, i) ((m)->t[i].w)
#define TG(m, i) ((m)->t[i].g)

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

/* ---- the step's passes (train_forward.c, train_backward.c, train_loss.c) ---- */

typedef struct {
    float *x, *xn1, *inv1, *q, *k, *v, *P, *ao, *xm, *xn2, *inv2, *h1, *h3, *gg;
} tr_block_act;

typedef struct {
    int B, T, R;
    const int32_t *in_s1, *in_s2; /* [R] the fed tokens */
    const kr_stamp *stamps;       /* [R] */
    int32_t *sib;                 /* [R] the s1 ids the s2 head is conditioned on */
    float *pair;                  /* [R][2d] the scaled embedding pairs */
    tr_block_act *blk;
    float *xf, *h, *invf;            /* the last block's output, its norm, the inverse rms */
    float *sibe, *qd, *kd, *vd, *Pd; /* the dependency layer's query (embedding, projected) */
    float *ad, *u, *invd, *g2;       /* its attention, residual sum, norm */
    float *logit1, *logit2;          /* [R][V]: logits, then their gradients */
    float *tmp;                      /* [R][max(2d, ff)] scratch */
    uint64_t key;                    /* the step's dropout stream */
    float *mem;                      /* all of the above, one buffer */
    int32_t *ids;                    /* sib's storage */
} tr_acts;

/* The dropout streams of a step: one per site and layer. */
enum { TR_DROP_TOKEN, TR_DROP_ATTN, TR_DROP_RESID, TR_DROP_FFN };
#define TR_KEY(a, site, layer) tr_mix((a)->key, (uint64_t)(site)*4096 + (uint64_t)(layer))

int tr_acts_alloc(tr_acts *a, kr_train_model *m, int B, int T, kr_error *err);
void tr_acts_free(tr_acts *a, const kr_train_model *m);
/* Everything up to the s1 logits, keeping what the backward reads. */
int tr_forward_trunk(kr_train_model *m, tr_acts *a, kr_error *err);
/* The s2 head on the siblings in a->sib. */
int tr_forward_s2(kr_train_model *m, tr_acts *a, kr_error *err);
/* The losses, and the logits replaced by the loss's gradient with respect to them. */
void tr_loss(const kr_train_model *m, tr_acts *a, const int32_t *t1, const int32_t *t2,
             kr_train_losses *out);
/* Draws each row's s1 id from the softmax of its s1 logits. */
void tr_draw_siblings(const kr_train_model *m, tr_acts *a, uint64_t seed);
int tr_backward(kr_train_model *m, tr_acts *a, kr_error *err);
/* The dependency layer's RoPE frequencies [d/8]: the checkpoint's buffer, else upstream's. */
int tr_dep_inv_freq(const kr_train_model *m, float *out);

#endif
