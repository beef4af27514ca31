/* predictor.c — the Kronos predictor over one window, recomputed from scratch: the plain
 * reference that every faster path is checked against. */
#include "predictor.h"
#include "nn.h"
#include "parallel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Rows per item of the embedding's pair rows, and the rows from which they are gathered on
 * the pool's threads (a decode step's paths, a prefill: rows of two cold tables) */
#define EMBED_ITEM_ROWS     4
#define EMBED_PARALLEL_ROWS 8

typedef struct {
    const kr_predictor_weights *w;
    const int32_t *s1, *s2;
    int n, d;
    float scale;
    float *pair;
} embed_job;

/* pair rows of item i: [emb_s1[s1]·√d, emb_s2[s2]·√d] */
static void embed_pairs(void *ctx, int item, int worker) {
    (void)worker;
    const embed_job *j = ctx;
    int d = j->d, t1 = (item + 1) * EMBED_ITEM_ROWS < j->n ? (item + 1) * EMBED_ITEM_ROWS : j->n;
    for (int t = item * EMBED_ITEM_ROWS; t < t1; t++) {
        float *p = j->pair + (size_t)t * 2 * d;
        const float *e1 = j->w->emb_s1 + (size_t)j->s1[t] * d;
        const float *e2 = j->w->emb_s2 + (size_t)j->s2[t] * d;
        for (int i = 0; i < d; i++) {
            p[i] = e1[i] * j->scale;
            p[d + i] = e2[i] * j->scale;
        }
    }
}

static bool same_stamp(const kr_stamp *a, const kr_stamp *b) {
    return a->minute == b->minute && a->hour == b->hour && a->weekday == b->weekday &&
           a->day == b->day && a->month == b->month;
}

/* out[t] += the time embedding of stamps[t], summed once for a run of rows of one stamp (a
 * decode step's paths) into te[d] */
static void embed_times(const kr_predictor_weights *w, const kr_stamp *stamps, int n, int d,
                        float *out, float *te) {
    for (int t = 0; t < n; t++) {
        const kr_stamp *st = &stamps[t];
        if (t == 0 || !same_stamp(st, &stamps[t - 1])) {
            const float *rows[KR_N_TIME] = {
                w->time[KR_TIME_MINUTE] + (size_t)st->minute * d,
                w->time[KR_TIME_HOUR] + (size_t)st->hour * d,
                w->time[KR_TIME_WEEKDAY] + (size_t)st->weekday * d,
                w->time[KR_TIME_DAY] + (size_t)st->day * d,
                w->time[KR_TIME_MONTH] + (size_t)st->month * d,
            };
            /* upstream's order: hour + weekday + day + month + minute */
            for (int i = 0; i < d; i++)
                te[i] = rows[1][i] + rows[2][i] + rows[3][i] + rows[4][i] + rows[0][i];
        }
        float *o = out + (size_t)t * d;
        for (int i = 0; i < d; i++)
            o[i] += te[i];
    }
}

void kr_predictor_embed(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *out, float *pair_scratch) {
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model, items = (n + EMBED_ITEM_ROWS - 1) / EMBED_ITEM_ROWS;
    embed_job j = {w, s1, s2, n, d, (float)sqrt((double)d), pair_scratch};
    kr_parallel_for_if(n >= EMBED_PARALLEL_ROWS, items, embed_pairs, &j);
    kr_linear_forward(out, pair_scratch, n, &w->fusion);
    embed_times(w, stamps, n, d, out, pair_scratch); /* the fusion has read the pairs */
}

void kr_predictor_dep_kv(const kr_model *m, const float *x, int R, float *k, float *v,
                         float *stacked) {
    const kr_linear *l = &m->pred.dep_kv;
    int d = m->pc.d_model;
    float *parts[2] = {k, v};
    if (kr_linear_forward_parts(parts, 2, x, R, l) == 0) return;
    kr_linear_forward(stacked, x, R, l); /* the same product, then split row by row */
    for (size_t r = 0; r < (size_t)R; r++) {
        memcpy(k + r * d, stacked + r * 2 * d, (size_t)d * sizeof(float));
        memcpy(v + r * d, stacked + r * 2 * d + d, (size_t)d * sizeof(float));
    }
}

int kr_predictor_check_inputs(const kr_model *m, const int32_t *s1, const int32_t *s2,
                              const kr_stamp *stamps, int n, kr_error *err) {
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    for (int t = 0; t < n; t++) {
        if (s1[t] < 0 || s1[t] >= v1)
            return kr_fail(err, "token %d: s1 = %d is outside [0, %d)", t, (int)s1[t], v1);
        if (s2[t] < 0 || s2[t] >= v2)
            return kr_fail(err, "token %d: s2 = %d is outside [0, %d)", t, (int)s2[t], v2);
        kr_error e;
        if (kr_stamp_check(&stamps[t], &e))
            return kr_fail(err, "token %d: time stamp: %s", t, e.msg);
    }
    return 0;
}

int kr_model_check_tokens(const kr_model *m, const int32_t *s1, const int32_t *s2,
                          const kr_stamp *stamps, int n, kr_error *err) {
    if (kr_predictor_check_inputs(m, s1, s2, stamps, n, err)) {
        err->code = KR_E_INVALID;
        return -1;
    }
    return 0;
}

int kr_predictor_s2_rows(const kr_model *m, const kr_attn_row *rows, int layer,
                         const float *const *h_last, const int32_t *s1, int S, float *s2_logits,
                         kr_error *err) {
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model, max_len = 0;
    for (int i = 0; i < S; i++)
        if (rows[i].n_keys > max_len) max_len = rows[i].n_keys;
    /* in, q, attn [S][d] and attention's scores, from the thread's kept s2 scratch (one
     * decode step after another: no allocation a step) */
    size_t sd = ((size_t)S * d + 15) / 16 * 16;
    kr_scratch mem;
    float *in = kr_scratch_take(&mem, KR_SCRATCH_S2,
                                (3 * sd + kr_attend_scores_floats(max_len, KR_DEP_HEADS, d)) *
                                    sizeof(float));
    if (!in) return kr_fail_code(err, KR_E_NO_MEMORY, "s2 logits: out of memory for %d rows", S);
    float *q = in + sd, *attn = q + sd, *scores = attn + sd;
    /* the query is dep_q of the raw s1 embedding (not scaled by sqrt(d); RoPE is the
     * identity here), looked up from the table of every token's */
    for (int i = 0; i < S; i++)
        memcpy(q + (size_t)i * d, w->dep_q_table + (size_t)s1[i] * d, (size_t)d * sizeof(float));
    kr_attend_rows(attn, q, rows, S, d, layer, KR_DEP_HEADS, scores, max_len);
    kr_linear_forward(in, attn, S, &w->dep_o);
    for (int i = 0; i < S; i++)
        for (int k = 0; k < d; k++)
            in[(size_t)i * d + k] += h_last[i][k];
    kr_rmsnorm(in, in, w->dep_norm, S, d);
    kr_linear_forward(s2_logits, in, S, &w->proj_s2);
    kr_scratch_release(&mem);
    return 0;
}

int kr_predictor_window(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *s1_logits, float *context,
                        kr_error *err) {
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model;
    if (n < 1) return kr_fail(err, "predictor: empty window");
    if (kr_predictor_check_inputs(m, s1, s2, stamps, n, err)) return -1;
    size_t nd = (size_t)n * d;
    float *x = malloc(nd * sizeof(float)), *pair = malloc(2 * nd * sizeof(float));
    float *kv = malloc(2 * nd * sizeof(float)); /* one layer at a time: nothing is kept */
    kr_block_scratch s = {0};
    int rc = -1;
    if (!x || !pair || !kv) {
        kr_fail_code(err, KR_E_NO_MEMORY, "predictor: out of memory for a window of %d", n);
        goto out;
    }
    if (kr_block_scratch_init(&s, n, n, d, m->pc.ff_dim, m->pc.n_heads, err)) goto out;
    kr_predictor_embed(m, s1, s2, stamps, n, x, pair);
    kr_kv_view view = {&kv, n, d, m->kv == KR_PREC_BF16};
    kr_seq seq = {&view, 0, NULL, n};
    for (int l = 0; l < w->n_layers; l++)
        kr_block_forward(&w->blocks[l], 0, x, 1, &seq, &s);
    kr_rmsnorm(x, x, w->norm, n, d);
    if (s1_logits) kr_linear_forward(s1_logits, x + (size_t)(n - 1) * d, 1, &w->proj_s1);
    if (context) memcpy(context, x, nd * sizeof(float));
    rc = 0;
out:
    kr_block_scratch_free(&s);
    free(x);
    free(pair);
    free(kv);
    return rc;
}

int kr_predictor_s2_logits(const kr_model *m, const float *context, int n, int32_t s1,
                           float *s2_logits, kr_error *err) {
    int d = m->pc.d_model;
    if (n < 1) return kr_fail(err, "predictor: empty context");
    if (s1 < 0 || s1 >= (1 << m->pc.s1_bits))
        return kr_fail(err, "predictor: s1 = %d is outside [0, %d)", (int)s1, 1 << m->pc.s1_bits);
    size_t nd = (size_t)n * d;
    float *kv = malloc(2 * nd * sizeof(float)); /* the dependency layer's K then V */
    float *k = malloc(2 * nd * sizeof(float)), *stacked = malloc(2 * nd * sizeof(float));
    if (!kv || !k || !stacked) {
        free(kv);
        free(k);
        free(stacked);
        return kr_fail_code(err, KR_E_NO_MEMORY, "predictor: out of memory for a context of %d", n);
    }
    kr_predictor_dep_kv(m, context, n, k, k + nd, stacked);
    free(stacked);
    kr_kv_view view = {&kv, n, d, m->kv == KR_PREC_BF16};
    for (int t = 0; t < n; t++) { /* as the cache stores them (kv bf16: rounded) */
        kr_kv_put_k(&view, 0, t, k + (size_t)t * d);
        kr_kv_put_v(&view, 0, t, k + nd + (size_t)t * d);
    }
    free(k);
    kr_attn_row row = {&view, n};
    const float *h_last = context + (size_t)(n - 1) * d;
    int rc = kr_predictor_s2_rows(m, &row, 0, &h_last, &s1, 1, s2_logits, err);
    free(kv);
    return rc;
}
