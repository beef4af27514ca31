/* agreement.c — kronos-bench --agreement: a reduced-precision mode judged by how far it moves
 * the forecasts' source, the next-token distributions, from float32's.
 *
 * The first L candles are tokenized once by the float32 model; both models then read the
 * same tokens, teacher-forced, one position at a time through their KV caches (cached =
 * uncached within each mode): at position t the s1 logits (the next token's first half)
 * and the s2 logits given the true next s1. Per mode: the share of positions whose greedy
 * s1 and s2 equal float32's, and the KL divergence KL(float32 || mode) of the s1 and s2
 * distributions (temperature 1), mean and largest; and the share of the window's token
 * pairs the mode's own tokenizer encodes as float32's does.
 */
#include "agreement.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int P, V1, V2;
    float *s1, *s2; /* [P][V1], [P][V2] */
} logits;

const kb_mode kb_modes[] = {
    {"weights bf16", "weights_bf16", KR_PREC_BF16, KR_PREC_F32, 0},
    {"kv bf16", "kv_bf16", KR_PREC_F32, KR_PREC_BF16, 0},
    {"weights and kv bf16", "both_bf16", KR_PREC_BF16, KR_PREC_BF16, 0},
    {"weights int8", "weights_int8", KR_PREC_INT8, KR_PREC_F32, 0},
    {"weights bf16, heads f32", "weights_bf16_heads", KR_PREC_BF16, KR_PREC_F32, KR_KEEP_HEADS},
    {"weights bf16, heads and embeddings f32", "weights_bf16_edges", KR_PREC_BF16, KR_PREC_F32,
     KR_KEEP_HEADS | KR_KEEP_EMBEDDINGS},
    {"weights int8, embeddings f32", "weights_int8_edges", KR_PREC_INT8, KR_PREC_F32,
     KR_KEEP_EMBEDDINGS},
};
const int kb_n_modes = sizeof kb_modes / sizeof *kb_modes;

kr_model *kb_mode_load(const char *dir, const kb_mode *md, kr_error *err) {
    char tok[1024], pred[1024];
    snprintf(tok, sizeof tok, "%s/tokenizer", dir);
    snprintf(pred, sizeof pred, "%s/predictor", dir);
    kr_model_paths p = {.tokenizer_dir = tok,
                        .predictor_dir = pred,
                        .max_context = 512,
                        .weights = md ? md->weights : KR_PREC_F32,
                        .kv = md ? md->kv : KR_PREC_F32,
                        .keep_f32 = md ? md->keep_f32 : 0};
    return kr_model_load(&p, err);
}

/* out's logits at positions 0 .. L-2 of the tokens, one position a step */
static int teacher_forced(const kr_model *m, const int32_t *t1, const int32_t *t2,
                          const kr_stamp *st, int L, logits *out, kr_error *err) {
    kr_pool *pool = kr_pool_create(m, kr_pool_bytes_for(m, L) * 2, err);
    kr_cache *c = pool ? kr_cache_create(pool, 0, err) : NULL;
    int rc = c ? 0 : -1;
    for (int t = 0; rc == 0 && t < out->P; t++) {
        rc = kr_cache_append(&c, 1, t1 + t, t2 + t, st + t, 1, out->s1 + (size_t)t * out->V1, err);
        if (rc == 0) rc = kr_cache_s2_logits(&c, 1, &t1[t + 1], out->s2 + (size_t)t * out->V2, err);
    }
    kr_cache_free(c);
    kr_pool_free(pool);
    return rc;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* log-softmax of x[n] into out[n], in double */
static void log_softmax(const float *x, int n, double *out) {
    double mx = x[0], z = 0;
    for (int i = 1; i < n; i++)
        mx = fmax(mx, x[i]);
    for (int i = 0; i < n; i++)
        z += exp(x[i] - mx);
    double lz = log(z) + mx;
    for (int i = 0; i < n; i++)
        out[i] = x[i] - lz;
}

/* KL(p || q) of the distributions of logits p[n] and q[n]; scratch: 2n doubles */
static double kl(const float *p, const float *q, int n, double *scratch) {
    double *lp = scratch, *lq = scratch + n, s = 0;
    log_softmax(p, n, lp);
    log_softmax(q, n, lq);
    for (int i = 0; i < n; i++)
        s += exp(lp[i]) * (lp[i] - lq[i]);
    return s;
}

static int dump_floats(const char *dir, const char *name, const float *x, size_t n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

/* One table row: the mode against float32 */
static void row(const char *label, const logits *a, const logits *b, double tok_same,
                double *scratch) {
    int s1_same = 0, s2_same = 0;
    double kl1 = 0, kl2 = 0, kl1_max = 0;
    for (int t = 0; t < a->P; t++) {
        const float *a1 = a->s1 + (size_t)t * a->V1, *b1 = b->s1 + (size_t)t * a->V1;
        const float *a2 = a->s2 + (size_t)t * a->V2, *b2 = b->s2 + (size_t)t * a->V2;
        s1_same += argmax(a1, a->V1) == argmax(b1, a->V1);
        s2_same += argmax(a2, a->V2) == argmax(b2, a->V2);
        double k1 = kl(a1, b1, a->V1, scratch);
        kl1 += k1;
        kl1_max = fmax(kl1_max, k1);
        kl2 += kl(a2, b2, a->V2, scratch);
    }
    printf("| %s | %d | %.4f | %.4f | %.4f | %.3g | %.3g | %.3g |\n", label, a->P, tok_same,
           (double)s1_same / a->P, (double)s2_same / a->P, kl1 / a->P, kl1_max, kl2 / a->P);
}

static int alloc_logits(logits *l, int P, int V1, int V2) {
    *l = (logits){P, V1, V2, malloc((size_t)P * V1 * sizeof(float)),
                  malloc((size_t)P * V2 * sizeof(float))};
    return l->s1 && l->s2 ? 0 : -1;
}

int kb_agreement(const char *model_dir, const int64_t *wall, double *const cols[KR_D_IN], int n,
                 int L, const char *dump) {
    if (L < 2 || L > n || L > 512) {
        fprintf(stderr, "kronos-bench --agreement: lookback %d: need 2 to 512 and %d rows\n", L, n);
        return 1;
    }
    kr_error err = {0};
    kr_model *ref = kb_mode_load(model_dir, NULL, &err);
    if (!ref) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    const kr_predictor_config *pc = kr_model_predictor_config(ref);
    int V1 = 1 << pc->s1_bits, V2 = 1 << pc->s2_bits, rc = 1;
    int32_t *t1 = malloc((size_t)L * sizeof *t1), *t2 = malloc((size_t)L * sizeof *t2);
    int32_t *u1 = malloc((size_t)L * sizeof *u1), *u2 = malloc((size_t)L * sizeof *u2);
    kr_stamp *st = malloc((size_t)L * sizeof *st);
    double *scratch = malloc((size_t)2 * (V1 > V2 ? V1 : V2) * sizeof *scratch);
    logits a = {0}, b = {0};
    kr_model *m = NULL;
    kr_candles cd = {.n = L, .timestamps = wall};
    for (int c = 0; c < KR_D_IN; c++)
        cd.columns[c] = cols[c];
    float mean[KR_D_IN], std[KR_D_IN];
    if (!t1 || !t2 || !u1 || !u2 || !st || !scratch || alloc_logits(&a, L - 1, V1, V2) ||
        alloc_logits(&b, L - 1, V1, V2)) {
        fprintf(stderr, "kronos-bench --agreement: out of memory\n");
        goto out;
    }
    for (int i = 0; i < L; i++)
        st[i] = kr_stamp_from_wall(wall[i]);
    if (kr_tokenize_candles(ref, &cd, NULL, t1, t2, mean, std, &err) ||
        teacher_forced(ref, t1, t2, st, L, &a, &err))
        goto fail;
    printf("agreement with float32: %s, the first %d candles teacher-forced, %d positions\n\n",
           model_dir, L, L - 1);
    printf("| mode | positions | tokenizer: same pairs | s1 top-1 same | s2 top-1 same | "
           "mean KLD s1 | max KLD s1 | mean KLD s2 |\n|---|---|---|---|---|---|---|---|\n");
    if (dump && (dump_floats(dump, "f32_s1.bin", a.s1, (size_t)a.P * V1) ||
                 dump_floats(dump, "f32_s2.bin", a.s2, (size_t)a.P * V2)))
        goto out;
    for (int k = 0; k < kb_n_modes; k++) {
        if (!(m = kb_mode_load(model_dir, &kb_modes[k], &err))) goto fail;
        int same = 0;
        if (kr_tokenize_candles(m, &cd, NULL, u1, u2, mean, std, &err) ||
            teacher_forced(m, t1, t2, st, L, &b, &err))
            goto fail;
        for (int i = 0; i < L; i++)
            same += u1[i] == t1[i] && u2[i] == t2[i];
        row(kb_modes[k].name, &a, &b, (double)same / L, scratch);
        char name[64];
        snprintf(name, sizeof name, "%s_s1.bin", kb_modes[k].file);
        if (dump && dump_floats(dump, name, b.s1, (size_t)b.P * V1)) goto out;
        snprintf(name, sizeof name, "%s_s2.bin", kb_modes[k].file);
        if (dump && dump_floats(dump, name, b.s2, (size_t)b.P * V2)) goto out;
        kr_model_free(m);
        m = NULL;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "kronos-bench --agreement: %s\n", err.msg);
out:
    kr_model_free(m);
    kr_model_free(ref);
    free(t1), free(t2), free(u1), free(u2), free(st), free(scratch);
    free(a.s1), free(a.s2), free(b.s1), free(b.s2);
    return rc;
}
