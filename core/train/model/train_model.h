/* train_model.h — the trainable predictor's tensors (weights, gradients, AdamW's moments)
 * and the model that holds them with its products' scratch. Internal to core/train/. */
#ifndef KR_TRAIN_MODEL_H
#define KR_TRAIN_MODEL_H

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

#define TW(m, i) ((m)->t[i].w)
#define TG(m, i) ((m)->t[i].g)

#endif
