/* nn.h — the building blocks of both transformers, over row-major [rows][d] arrays. */
#ifndef KR_NN_H
#define KR_NN_H

#include "matmul.h"
#include "model.h"

void kr_rmsnorm(float *out, const float *x, const float *w, int rows, int d);
/* Rotates each head of x[T][stride] (heads of size hd from column 0) at positions pos0.. */
void kr_rope(float *x, int T, int stride, int n_heads, int hd, int pos0, const float *inv_freq);
/* The cos/sin of kr_rope's angles for positions 0..len-1 of a block: cs[len][hd/2][2]. */
void kr_rope_table(float *cs, int len, int hd, const float *inv_freq);

/* Where one sequence's keys and values live: blocks of block_len positions, each block
 * holding, per layer, the keys transposed ([d][block_len]: element i of key j at
 * i * block_len + j, so one head's scores over a block's keys are vector operations) and
 * then the values ([block_len][d]). The plain reference path uses a single block as long as
 * the sequence. */
typedef struct {
    float *const *blocks;
    int block_len;
    int d;
} kr_kv_view;

/* Element 0 of key `pos`; element i is at [i * block_len]. */
static inline float *kr_kv_kcol(const kr_kv_view *v, int layer, int pos) {
    return v->blocks[pos / v->block_len] + (size_t)layer * 2 * v->block_len * v->d +
           pos % v->block_len;
}
static inline float *kr_kv_v(const kr_kv_view *v, int layer, int pos) {
    return v->blocks[pos / v->block_len] + (size_t)(layer * 2 + 1) * v->block_len * v->d +
           (size_t)(pos % v->block_len) * v->d;
}
/* Writes key row k[d] at `pos`. */
static inline void kr_kv_put_k(const kr_kv_view *v, int layer, int pos, const float *k) {
    float *col = kr_kv_kcol(v, layer, pos);
    for (int i = 0; i < v->d; i++)
        col[(size_t)i * v->block_len] = k[i];
}

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

/* One sequence of a batch: its cache, the position of its first new row, how many new rows
 * it has, and (for kv_shift) the unshifted k and v of each layer at pos0 - 1
 * ([n_layers][2][d]; replaced by those of its last new row). */
typedef struct {
    const kr_kv_view *kv;
    int pos0;
    float *raw_kv;
    int n_rows;
} kr_seq;

/* Scratch for one block forward of up to max_rows rows over up to max_keys keys. */
typedef struct {
    int max_rows, max_keys, d, ff;
    float *xn, *q, *k, *v, *attn, *h1, *h3, *stacked, *scores, *krow;
    kr_attn_row *rows;
} kr_block_scratch;

int kr_block_scratch_init(kr_block_scratch *s, int max_rows, int max_keys, int d, int ff,
                          int n_heads, kr_error *err);
void kr_block_scratch_free(kr_block_scratch *s);

/* Transformer block `layer` on x[R][d] in place: S sequences of seqs[i].n_rows new rows
 * each, one after another (R rows in all), one product per weight matrix for all of them;
 * sequence i's rows sit at positions seqs[i].pos0.. and their keys/values are written into
 * seqs[i].kv before attending causally. */
void kr_block_forward(const kr_block *b, int layer, float *x, int S, const kr_seq *seqs,
                      kr_block_scratch *s);

#endif
