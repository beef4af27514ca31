/* nn.h — the building blocks of both transformers, over row-major [rows][d] arrays:
 * RMSNorm, RoPE, the transformer block. Internal to core/. */
#ifndef KR_NN_H
#define KR_NN_H

#include "attention.h"
#include "layers.h"
#include "matmul.h"

void kr_rmsnorm(float *out, const float *x, const float *w, int rows, int d);
/* Rotates each head of x[T][stride] (heads of size hd from column 0) at positions pos0.. */
void kr_rope(float *x, int T, int stride, int n_heads, int hd, int pos0, const float *inv_freq);
/* The cos/sin of kr_rope's angles for positions 0..len-1 of a block: cs[len][hd/2][2]. */
void kr_rope_table(float *cs, int len, int hd, const float *inv_freq);

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
    kr_scratch mem; /* all of the above, one buffer */
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
/* Only what the block leaves in the caches: the keys and values of the new rows, the same
 * bits as kr_block_forward writes (x is not changed). For a last block whose outputs nobody
 * reads, such as a decoded prefix that only later rows attend to. */
void kr_block_forward_kv(const kr_block *b, int layer, const float *x, int S, const kr_seq *seqs,
                         kr_block_scratch *s);

#endif
