/* predictor.h — pieces of the predictor forward pass shared by the reference path and
 * the cached decoder. Internal to core/. */
#ifndef KR_PREDICTOR_H
#define KR_PREDICTOR_H

#include "model.h"
#include "nn.h"

/* out[n][d] = fusion_proj([emb_s1[s1]·√d, emb_s2[s2]·√d]) + the five time embeddings. */
void kr_predictor_embed(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *out, float *pair_scratch);
/* Checks that tokens and stamps are in range. */
int kr_predictor_check_inputs(const kr_model *m, const int32_t *s1, const int32_t *s2,
                              const kr_stamp *stamps, int n, kr_error *err);
/* s2 logits for s1 given the last context row h_last[d] and the dependency layer's keys and
 * values over the n window positions (at `layer` of kv). scratch: 3d + 4n floats. */
void kr_predictor_s2(const kr_model *m, const float *h_last, const kr_kv_view *kv, int layer, int n,
                     int32_t s1, float *s2_logits, float *scratch);

#endif
