/* train_passes.h — the step's passes: the activations a backward pass reads, the forward,
 * the loss, the siblings' draw and the backward. Internal to core/train/. */
#ifndef KR_TRAIN_PASSES_H
#define KR_TRAIN_PASSES_H

#include "train_ops.h"

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
