/* attention.h — causal multi-head attention over KV views (attention.c says in which
 * order every path computes it). Internal to core/. */
#ifndef KR_ATTENTION_H
#define KR_ATTENTION_H

#include "kv_view.h"

/* Attention of one query row (all heads) over keys 0..n_keys-1 of `layer` in kv.
 * scores: scratch of n_heads * n_keys floats. attention.c says how every path
 * computes it, so that a row's result never depends on the path. */
void kr_attend(float *out, const float *q, const kr_kv_view *kv, int layer, int n_keys, int n_heads,
               float *scores);

/* Many query rows at once, spread over the thread pool: row r attends over the first
 * rows[r].n_keys keys of rows[r].kv. scratch: kr_attend_scores_floats(max_keys, n_heads,
 * d) floats. */
typedef struct {
    const kr_kv_view *kv;
    int n_keys;
} kr_attn_row;

size_t kr_attend_scores_floats(int max_keys, int n_heads, int d);
void kr_attend_rows(float *out, const float *q, const kr_attn_row *rows, int n_rows, int d,
                    int layer, int n_heads, float *scratch, int max_keys);

#endif
