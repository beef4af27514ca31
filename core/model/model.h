/* model.h — the loaded weights, shared read-only by every thread. Internal to core/. */
#ifndef KR_MODEL_H
#define KR_MODEL_H

#include "base.h"
#include "layers.h"

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
    kr_linear dep_kv; /* dep_k and dep_v stacked (k's columns then v's): one product; after
                       * packing the only form of the two */
    const float *dep_norm;
    kr_linear proj_s1, proj_s2;
    /* dep_kv's columns then proj_s1's, one matrix (dep_kv and proj_s1 are views of it): a
     * decode step, whose every row is the last of its cache, takes the dependency layer's
     * keys and values and the s1 logits in one product. wp NULL when the two could not
     * share it (dep_kv's columns not whole panels): then they run apart. */
    kr_linear dep_kv_s1;
    /* [2^s1_bits][d]: dep_q of every s1 embedding row, the s2 head's query for each s1
     * token, computed at load by the same product (a row's bits depend on that row alone:
     * the very numbers a step would compute, without streaming dep_q's weights each step) */
    const float *dep_q_table;
} kr_predictor_weights;

struct kr_model {
    kr_tokenizer_config tc;
    kr_predictor_config pc;
    int max_context;
    kr_precision weights; /* the linear layers' packed weights: float32, BF16 or int8 */
    kr_precision kv;      /* the predictor's keys and values, cached or not: float32 or BF16 */
    unsigned keep_f32;    /* kr_model_paths.keep_f32: the layer kinds packed float32 anyway */
    size_t n_params;
    kr_tokenizer_weights tok;
    kr_predictor_weights pred;
    /* tok is another model's (kr_model_load_sharing): its weights are that model's to free */
    bool tok_shared;
    size_t n_tok_params; /* of n_params, the tokenizer's */
    float **allocs;      /* every weight buffer, freed with the model */
    int n_allocs, cap_allocs;
};

#endif
