/* model.h — the loaded weights, shared read-only by every thread. Internal to core/. */
#ifndef KR_MODEL_H
#define KR_MODEL_H

#include "kronos.h"

typedef struct {
    const float *w; /* [out][in], as torch stores it; NULL once packed at load */
    const float *b; /* [out] or NULL */
    int out, in;
    const float *wp; /* the same weights packed for the kernels (matmul.h), or NULL */
} kr_linear;

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

enum { KR_TIME_MINUTE, KR_TIME_HOUR, KR_TIME_WEEKDAY, KR_TIME_DAY, KR_TIME_MONTH, KR_N_TIME };

#define KR_DEP_HEADS 4 /* the dependency-aware layer has 4 heads whatever n_heads is */

typedef struct {
    kr_linear embed;
    kr_block *enc;
    int n_enc;
    kr_linear quant_embed, post_quant_embed;
    kr_block *dec;
    int n_dec;
    kr_linear head;
} kr_tokenizer_weights;

typedef struct {
    const float *emb_s1, *emb_s2; /* [2^bits][d] */
    kr_linear fusion;             /* 2d -> d */
    const float *time[KR_N_TIME]; /* [size][d] */
    kr_block *blocks;
    int n_layers;
    const float *norm;
    kr_linear dep_q, dep_k, dep_v, dep_o;
    const float *dep_norm;
    kr_linear proj_s1, proj_s2;
} kr_predictor_weights;

/* Memory for weights and KV blocks: large buffers are 2 MiB-aligned and marked for
 * transparent huge pages, which saves page faults and TLB misses on every pass over them.
 * Free with free(). */
void *kr_alloc_large(size_t bytes);

/* The caller's cancel check (kr_cancel): 0 to go on, else -1 with KR_E_DEADLINE or
 * KR_E_CANCELLED and a message naming `what` ("forecast"). */
int kr_check_cancel(const kr_cancel *c, const char *what, kr_error *err);

struct kr_model {
    kr_tokenizer_config tc;
    kr_predictor_config pc;
    int max_context;
    size_t n_params;
    kr_tokenizer_weights tok;
    kr_predictor_weights pred;
    float **allocs; /* every weight buffer, freed with the model */
    int n_allocs, cap_allocs;
};

#endif
