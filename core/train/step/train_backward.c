/* train_backward.c — the gradient of the loss for every trainable tensor, from the logits'
 * gradients back through the s2 head and the dependency-aware layer, the s1 head, the final
 * norm, the blocks (down to the lowest one the depth trains) and the embeddings. */
#include "train_passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *dh, *dx, *dxm, *dq, *dk, *dv, *dao, *dn, *d1, *d3, *dpair;
    float *mem; /* the model's grad_mem */
} grads_buf;

/* the gradient of tensor i when it trains, else NULL */
static float *gt(kr_train_model *m, int i) {
    return m->t[i].trains ? m->t[i].g : NULL;
}

static int bufs_alloc(grads_buf *g, kr_train_model *m, int R) {
    size_t Rd = (size_t)R * m->pc.d_model, Rf = (size_t)R * m->pc.ff_dim;
    g->mem = tr_grow(&m->grad_mem, &m->grad_cap, 10 * Rd + 2 * Rf);
    if (!g->mem) return -1;
    float *p = g->mem;
    float **rd[] = {&g->dh, &g->dx, &g->dxm, &g->dq, &g->dk, &g->dv, &g->dao, &g->dn};
    for (size_t i = 0; i < sizeof rd / sizeof *rd; i++, p += Rd)
        *rd[i] = p;
    g->dpair = p, p += 2 * Rd;
    g->d1 = p, g->d3 = p + Rf;
    return 0;
}

/* dy: the gradient of block l's output, replaced by that of its input */
static int block_bwd(kr_train_model *m, tr_acts *a, int l, grads_buf *g) {
    const tr_block *b = &m->blocks[l];
    const tr_block_act *k = &a->blk[l];
    int d = m->pc.d_model, R = a->R, H = m->pc.n_heads;
    size_t Rd = (size_t)R * d, Rf = (size_t)R * m->pc.ff_dim;
    float *dy = g->dx;
    /* out = xm + drop(w2(silu(h1) * h3)) */
    memcpy(g->dn, dy, Rd * sizeof(float));
    tr_drop_apply(g->dn, Rd, TR_KEY(a, TR_DROP_FFN, l), m->p_ffn);
    if (tr_linear_dw(g->dn, k->gg, R, m, &b->w2) || tr_linear_dx(g->d1, g->dn, R, m, &b->w2, false))
        return -1;
    tr_swiglu_bwd(g->d1, g->d3, k->h1, k->h3, Rf);
    if (tr_linear_dw(g->d1, k->xn2, R, m, &b->w1) || tr_linear_dw(g->d3, k->xn2, R, m, &b->w3) ||
        tr_linear_dx(g->dn, g->d1, R, m, &b->w1, false) ||
        tr_linear_dx(g->dn, g->d3, R, m, &b->w3, true))
        return -1;
    memcpy(g->dxm, dy, Rd * sizeof(float));
    tr_rmsnorm_bwd(g->dxm, gt(m, b->norm2), g->dn, k->xm, k->inv2, TW(m, b->norm2), R, d, true);
    /* xm = x + drop(out_proj(attention(rope(q), rope(k), v))) */
    memcpy(g->dn, g->dxm, Rd * sizeof(float));
    tr_drop_apply(g->dn, Rd, TR_KEY(a, TR_DROP_RESID, l), m->p_resid);
    if (tr_linear_dw(g->dn, k->ao, R, m, &b->o) || tr_linear_dx(g->dao, g->dn, R, m, &b->o, false))
        return -1;
    tr_attn_shape s = {a->B, a->T, d, H, m->p_attn, TR_KEY(a, TR_DROP_ATTN, l)};
    if (tr_attn_bwd(g->dq, g->dk, g->dv, g->dao, k->P, k->q, k->k, k->v, &s) ||
        tr_rope(g->dq, a->B, a->T, d, d / H, TW(m, b->inv_freq), true) ||
        tr_rope(g->dk, a->B, a->T, d, d / H, TW(m, b->inv_freq), true))
        return -1;
    if (tr_linear_dw(g->dq, k->xn1, R, m, &b->q) || tr_linear_dw(g->dk, k->xn1, R, m, &b->k) ||
        tr_linear_dw(g->dv, k->xn1, R, m, &b->v) ||
        tr_linear_dx(g->dn, g->dq, R, m, &b->q, false) ||
        tr_linear_dx(g->dn, g->dk, R, m, &b->k, true) ||
        tr_linear_dx(g->dn, g->dv, R, m, &b->v, true))
        return -1;
    memcpy(dy, g->dxm, Rd * sizeof(float));
    tr_rmsnorm_bwd(dy, gt(m, b->norm1), g->dn, k->x, k->inv1, TW(m, b->norm1), R, d, true);
    return 0;
}

/* the gradient of the embedding's output (g->dx) into the tables and the fusion */
static int embed_bwd(kr_train_model *m, tr_acts *a, grads_buf *g) {
    int d = m->pc.d_model, R = a->R;
    float scale = (float)sqrt((double)d), *de = g->dx;
    tr_drop_apply(de, (size_t)R * d, TR_KEY(a, TR_DROP_TOKEN, 0), m->p_token);
    for (int t = 0; t < 5; t++) {
        float *gtab = gt(m, m->time[t]);
        if (!gtab) continue;
        for (int r = 0; r < R; r++) {
            const kr_stamp *st = &a->stamps[r];
            int idx[5] = {st->minute, st->hour, st->weekday, st->day, st->month};
            float *o = gtab + (size_t)idx[t] * d;
            const float *gr = de + (size_t)r * d;
            for (int i = 0; i < d; i++)
                o[i] += gr[i];
        }
    }
    if (tr_linear_dw(de, a->pair, R, m, &m->fusion) ||
        tr_linear_dx(g->dpair, de, R, m, &m->fusion, false))
        return -1;
    float *g1 = gt(m, m->emb_s1), *g2 = gt(m, m->emb_s2);
    for (int r = 0; r < R; r++) {
        const float *p = g->dpair + (size_t)r * 2 * d;
        float *o1 = g1 ? g1 + (size_t)a->in_s1[r] * d : NULL;
        float *o2 = g2 ? g2 + (size_t)a->in_s2[r] * d : NULL;
        for (int i = 0; i < d; i++) {
            if (o1) o1[i] += p[i] * scale;
            if (o2) o2[i] += p[d + i] * scale;
        }
    }
    return 0;
}

/* from the s2 logits' gradient into h (g->dh), the dependency layer and the s2 head */
static int s2_bwd(kr_train_model *m, tr_acts *a, grads_buf *g) {
    int d = m->pc.d_model, R = a->R, hd = d / 4;
    size_t Rd = (size_t)R * d;
    if (tr_linear_dw(a->logit2, a->g2, R, m, &m->proj_s2) ||
        tr_linear_dx(g->dn, a->logit2, R, m, &m->proj_s2, false))
        return -1;
    tr_rmsnorm_bwd(g->dx, gt(m, m->dep_norm), g->dn, a->u, a->invd, TW(m, m->dep_norm), R, d,
                   false);
    memcpy(g->dh, g->dx, Rd * sizeof(float)); /* u = h + out_proj(attention) */
    if (tr_linear_dw(g->dx, a->ad, R, m, &m->dep_o) ||
        tr_linear_dx(g->dao, g->dx, R, m, &m->dep_o, false))
        return -1;
    float *inv = malloc((size_t)hd / 2 * sizeof(float));
    if (!inv) return -1;
    tr_dep_inv_freq(m, inv);
    tr_attn_shape s = {a->B, a->T, d, 4, 0.0f, 0};
    int rc = tr_attn_bwd(g->dq, g->dk, g->dv, g->dao, a->Pd, a->qd, a->kd, a->vd, &s) ||
             tr_rope(g->dq, a->B, a->T, d, hd, inv, true) ||
             tr_rope(g->dk, a->B, a->T, d, hd, inv, true);
    free(inv);
    if (rc || tr_linear_dw(g->dq, a->sibe, R, m, &m->dep_q) ||
        tr_linear_dw(g->dk, a->h, R, m, &m->dep_k) || tr_linear_dw(g->dv, a->h, R, m, &m->dep_v) ||
        tr_linear_dx(g->dh, g->dk, R, m, &m->dep_k, true) ||
        tr_linear_dx(g->dh, g->dv, R, m, &m->dep_v, true))
        return -1;
    float *ge = gt(m, m->emb_s1); /* the sibling embedding is a row of emb_s1 */
    if (ge) {
        if (tr_linear_dx(g->dn, g->dq, R, m, &m->dep_q, false)) return -1;
        for (int r = 0; r < R; r++) {
            float *o = ge + (size_t)a->sib[r] * d;
            const float *gr = g->dn + (size_t)r * d;
            for (int i = 0; i < d; i++)
                o[i] += gr[i];
        }
    }
    return 0;
}

int tr_backward(kr_train_model *m, tr_acts *a, kr_error *err) {
    int d = m->pc.d_model, R = a->R, L = m->pc.n_layers;
    grads_buf g = {0};
    tr_linear_dw_forget(m); /* this step's activations, not the last one's */
    if (bufs_alloc(&g, m, R)) goto oom;
    if (s2_bwd(m, a, &g) || tr_linear_dw(a->logit1, a->h, R, m, &m->proj_s1) ||
        tr_linear_dx(g.dh, a->logit1, R, m, &m->proj_s1, true))
        goto oom;
    tr_rmsnorm_bwd(g.dx, gt(m, m->norm), g.dh, a->xf, a->invf, TW(m, m->norm), R, d, false);
    int lowest = m->depth ? L - m->depth : 0;
    for (int l = L - 1; l >= lowest; l--)
        if (block_bwd(m, a, l, &g)) goto oom;
    if (m->depth == 0 && embed_bwd(m, a, &g)) goto oom;
    tr_linear_dw_forget(m);
    return 0;
oom:
    return kr_fail_code(err, KR_E_NO_MEMORY, "training step: out of memory in the backward");
}
