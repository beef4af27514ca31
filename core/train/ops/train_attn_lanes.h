/* train_attn_lanes.h — attention's products and softmax in training, a template built once
 * per instruction set (core/kernels/lanes.h) on vectors vf of KR_W floats: blocks of RB rows x
 * CW columns, CW / KR_W registers a row. Included only by train_attn.c, after its item
 * geometry and attn_job. */

#define mk         KR_LN(mk)
#define scores     KR_LN(scores)
#define weighted   KR_LN(weighted)
#define weighted_t KR_LN(weighted_t)
#define attn_fwd   KR_LN(attn_fwd)
#define attn_bwd   KR_LN(attn_bwd)
#define fwd_pass   KR_LN(fwd_pass)
#define bwd_pass   KR_LN(bwd_pass)
#define attn_item  KR_LN(attn_item)

/* C[r][0..CW) = sum over k in [k0, k1) of A[r * ar + k * ak] * Bm[k * bk + 0..CW), r < RB:
 * RB x CW accumulators in registers of the level, each one chain in ascending k */
KR_INLINE void mk(float *C, size_t ldc, const float *A, size_t ar, size_t ak, const float *Bm,
                  size_t bk, int k0, int k1) {
    enum { NV = CW / KR_W };
    vf acc[RB][NV];
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = (vf){0};
    for (int k = k0; k < k1; k++) {
        vf b[NV];
        for (int v = 0; v < NV; v++)
            b[v] = KR_LOAD(Bm + (size_t)k * bk + v * KR_W);
        for (int r = 0; r < RB; r++) {
            vf a = KR_SPLAT(A[r * ar + (size_t)k * ak]);
            for (int v = 0; v < NV; v++)
                acc[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < RB; r++)
        __builtin_memcpy(C + r * ldc, acc[r], sizeof acc[r]);
}

/* S[i][t] = x_i · yt[., t] for the key blocks up to the causal edge of each row block
 * (x [Tr][hp], yt [hp][Tp]); entries past a row's edge are left as computed */
KR_INLINE void scores(float *S, const float *x, const float *yt, const geom *g) {
    for (int i0 = 0; i0 < g->Tr; i0 += RB) {
        int tl = up(i0 + RB < g->T ? i0 + RB : g->T, CW);
        for (int t0 = 0; t0 < tl; t0 += CW)
            mk(S + (size_t)i0 * g->Tp + t0, g->Tp, x + (size_t)i0 * g->hp, g->hp, 1, yt + t0, g->Tp,
               0, g->hp);
    }
}

/* out rows i < T, head columns: sum over t <= the row block's edge of W[i][t] * y[t] (W
 * [Tr][Tp] zero past each row's edge, y [Tr][hp]), written to dst rows d apart */
KR_INLINE void weighted(float *dst, int d, const float *W, const float *y, const geom *g) {
    float blk[RB * CW];
    for (int i0 = 0; i0 < g->Tr; i0 += RB) {
        int kl = i0 + RB < g->T ? i0 + RB : g->T;
        for (int c0 = 0; c0 < g->hp; c0 += CW) {
            mk(blk, CW, W + (size_t)i0 * g->Tp, g->Tp, 1, y + c0, g->hp, 0, kl);
            int n = g->hd - c0 < CW ? g->hd - c0 : CW;
            for (int r = 0; r < RB && i0 + r < g->T; r++)
                memcpy(dst + (size_t)(i0 + r) * d + c0, blk + r * CW, (size_t)n * sizeof(float));
        }
    }
}

/* the transposed form: dst rows t < T, sum over i >= the block's first row of W[i][t] * y[i] */
KR_INLINE void weighted_t(float *dst, int d, const float *W, const float *y, const geom *g) {
    float blk[RB * CW];
    for (int t0 = 0; t0 < g->Tr; t0 += RB)
        for (int c0 = 0; c0 < g->hp; c0 += CW) {
            mk(blk, CW, W + t0, 1, g->Tp, y + c0, g->hp, t0, g->T);
            int n = g->hd - c0 < CW ? g->hd - c0 : CW;
            for (int r = 0; r < RB && t0 + r < g->T; r++)
                memcpy(dst + (size_t)(t0 + r) * d + c0, blk + r * CW, (size_t)n * sizeof(float));
        }
}

/* window b, head h: P = softmax(q k^T / sqrt(hd), causal), out = drop(P) v */
KR_INLINE void fwd_pass(const attn_job *j, int item, const geom *g, size_t base) {
    const tr_attn_shape *s = j->s;
    int T = g->T, d = s->d;
    float scale = 1.0f / sqrtf((float)g->hd);
    gather(g->a, j->q + base, g, d);
    gather_t(g->tr, j->k + base, g, d);
    gather(g->b, j->v + base, g, d);
    scores(g->s1, g->a, g->tr, g);
    float *P = j->P + (size_t)item * T * T;
    memset(g->s2, 0, (size_t)g->Tr * g->Tp * sizeof(float));
    for (int i = 0; i < T; i++) {
        float *si = g->s1 + (size_t)i * g->Tp, *pi = P + (size_t)i * T,
              *wi = g->s2 + (size_t)i * g->Tp;
        float mx = -INFINITY;
        for (int t = 0; t <= i; t++) {
            pi[t] = si[t] * scale;
            if (pi[t] > mx) mx = pi[t];
        }
        float sum = 0.0f;
        for (int t = 0; t <= i; t++) {
            pi[t] = expf(pi[t] - mx);
            sum += pi[t];
        }
        for (int t = 0; t <= i; t++) {
            pi[t] /= sum;
            wi[t] = s->p_drop > 0.0f
                        ? pi[t] * tr_drop(s->key, ((size_t)item * T + i) * T + t, s->p_drop)
                        : pi[t];
        }
        for (int t = i + 1; t < T; t++)
            pi[t] = 0.0f;
    }
    weighted(j->out + base, d, g->s2, g->b, g);
}

/* window b, head h: the gradients of q, k, v of its columns (disjoint from other items'):
 * dP = dout v^T, dS = P (dP - rowsum(P dP)) / sqrt(hd) (dropout's mask on dP and on P's use
 * in dv), dq = dS k, dk = dS^T q, dv = drop(P)^T dout */
KR_INLINE void bwd_pass(const attn_job *j, int item, const geom *g, size_t base) {
    const tr_attn_shape *s = j->s;
    int T = g->T, d = s->d;
    float scale = 1.0f / sqrtf((float)g->hd);
    const float *P = j->P + (size_t)item * T * T;
    gather(g->a, j->dout + base, g, d);
    gather_t(g->tr, j->v + base, g, d);
    scores(g->s1, g->a, g->tr, g); /* dP */
    size_t tt = (size_t)g->Tr * g->Tp;
    memset(g->s2, 0, 2 * tt * sizeof(float)); /* dS and drop(P): zero past each row's edge */
    for (int i = 0; i < T; i++) {
        const float *pi = P + (size_t)i * T;
        float *dpi = g->s1 + (size_t)i * g->Tp, *dsi = g->s2 + (size_t)i * g->Tp,
              *pmi = g->s3 + (size_t)i * g->Tp, dot = 0.0f;
        for (int t = 0; t <= i; t++) {
            float m = s->p_drop > 0.0f ? tr_drop(s->key, ((size_t)item * T + i) * T + t, s->p_drop)
                                       : 1.0f;
            pmi[t] = pi[t] * m;
            dpi[t] *= m;
            dot += pi[t] * dpi[t];
        }
        for (int t = 0; t <= i; t++)
            dsi[t] = pi[t] * (dpi[t] - dot) * scale;
    }
    gather(g->b, j->k + base, g, d);
    weighted(j->dq + base, d, g->s2, g->b, g);
    gather(g->c, j->q + base, g, d);
    weighted_t(j->dk + base, d, g->s2, g->c, g);
    weighted_t(j->dv + base, d, g->s3, g->a, g);
}

/* item = window b, head h: its head's columns from base in the [B T][d] rows, its blocks on
 * the worker's scratch; then the pass */
KR_INLINE void attn_item(void *ctx, int item, int worker, bool backward) {
    const attn_job *j = ctx;
    const tr_attn_shape *s = j->s;
    int T = s->T, d = s->d, hd = d / s->H, b = item / s->H, h = item % s->H;
    geom g;
    geom_init(&g, T, hd, j->tmp + (size_t)worker * j->per);
    size_t base = (size_t)b * T * d + (size_t)h * hd;
    if (backward)
        bwd_pass(j, item, &g, base);
    else
        fwd_pass(j, item, &g, base);
}

KR_LEVEL_FN static void attn_fwd(void *ctx, int item, int worker) {
    attn_item(ctx, item, worker, false);
}

KR_LEVEL_FN static void attn_bwd(void *ctx, int item, int worker) {
    attn_item(ctx, item, worker, true);
}

#undef attn_item
#undef bwd_pass
#undef fwd_pass
#undef attn_bwd
#undef attn_fwd
#undef weighted_t
#undef weighted
#undef scores
#undef mk
