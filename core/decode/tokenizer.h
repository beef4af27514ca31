/* tokenizer.h — the tokenizer's batched decode for sample paths. Internal to core/. */
#ifndef KR_TOKENIZER_H
#define KR_TOKENIZER_H

#include "model.h"
#include "nn.h"

/* Decodes S windows that share their first np tokens (pre_s1, pre_s2) and end with P tokens
 * of their own (s1, s2: [S][P]); out: [S][P][d_in], the rows of those last P positions. */
int kr_tokenizer_decode_paths(const kr_model *m, const int32_t *pre_s1, const int32_t *pre_s2,
                              int np, const int32_t *s1, const int32_t *s2, int S, int P,
                              float *out, kr_error *err);

/* Encodes n new normalised candles x[n][d_in] at positions pos0.. of a series whose
 * encoder keys and values live in kv (layer l: encoder block l; positions < pos0 already
 * there; room for pos0 + n): the tokens encoding the whole series would give them. */
int kr_tokenizer_encode_rows(const kr_model *m, const float *x, int n, const kr_kv_view *kv,
                             int pos0, int32_t *s1, int32_t *s2, kr_error *err);

/* Runs n token pairs at positions pos0.. through the decoder, writing only their keys and
 * values into kv (layer l: decoder block l): a decoder cache that grows with a series. */
int kr_tokenizer_decoder_extend(const kr_model *m, const kr_kv_view *kv, int pos0,
                                const int32_t *s1, const int32_t *s2, int n, kr_error *err);
/* kr_tokenizer_decode_paths with the shared prefix's np positions already in pre (as
 * kr_tokenizer_decoder_extend left them): the same rows, without running the prefix. */
int kr_tokenizer_decode_paths_kv(const kr_model *m, const kr_kv_view *pre, int np,
                                 const int32_t *s1, const int32_t *s2, int S, int P, float *out,
                                 kr_error *err);

#endif
