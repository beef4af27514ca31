/* train_attn.c — causal attention in training and its gradient, one window and head an item.
 * Each item gathers its head's columns into zero-padded blocks on the worker's scratch and
 * runs every product (scores, the weights times v, and the five products of the backward)
 * as blocks of 8 rows x 16 columns: each element one chain of multiply-then-add over the
 * reduction index in ascending order, vectorised across its 16 columns. The blocks and the
 * padding depend on the shape alone, so the bits depend neither on the thread count nor on
 * the SIMD level (without contraction every level performs each element's operations in the
 * same order). */
#include "train_impl.h"

#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RB 8  /* rows of a block */
#define CW 16 /* columns of a block */

/* rounded up to a multiple of m */
static int up(int n, int m) {
    return (n + m - 1) / m * m;
}

/* C[r][0..CW) = sum over k in [k0, k1) of A[r * ar + k * ak] * Bm[k * bk + 0..CW), r < RB */
__attribute__((always_inline)) static inline void mk(float *C, size_t ldc, const float *A,
                                                     size_t ar, size_t ak, const float *Bm,
                                                     size_t bk, int k0, int k1) {
    float acc[RB][CW];
#pragma GCC unroll 8
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 16
        for (int l = 0; l < CW; l++)
            acc[r][l] = 0.0f;
    for (int k = k0; k < k1; k++) {
        const float *b = Bm + (size_t)k * bk;
#pragma GCC unroll 8
        for (int r = 0; r < RB; r++) {
            float a = A[r * ar + (size_t)k * ak];
#pragma GCC unroll 16
            for (int l = 0; l < CW; l++)
                acc[r][l] += a * b[l];
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RB; r++)
        memcpy(C + r * ldc, acc[r], sizeof acc[r]);
}

/* an item's shape and its scratch: rows padded to RB (Tr), key columns to CW (Tp), head
 * columns to CW (hp) */
typedef struct {
    int T, Tr, Tp, hd, hp;
    float *a, *b, *c, *tr, *s1, *s2, *s3; /* [Tr][hp] x 3, [hp][Tp], [Tr][Tp] x 3 */
} geom;

static size_t geom_floats(int T, int hd) {
    size_t Tr = (size_t)up(T, RB), Tp = (size_t)up(T, CW), hp = (size_t)up(hd, CW);
    return 3 * Tr * hp + hp * Tp + 3 * Tr * Tp;
}

static void geom_init(geom *g, int T, int hd, float *mem) {
    g->T = T, g->Tr = up(T, RB), g->Tp = up(T, CW), g->hd = hd, g->hp = up(hd, CW);
    size_t th = (size_t)g->Tr * g->hp, tt = (size_t)g->Tr * g->Tp;
    g->a = mem, g->b = g->a + th, g->c = g->b + th, g->tr = g->c + th;
    g->s1 = g->tr + (size_t)g->hp * g->Tp, g->s2 = g->s1 + tt, g->s3 = g->s2 + tt;
}

/* dst[Tr][hp] = the head's columns of src (rows d apart), zero-padded */
static void gather(float *dst, const float *src, const geom *g, int d) {
    memset(dst, 0, (size_t)g->Tr * g->hp * sizeof(float));
    for (int i = 0; i < g->T; i++)
        memcpy(dst + (size_t)i * g->hp, src + (size_t)i * d, (size_t)g->hd * sizeof(float));
}

/* dst[hp][Tp] = the transpose of the head's columns of src, zero-padded */
static void gather_t(float *dst, const float *src, const geom *g, int d) {
    memset(dst, 0, (size_t)g->hp * g->Tp * sizeof(float));
    for (int i = 0; i < g->T; i++)
        for (int c = 0; c < g->hd; c++)
            dst[(size_t)c * g->Tp + i] = src[(size_t)i * d + c];
}

/* S[i][t] = x_i · yt[., t] for the key blocks up to the causal edge of each row block
 * (x [Tr][hp], yt [hp][Tp]); entries past a row's edge are left as computed */
__attribute__((always_inline)) static inline void scores(float *S, const float *x, const float *yt,
                                                         const geom *g) {
    for (int i0 = 0; i0 < g->Tr; i0 += RB) {
        int tl = up(i0 + RB < g->T ? i0 + RB : g->T, CW);
        for (int t0 = 0; t0 < tl; t0 += CW)
            mk(S + (size_t)i0 * g->Tp + t0, g->Tp, x + (size_t)i0 * g->hp, g->hp, 1, yt + t0, g->Tp,
               0, g->hp);
    }
}

/* out rows i < T, head columns: sum over t <= the row block's edge of W[i][t] * y[t] (W
 * [Tr][Tp] zero past each row's edge, y [Tr][hp]), written to dst rows d apart */
__attribute__((always_inline)) static inline void weighted(float *dst, int d, const float *W,
                                                           const float *y, const geom *g) {
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
__attribute__((always_inline)) static inline void weighted_t(float *dst, int d, const float *W,
                                                             const float *y, const geom *g) {
    float blk[RB * CW];
    for (int t0 = 0; t0 < g->Tr; t0 += RB)
        for (int c0 = 0; c0 < g->hp; c0 += CW) {
            mk(blk, CW, W + t0, 1, g->Tp, y + c0, g->hp, t0, g->T);
            int n = g->hd - c0 < CW ? g->hd - c0 : CW;
            for (int r = 0; r < RB && t0 + r < g->T; r++)
                memcpy(dst + (size_t)(t0 + r) * d + c0, blk + r * CW, (size_t)n * sizeof(float));
        }
}

typedef struct {
    const tr_attn_shape *s;
    float *out, *P, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
    float *tmp; /* per worker: geom_floats */
    size_t per;
} attn_job;

/* window b, head h: P = softmax(q k^T / sqrt(hd), causal), out = drop(P) v */
__attribute__((always_inline)) static inline void attn_fwd_body(const attn_job *j, int item,
                                                                int worker) {
    const tr_attn_shape *s = j->s;
    int T = s->T, d = s->d, hd = d / s->H, b = item / s->H, h = item % s->H;
    float scale = 1.0f / sqrtf((float)hd);
    geom g;
    geom_init(&g, T, hd, j->tmp + (size_t)worker * j->per);
    size_t base = (size_t)b * T * d + (size_t)h * hd;
    gather(g.a, j->q + base, &g, d);
    gather_t(g.tr, j->k + base, &g, d);
    gather(g.b, j->v + base, &g, d);
    scores(g.s1, g.a, g.tr, &g);
    float *P = j->P + (size_t)item * T * T;
    memset(g.s2, 0, (size_t)g.Tr * g.Tp * sizeof(float));
    for (int i = 0; i < T; i++) {
        float *si = g.s1 + (size_t)i * g.Tp, *pi = P + (size_t)i * T, *wi = g.s2 + (size_t)i * g.Tp;
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
    weighted(j->out + base, d, g.s2, g.b, &g);
}

/* window b, head h: the gradients of q, k, v of its columns (disjoint from other items'):
 * dP = dout v^T, dS = P (dP - rowsum(P dP)) / sqrt(hd) (dropout's mask on dP and on P's use
 * in dv), dq = dS k, dk = dS^T q, dv = drop(P)^T dout */
__attribute__((always_inline)) static inline void attn_bwd_body(const attn_job *j, int item,
                                                                int worker) {
    const tr_attn_shape *s = j->s;
    int T = s->T, d = s->d, hd = d / s->H, b = item / s->H, h = item % s->H;
    float scale = 1.0f / sqrtf((float)hd);
    geom g;
    geom_init(&g, T, hd, j->tmp + (size_t)worker * j->per);
    size_t base = (size_t)b * T * d + (size_t)h * hd;
    const float *P = j->P + (size_t)item * T * T;
    gather(g.a, j->dout + base, &g, d);
    gather_t(g.tr, j->v + base, &g, d);
    scores(g.s1, g.a, g.tr, &g); /* dP */
    size_t tt = (size_t)g.Tr * g.Tp;
    memset(g.s2, 0, 2 * tt * sizeof(float)); /* dS and drop(P): zero past each row's edge */
    for (int i = 0; i < T; i++) {
        const float *pi = P + (size_t)i * T;
        float *dpi = g.s1 + (size_t)i * g.Tp, *dsi = g.s2 + (size_t)i * g.Tp,
              *pmi = g.s3 + (size_t)i * g.Tp, dot = 0.0f;
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
    gather(g.b, j->k + base, &g, d);
    weighted(j->dq + base, d, g.s2, g.b, &g);
    gather(g.c, j->q + base, &g, d);
    weighted_t(j->dk + base, d, g.s2, g.c, &g);
    weighted_t(j->dv + base, d, g.s3, g.a, &g);
}

/* a build of each body per instruction set (the compiler vectorises its blocks at the
 * level's width), chosen by kr_simd_level() as the kernels choose theirs */
#define ATTN_BUILDS(suffix, attr)                                                                  \
    attr static void attn_fwd_##suffix(void *ctx, int item, int worker) {                          \
        attn_fwd_body(ctx, item, worker);                                                          \
    }                                                                                              \
    attr static void attn_bwd_##suffix(void *ctx, int item, int worker) {                          \
        attn_bwd_body(ctx, item, worker);                                                          \
    }
ATTN_BUILDS(generic, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
ATTN_BUILDS(avx2, __attribute__((target("avx2"))))
ATTN_BUILDS(avx512, __attribute__((target("avx512f"))))
#define ATTN_PICK(dir)                                                                             \
    (kr_simd_level() == KR_SIMD_AVX512 ? attn_##dir##_avx512                                       \
     : kr_simd_level() == KR_SIMD_AVX2 ? attn_##dir##_avx2                                         \
                                       : attn_##dir##_generic)
#else
#define ATTN_PICK(dir) attn_##dir##_generic
#endif

/* the job's scratch: a worker's blocks each */
static int attn_run(attn_job *j, bool backward) {
    j->per = geom_floats(j->s->T, j->s->d / j->s->H);
    j->tmp = malloc((size_t)kr_parallel_threads() * j->per * sizeof(float));
    if (!j->tmp) return -1;
    if (backward)
        kr_parallel_for(j->s->B * j->s->H, ATTN_PICK(bwd), j);
    else
        kr_parallel_for(j->s->B * j->s->H, ATTN_PICK(fwd), j);
    free(j->tmp);
    return 0;
}

int tr_attn_fwd(float *out, float *P, const float *q, const float *k, const float *v,
                const tr_attn_shape *s) {
    attn_job j = {.s = s, .out = out, .P = P, .q = q, .k = k, .v = v};
    return attn_run(&j, false);
}

int tr_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *P, const float *q,
                const float *k, const float *v, const tr_attn_shape *s) {
    attn_job j = {.s = s,
                  .P = (float *)P,
                  .q = q,
                  .k = k,
                  .v = v,
                  .dout = dout,
                  .dq = dq,
                  .dk = dk,
                  .dv = dv};
    return attn_run(&j, true);
}
