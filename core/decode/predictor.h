/* predictor.h — pieces of the predictor forward pass shared by the reference path and
 * the cached decoder. Internal to core/. */
#ifndef KR_PREDICTOR_H
#define KR_PREDICTOR_H

#include "model.h"
#include "nn.h"

/* out[n][d] = fusion_proj([emb_s1[s1]·√d, emb_s2[s2]·√d]) + the five time embeddings. */
void kr_predictor_embed(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *out, float *pair_scratch);
/* The dependency layer's keys k[R][d] and values v[R][d] of x[R][d], one product of the
 * stacked dep_kv; stacked: R * 2d floats of scratch, used only when d is not a whole number
 * of the kernels' 16-column panels. */
void kr_predictor_dep_kv(const kr_model *m, const float *x, int R, float *k, float *v,
                         float *stacked);
/* Checks that tokens and stamps are in range. */
int kr_predictor_check_inputs(const kr_model *m, const int32_t *s1, const int32_t *s2,
                              const kr_stamp *stamps, int n, kr_error *err);
/* s2 logits [S][2^s2_bits] for S windows at once: window i's chosen s1[i], its last
 * context row h_last[i], and the dependency layer's keys and values over its positions
 * (rows[i], at `layer` of its view). Shared by the reference and the cached decoder. */
int kr_predictor_s2_rows(const kr_model *m, const kr_attn_row *rows, int layer,
                         const float *const *h_last, const int32_t *s1, int S, float *s2_logits,
                         kr_error *err);

#endif
