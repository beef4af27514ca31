/* layers.h — the layer types the kernels compute on: a linear layer (its weights as torch
 * stores them and packed for the kernels) and a transformer block. The loader (model/)
 * fills them; the kernels (kernels/) read them. */
#ifndef KR_LAYERS_H
#define KR_LAYERS_H

#include "base.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const float *w; /* [out][in], as torch stores it; NULL once packed at load */
    const float *b; /* [out] or NULL */
    int out, in;
    const float *wp;    /* the same weights packed for the kernels (matmul.h), or NULL */
    const uint16_t *wh; /* or packed as BF16 (a model loaded with weights bf16), or NULL */
    const int8_t *wq;   /* or as int8 blocks (weights int8, matmul_q8.h), or NULL; */
    const float *ws;    /* with their scales */
} kr_linear;

/* Whether the kernels read l's weights packed (float32, BF16 or int8) */
static inline bool kr_linear_is_packed(const kr_linear *l) {
    return l->wp || l->wh || l->wq;
}

typedef struct {
    int d, n_heads, hd, ff;
    const float *norm1, *norm2;
    kr_linear q, k, v, o;
    const float *inv_freq; /* [hd/2] */
    kr_linear w1, w2, w3;  /* no biases */
    /* q|k|v and w1|w3 stacked into one matrix each, when the loader made them: one product
     * instead of three (two) for small batches. q, k, v, w1, w3 then point into them. */
    kr_linear qkv, w13;
    const float *kv_shift; /* [4][n_heads] rows a0, a1, b0, b1, or NULL */
    const float *rope_cs;  /* [rope_len][hd/2][cos, sin]: RoPE at positions < rope_len */
    int rope_len;
} kr_block;

#endif
