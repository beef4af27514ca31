/* tokenizer.c — candles <-> token pairs through the BSQ tokenizer's encoder and decoder. */
#include "model.h"
#include "nn.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs `n_blocks` causal blocks over x[n][d] (positions 0..n-1) in place; kv: 2 n d floats
 * of keys and values, reused by every block. */
static int run_blocks(const kr_block *blocks, int n_blocks, float *x, int n, int d, int ff,
                      float *kv, kr_error *err) {
    if (n_blocks == 0) return 0;
    kr_block_scratch s;
    if (kr_block_scratch_init(&s, n, n, d, ff, blocks[0].n_heads, err)) return -1;
    kr_kv_view view = {&kv, n, d, 0};
    kr_seq seq = {&view, 0, NULL, n};
    for (int i = 0; i < n_blocks; i++)
        kr_block_forward(&blocks[i], 0, x, 1, &seq, &s);
    kr_block_scratch_free(&s);
    return 0;
}

/* A pass's buffers: rows[n][d], small[n][nb] (token bits or quantiser outputs) and, when
 * with_kv (a whole sequence, no cache), kv[2][n][d], from the thread's tokenizer scratch
 * (kept between calls); the blocks' scratch is the caller's. */
typedef struct {
    float *rows, *small, *kv;
    kr_scratch mem;
} seq_mem;

static int seq_mem_take(seq_mem *sm, int n, int d, int nb, bool with_kv, const char *what,
                        kr_error *err) {
    size_t rows = ((size_t)n * d + 15) / 16 * 16, small = ((size_t)n * nb + 15) / 16 * 16;
    size_t kv = with_kv ? 2 * (size_t)n * d : 0;
    memset(sm, 0, sizeof *sm);
    float *p = kr_scratch_take(&sm->mem, KR_SCRATCH_TOKENIZER, (rows + small + kv) * sizeof(float));
    if (!p) return kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory for %d rows", what, n);
    sm->rows = p;
    sm->small = p + rows;
    sm->kv = with_kv ? p + rows + small : NULL;
    return 0;
}

/* The encoder's last states z[n][d] -> token pairs, one bit a sign (q: [n][bits] scratch). */
static void quantise(const kr_model *m, const float *z, int n, float *q, int32_t *s1, int32_t *s2) {
    const kr_tokenizer_config *c = &m->tc;
    int nb = c->s1_bits + c->s2_bits;
    kr_linear_forward(q, z, n, &m->tok.quant_embed);
    for (int t = 0; t < n; t++) {
        const float *qt = q + (size_t)t * nb;
        int32_t a = 0, b = 0; /* least significant bit first */
        for (int i = 0; i < c->s1_bits; i++)
            if (qt[i] > 0.0f) a |= (int32_t)1 << i;
        for (int i = 0; i < c->s2_bits; i++)
            if (qt[c->s1_bits + i] > 0.0f) b |= (int32_t)1 << i;
        s1[t] = a;
        s2[t] = b;
    }
}

int kr_tokenizer_encode(const kr_model *m, const float *x, int n, int32_t *s1, int32_t *s2,
                        kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    int d = c->d_model, nb = c->s1_bits + c->s2_bits;
    if (n < 1) return kr_fail(err, "tokenizer encode: no candles");
    seq_mem sm;
    if (seq_mem_take(&sm, n, d, nb, true, "tokenizer encode", err)) return -1;
    int rc = -1;
    kr_linear_forward(sm.rows, x, n, &m->tok.embed);
    if (run_blocks(m->tok.enc, m->tok.n_enc, sm.rows, n, d, c->ff_dim, sm.kv, err)) goto out;
    quantise(m, sm.rows, n, sm.small, s1, s2);
    rc = 0;
out:
    kr_scratch_release(&sm.mem);
    return rc;
}

int kr_tokenizer_encode_rows(const kr_model *m, const float *x, int n, const kr_kv_view *kv,
                             int pos0, int32_t *s1, int32_t *s2, kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    int d = c->d_model, nb = c->s1_bits + c->s2_bits;
    if (n < 1) return kr_fail(err, "tokenizer encode: no candles");
    seq_mem sm;
    if (seq_mem_take(&sm, n, d, nb, false, "tokenizer encode", err)) return -1;
    kr_block_scratch sc = {0};
    int rc = -1;
    if (m->tok.n_enc > 0 &&
        kr_block_scratch_init(&sc, n, pos0 + n, d, c->ff_dim, m->tok.enc[0].n_heads, err))
        goto out;
    kr_linear_forward(sm.rows, x, n, &m->tok.embed);
    kr_seq seq = {kv, pos0, NULL, n};
    for (int l = 0; l < m->tok.n_enc; l++)
        kr_block_forward(&m->tok.enc[l], l, sm.rows, 1, &seq, &sc);
    quantise(m, sm.rows, n, sm.small, s1, s2);
    rc = 0;
out:
    kr_block_scratch_free(&sc);
    kr_scratch_release(&sm.mem);
    return rc;
}

/* The decoder's input for token pairs: (2·bit − 1)/sqrt(s1_bits + s2_bits), s1's bits then
 * s2's, least significant first. */
static void token_bits(const kr_tokenizer_config *c, const int32_t *s1, const int32_t *s2, int n,
                       float *bits) {
    int nb = c->s1_bits + c->s2_bits;
    float scale = (float)(1.0 / sqrt((double)nb));
    for (int t = 0; t < n; t++) {
        float *bt = bits + (size_t)t * nb;
        for (int i = 0; i < c->s1_bits; i++)
            bt[i] = ((s1[t] >> i) & 1 ? 1.0f : -1.0f) * scale;
        for (int i = 0; i < c->s2_bits; i++)
            bt[c->s1_bits + i] = ((s2[t] >> i) & 1 ? 1.0f : -1.0f) * scale;
    }
}

static int check_tokens(const kr_tokenizer_config *c, const int32_t *s1, const int32_t *s2, int n,
                        kr_error *err) {
    for (int t = 0; t < n; t++)
        if (s1[t] < 0 || s1[t] >= (1 << c->s1_bits) || s2[t] < 0 || s2[t] >= (1 << c->s2_bits))
            return kr_fail(err, "tokenizer decode: token pair %d (%d, %d) is out of range", t,
                           (int)s1[t], (int)s2[t]);
    return 0;
}

int kr_tokenizer_decode(const kr_model *m, const int32_t *s1, const int32_t *s2, int n, float *out,
                        kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    int d = c->d_model, nb = c->s1_bits + c->s2_bits;
    if (n < 1) return kr_fail(err, "tokenizer decode: no tokens");
    if (check_tokens(c, s1, s2, n, err)) return -1;
    seq_mem sm;
    if (seq_mem_take(&sm, n, d, nb, true, "tokenizer decode", err)) return -1;
    int rc = -1;
    token_bits(c, s1, s2, n, sm.small);
    kr_linear_forward(sm.rows, sm.small, n, &m->tok.post_quant_embed);
    if (run_blocks(m->tok.dec, m->tok.n_dec, sm.rows, n, d, c->ff_dim, sm.kv, err)) goto out;
    kr_linear_forward(out, sm.rows, n, &m->tok.head);
    rc = 0;
out:
    kr_scratch_release(&sm.mem);
    return rc;
}

/* The decoder's blocks over the rows of seq (x: their embeddings, overwritten) for their
 * keys and values alone: the last block stops at its cache, as nothing reads its outputs. */
static void decoder_keys(const kr_model *m, float *x, const kr_seq *seq, kr_block_scratch *sc) {
    int n = m->tok.n_dec;
    for (int l = 0; l < n - 1; l++)
        kr_block_forward(&m->tok.dec[l], l, x, 1, seq, sc);
    if (n > 0) kr_block_forward_kv(&m->tok.dec[n - 1], n - 1, x, 1, seq, sc);
}

/* ---- batched decode of sample paths --------------------------------------------------- */

/* Positions per key block of a prefix run here (as the KV pool's): each path then copies
 * at most one partly filled block of the prefix. */
#define PREFIX_BLOCK 16

/* The buffers of a batched decode of paths, carved from one buffer of the thread's
 * KR_SCRATCH_PATHS slot (kept between calls: a forecast's tokenizer decode does not fault
 * fresh pages in every time): token bits and rows, the paths' own keys and values, each
 * path's block table, view and sequence; and the block scratch. */
typedef struct {
    float *bits, *x, *mem;
    float **ptrs;
    kr_kv_view *views;
    kr_seq *seqs;
    kr_block_scratch sc;
    kr_scratch buf;
} paths_mem;

static size_t paths_layout(paths_mem *pm, char *base, const kr_tokenizer_config *c, int rows, int n,
                           size_t mem_floats, size_t n_ptrs) {
    size_t at = kr_carve(base, 0, (void **)&pm->mem, mem_floats * sizeof(float));
    at = kr_carve(base, at, (void **)&pm->bits,
                  (size_t)rows * (c->s1_bits + c->s2_bits) * sizeof(float));
    at = kr_carve(base, at, (void **)&pm->x, (size_t)rows * c->d_model * sizeof(float));
    at = kr_carve(base, at, (void **)&pm->ptrs, n_ptrs * sizeof *pm->ptrs);
    at = kr_carve(base, at, (void **)&pm->views, (size_t)n * sizeof *pm->views);
    return kr_carve(base, at, (void **)&pm->seqs, (size_t)n * sizeof *pm->seqs);
}

static void paths_mem_free(paths_mem *pm) {
    kr_block_scratch_free(&pm->sc);
    kr_scratch_release(&pm->buf);
}

/* rows rows of up to max_keys keys, n paths (views), mem_floats of key/value memory and
 * n_ptrs block pointers, from `slot`; S and P for the message. */
static int paths_mem_init(paths_mem *pm, const kr_tokenizer_config *c, kr_scratch_slot slot,
                          int rows, int max_keys, int n, size_t mem_floats, size_t n_ptrs, int S,
                          int P, kr_error *err) {
    memset(pm, 0, sizeof *pm);
    char *base =
        kr_scratch_take(&pm->buf, slot, paths_layout(pm, NULL, c, rows, n, mem_floats, n_ptrs));
    if (!base)
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "tokenizer decode: out of memory for %d paths of %d tokens", S, P);
    paths_layout(pm, base, c, rows, n, mem_floats, n_ptrs);
    return kr_block_scratch_init(&pm->sc, rows, max_keys, c->d_model, c->ff_dim, c->n_heads, err);
}

/* The decoder is causal, so rows after a common prefix see the prefix's keys and values
 * unchanged: the prefix runs once (its keys in blocks of PREFIX_BLOCK positions, in the
 * thread's tokenizer scratch), then every path's own rows run in batches over it
 * (kr_tokenizer_decode_paths_kv). */
int kr_tokenizer_decode_paths(const kr_model *m, const int32_t *pre_s1, const int32_t *pre_s2,
                              int np, const int32_t *s1, const int32_t *s2, int S, int P,
                              float *out, kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    const kr_tokenizer_weights *w = &m->tok;
    int d = c->d_model, L = w->n_dec > 0 ? w->n_dec : 1;
    if (np < 1 || S < 1 || P < 1) return kr_fail(err, "tokenizer decode: empty prefix or paths");
    if (check_tokens(c, pre_s1, pre_s2, np, err) || check_tokens(c, s1, s2, S * P, err)) return -1;
    int n_blocks = (np + PREFIX_BLOCK - 1) / PREFIX_BLOCK;
    size_t block = (size_t)L * 2 * PREFIX_BLOCK * d;
    paths_mem pm; /* the prefix's: its rows, keys and block table */
    int rc = -1;
    if (paths_mem_init(&pm, c, KR_SCRATCH_TOKENIZER, np, np, 0, block * n_blocks, (size_t)n_blocks,
                       S, P, err))
        goto out;
    for (int b = 0; b < n_blocks; b++)
        pm.ptrs[b] = pm.mem + block * b;
    kr_kv_view pre = {pm.ptrs, PREFIX_BLOCK, d, 0};
    token_bits(c, pre_s1, pre_s2, np, pm.bits);
    kr_linear_forward(pm.x, pm.bits, np, &w->post_quant_embed);
    kr_seq seq = {&pre, 0, NULL, np};
    decoder_keys(m, pm.x, &seq, &pm.sc); /* the paths read only its keys and values */
    kr_block_scratch_free(&pm.sc);       /* the paths take the block scratch next */
    rc = kr_tokenizer_decode_paths_kv(m, &pre, np, s1, s2, S, P, out, err);
out:
    paths_mem_free(&pm);
    return rc;
}

int kr_tokenizer_decoder_extend(const kr_model *m, const kr_kv_view *kv, int pos0,
                                const int32_t *s1, const int32_t *s2, int n, kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    int d = c->d_model, nb = c->s1_bits + c->s2_bits;
    if (n < 1 || m->tok.n_dec == 0) return 0;
    if (check_tokens(c, s1, s2, n, err)) return -1;
    seq_mem sm;
    if (seq_mem_take(&sm, n, d, nb, false, "tokenizer decode", err)) return -1;
    kr_block_scratch sc = {0};
    int rc = -1;
    if (kr_block_scratch_init(&sc, n, pos0 + n, d, c->ff_dim, c->n_heads, err)) goto out;
    token_bits(c, s1, s2, n, sm.small);
    kr_linear_forward(sm.rows, sm.small, n, &m->tok.post_quant_embed);
    kr_seq seq = {kv, pos0, NULL, n};
    decoder_keys(m, sm.rows, &seq, &sc); /* only the keys and values are kept */
    rc = 0;
out:
    kr_block_scratch_free(&sc);
    kr_scratch_release(&sm.mem);
    return rc;
}

/* Paths over a prefix already in pre: each path sees the prefix's whole blocks as they
 * are, a copy of its partly filled last block, then blocks of its own. Paths go in groups
 * of at most 4096 rows and about 256 MiB of their own keys and values. */
int kr_tokenizer_decode_paths_kv(const kr_model *m, const kr_kv_view *pre, int np,
                                 const int32_t *s1, const int32_t *s2, int S, int P, float *out,
                                 kr_error *err) {
    const kr_tokenizer_config *c = &m->tc;
    const kr_tokenizer_weights *w = &m->tok;
    int d = c->d_model, B = pre->block_len;
    if (np < 1 || S < 1 || P < 1) return kr_fail(err, "tokenizer decode: empty prefix or paths");
    if (check_tokens(c, s1, s2, S * P, err)) return -1;
    int nf = np / B, total = (np + P + B - 1) / B, own = total - nf;
    size_t block = (size_t)(w->n_dec > 0 ? w->n_dec : 1) * 2 * B * d;
    size_t by_mem = ((size_t)256 << 20) / (own * block * sizeof(float));
    int group = 4096 / P > 0 ? 4096 / P : 1;
    if ((size_t)group > by_mem) group = by_mem > 0 ? (int)by_mem : 1;
    if (group > S) group = S;
    paths_mem pm;
    int rc = -1;
    if (paths_mem_init(&pm, c, KR_SCRATCH_PATHS, group * P, np + P, group,
                       (size_t)group * own * block, (size_t)group * total, S, P, err))
        goto out;
    float *bits = pm.bits, *x = pm.x, *mem = pm.mem, **ptrs = pm.ptrs;
    kr_kv_view *views = pm.views;
    kr_seq *seqs = pm.seqs;
    for (int p0 = 0; p0 < S; p0 += group) {
        int g = S - p0 < group ? S - p0 : group;
        for (int p = 0; p < g; p++) {
            float **bp = ptrs + (size_t)p * total;
            for (int b = 0; b < nf; b++)
                bp[b] = pre->blocks[b];
            for (int b = 0; b < own; b++)
                bp[nf + b] = mem + block * ((size_t)p * own + b);
            if (np % B) memcpy(bp[nf], pre->blocks[nf], block * sizeof(float));
            views[p] = (kr_kv_view){bp, B, d, 0};
            seqs[p] = (kr_seq){&views[p], np, NULL, P};
        }
        token_bits(c, s1 + (size_t)p0 * P, s2 + (size_t)p0 * P, g * P, bits);
        kr_linear_forward(x, bits, g * P, &w->post_quant_embed);
        for (int l = 0; l < w->n_dec; l++)
            kr_block_forward(&w->dec[l], l, x, g, seqs, &pm.sc);
        kr_linear_forward(out + (size_t)p0 * P * c->d_in, x, g * P, &w->head);
    }
    rc = 0;
out:
    paths_mem_free(&pm);
    return rc;
}
