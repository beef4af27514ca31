/* train_forward.c — the predictor's forward over B windows of T tokens in training
 * (upstream's Kronos.forward in train mode), keeping every activation the backward reads:
 * the hierarchical embedding and its fusion, the temporal embedding, the blocks, the final
 * norm, the s1 head, and the dependency-aware layer (causal, RoPE at the positions) with
 * the s2 head. Each part computed as decode/predictor.c computes it. */
#include "train_passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n floats at offset *at of base (kr_carve's layout; base NULL: only the size is summed) */
static float *carve(char *base, size_t *at, size_t n) {
    void *p = NULL;
    *at = kr_carve(base, *at, &p, n * sizeof(float));
    return p;
}

/* floats of the activations of a batch (carve's rounding included); with base, the arrays */
static size_t acts_floats(const kr_train_model *m, int B, int T, float *base, tr_acts *a) {
    const kr_predictor_config *c = &m->pc;
    size_t R = (size_t)B * T, d = c->d_model, ff = c->ff_dim, tt = (size_t)T * T;
    size_t wide = 2 * d > ff ? 2 * d : ff;
    char *b = (char *)base;
    size_t o = 0, *at = &o;
    for (int l = 0; l < c->n_layers; l++) {
        tr_block_act *k = &a->blk[l];
        k->x = carve(b, at, R * d), k->xn1 = carve(b, at, R * d), k->inv1 = carve(b, at, R);
        k->q = carve(b, at, R * d), k->k = carve(b, at, R * d), k->v = carve(b, at, R * d);
        k->P = carve(b, at, (size_t)B * c->n_heads * tt), k->ao = carve(b, at, R * d);
        k->xm = carve(b, at, R * d), k->xn2 = carve(b, at, R * d), k->inv2 = carve(b, at, R);
        k->h1 = carve(b, at, R * ff), k->h3 = carve(b, at, R * ff), k->gg = carve(b, at, R * ff);
    }
    a->pair = carve(b, at, R * 2 * d), a->xf = carve(b, at, R * d), a->h = carve(b, at, R * d);
    a->invf = carve(b, at, R), a->sibe = carve(b, at, R * d), a->qd = carve(b, at, R * d);
    a->kd = carve(b, at, R * d), a->vd = carve(b, at, R * d);
    a->Pd = carve(b, at, (size_t)B * 4 * tt);
    a->ad = carve(b, at, R * d), a->u = carve(b, at, R * d), a->invd = carve(b, at, R);
    a->g2 = carve(b, at, R * d), a->logit1 = carve(b, at, R << c->s1_bits);
    a->logit2 = carve(b, at, R << c->s2_bits), a->tmp = carve(b, at, R * wide);
    return o / sizeof(float);
}

int tr_acts_alloc(tr_acts *a, kr_train_model *m, int B, int T, kr_error *err) {
    memset(a, 0, sizeof *a);
    a->B = B, a->T = T, a->R = B * T;
    a->blk = calloc((size_t)m->pc.n_layers, sizeof *a->blk);
    a->ids = malloc((size_t)a->R * sizeof(int32_t));
    size_t n = acts_floats(m, B, T, NULL, a);
    a->mem = tr_grow(&m->act_mem, &m->act_cap, n);
    if (!a->blk || !a->ids || !a->mem) {
        tr_acts_free(a, m);
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "training step: out of memory for the activations of %d windows "
                            "of %d tokens (%zu MiB)",
                            B, T, n * sizeof(float) >> 20);
    }
    acts_floats(m, B, T, a->mem, a);
    a->sib = a->ids;
    return 0;
}

void tr_acts_free(tr_acts *a, const kr_train_model *m) {
    (void)m;
    free(a->blk);
    free(a->ids);
    memset(a, 0, sizeof *a);
}

/* x[R][d] = fusion([emb_s1[s1]·√d, emb_s2[s2]·√d]) + the time tables' rows, then dropout */
static int embed(kr_train_model *m, tr_acts *a, float *x) {
    int d = m->pc.d_model, R = a->R;
    float scale = (float)sqrt((double)d);
    const float *e1 = TW(m, m->emb_s1), *e2 = TW(m, m->emb_s2);
    for (int r = 0; r < R; r++) {
        float *p = a->pair + (size_t)r * 2 * d;
        const float *r1 = e1 + (size_t)a->in_s1[r] * d, *r2 = e2 + (size_t)a->in_s2[r] * d;
        for (int i = 0; i < d; i++) {
            p[i] = r1[i] * scale;
            p[d + i] = r2[i] * scale;
        }
    }
    if (tr_linear_fwd(x, a->pair, R, m, &m->fusion)) return -1;
    for (int r = 0; r < R; r++) {
        const kr_stamp *st = &a->stamps[r];
        int idx[5] = {st->minute, st->hour, st->weekday, st->day, st->month};
        const float *rows[5];
        for (int k = 0; k < 5; k++)
            rows[k] = TW(m, m->time[k]) + (size_t)idx[k] * d;
        float *o = x + (size_t)r * d;
        /* upstream's order: hour + weekday + day + month + minute */
        for (int i = 0; i < d; i++)
            o[i] += rows[1][i] + rows[2][i] + rows[3][i] + rows[4][i] + rows[0][i];
    }
    tr_drop_apply(x, (size_t)R * d, TR_KEY(a, TR_DROP_TOKEN, 0), m->p_token);
    return 0;
}

/* block l: from k->x into out (the next block's input or the final norm's) */
static int block_fwd(kr_train_model *m, tr_acts *a, int l, float *out) {
    const tr_block *b = &m->blocks[l];
    tr_block_act *k = &a->blk[l];
    int d = m->pc.d_model, ff = m->pc.ff_dim, R = a->R, H = m->pc.n_heads;
    size_t Rd = (size_t)R * d;
    tr_rmsnorm_fwd(k->xn1, k->inv1, k->x, TW(m, b->norm1), R, d);
    if (tr_linear_fwd(k->q, k->xn1, R, m, &b->q) || tr_linear_fwd(k->k, k->xn1, R, m, &b->k) ||
        tr_linear_fwd(k->v, k->xn1, R, m, &b->v) ||
        tr_rope(k->q, a->B, a->T, d, d / H, TW(m, b->inv_freq), false) ||
        tr_rope(k->k, a->B, a->T, d, d / H, TW(m, b->inv_freq), false))
        return -1;
    tr_attn_shape s = {a->B, a->T, d, H, m->p_attn, TR_KEY(a, TR_DROP_ATTN, l)};
    if (tr_attn_fwd(k->ao, k->P, k->q, k->k, k->v, &s) || tr_linear_fwd(a->tmp, k->ao, R, m, &b->o))
        return -1;
    tr_drop_apply(a->tmp, Rd, TR_KEY(a, TR_DROP_RESID, l), m->p_resid);
    for (size_t i = 0; i < Rd; i++)
        k->xm[i] = k->x[i] + a->tmp[i];
    tr_rmsnorm_fwd(k->xn2, k->inv2, k->xm, TW(m, b->norm2), R, d);
    if (tr_linear_fwd(k->h1, k->xn2, R, m, &b->w1) || tr_linear_fwd(k->h3, k->xn2, R, m, &b->w3))
        return -1;
    tr_swiglu_fwd(k->gg, k->h1, k->h3, (size_t)R * ff);
    if (tr_linear_fwd(a->tmp, k->gg, R, m, &b->w2)) return -1;
    tr_drop_apply(a->tmp, Rd, TR_KEY(a, TR_DROP_FFN, l), m->p_ffn);
    for (size_t i = 0; i < Rd; i++)
        out[i] = k->xm[i] + a->tmp[i];
    return 0;
}

int tr_forward_trunk(kr_train_model *m, tr_acts *a, kr_error *err) {
    int L = m->pc.n_layers, d = m->pc.d_model;
    if (embed(m, a, L ? a->blk[0].x : a->xf)) goto oom;
    for (int l = 0; l < L; l++)
        if (block_fwd(m, a, l, l + 1 < L ? a->blk[l + 1].x : a->xf)) goto oom;
    tr_rmsnorm_fwd(a->h, a->invf, a->xf, TW(m, m->norm), a->R, d);
    if (tr_linear_fwd(a->logit1, a->h, a->R, m, &m->proj_s1)) goto oom;
    return 0;
oom:
    return kr_fail_code(err, KR_E_NO_MEMORY, "training step: out of memory in the forward");
}

/* the dependency layer's RoPE frequencies: the checkpoint's, else upstream's formula */
int tr_dep_inv_freq(const kr_train_model *m, float *out) {
    int hd = m->pc.d_model / 4;
    if (m->dep_inv_freq >= 0 && m->t[m->dep_inv_freq].n == (size_t)hd / 2) {
        memcpy(out, TW(m, m->dep_inv_freq), (size_t)hd / 2 * sizeof(float));
        return 0;
    }
    for (int j = 0; j < hd / 2; j++)
        out[j] = (float)(1.0 / pow(10000.0, (double)(float)(2 * j) / hd));
    return 0;
}

int tr_forward_s2(kr_train_model *m, tr_acts *a, kr_error *err) {
    int d = m->pc.d_model, R = a->R, hd = d / 4;
    float *inv = malloc((size_t)hd / 2 * sizeof(float));
    if (!inv) goto oom;
    tr_dep_inv_freq(m, inv);
    for (int r = 0; r < R; r++)
        memcpy(a->sibe + (size_t)r * d, TW(m, m->emb_s1) + (size_t)a->sib[r] * d,
               (size_t)d * sizeof(float));
    if (tr_linear_fwd(a->qd, a->sibe, R, m, &m->dep_q) ||
        tr_linear_fwd(a->kd, a->h, R, m, &m->dep_k) ||
        tr_linear_fwd(a->vd, a->h, R, m, &m->dep_v) ||
        tr_rope(a->qd, a->B, a->T, d, hd, inv, false) ||
        tr_rope(a->kd, a->B, a->T, d, hd, inv, false))
        goto oom;
    tr_attn_shape s = {a->B, a->T, d, 4, 0.0f, 0}; /* upstream's dep layer has no dropout */
    if (tr_attn_fwd(a->ad, a->Pd, a->qd, a->kd, a->vd, &s) ||
        tr_linear_fwd(a->u, a->ad, R, m, &m->dep_o))
        goto oom;
    for (size_t i = 0; i < (size_t)R * d; i++)
        a->u[i] += a->h[i];
    tr_rmsnorm_fwd(a->g2, a->invd, a->u, TW(m, m->dep_norm), R, d);
    if (tr_linear_fwd(a->logit2, a->g2, R, m, &m->proj_s2)) goto oom;
    free(inv);
    return 0;
oom:
    free(inv);
    return kr_fail_code(err, KR_E_NO_MEMORY, "training step: out of memory in the s2 head");
}
