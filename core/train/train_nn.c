/* train_nn.c — the row-wise parts of training and their gradients: RMSNorm, RoPE at the
 * window's positions, causal attention (upstream's training runs the dependency layer's
 * cross-attention causally too, its query and keys rotated at positions 0..T-1), dropout
 * masks drawn from a counter (no mask stored: the backward draws the same ones). */
#include "train_impl.h"

#include "nn.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t tr_mix(uint64_t a, uint64_t b) {
    uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float tr_drop(uint64_t key, uint64_t i, float p) {
    double u = (double)(tr_mix(key, i) >> 11) * (1.0 / 9007199254740992.0);
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

void tr_drop_apply(float *x, size_t n, uint64_t key, float p) {
    if (p <= 0.0f) return;
    for (size_t i = 0; i < n; i++)
        x[i] *= tr_drop(key, i, p);
}

#define SWIGLU_CHUNK 16384

typedef struct {
    float *a, *b; /* forward: gg; backward: d1 (in: the gate's gradient), d3 */
    const float *h1, *h3;
    size_t n;
} swiglu_job;

static void swiglu_fwd_chunk(void *ctx, int c, int worker) {
    (void)worker;
    const swiglu_job *j = ctx;
    size_t k1 = ((size_t)c + 1) * SWIGLU_CHUNK < j->n ? ((size_t)c + 1) * SWIGLU_CHUNK : j->n;
    for (size_t i = (size_t)c * SWIGLU_CHUNK; i < k1; i++) {
        float h = j->h1[i];
        j->a[i] = h / (1.0f + expf(-h)) * j->h3[i];
    }
}

static void swiglu_bwd_chunk(void *ctx, int c, int worker) {
    (void)worker;
    const swiglu_job *j = ctx;
    size_t k1 = ((size_t)c + 1) * SWIGLU_CHUNK < j->n ? ((size_t)c + 1) * SWIGLU_CHUNK : j->n;
    for (size_t i = (size_t)c * SWIGLU_CHUNK; i < k1; i++) {
        float h = j->h1[i], sg = 1.0f / (1.0f + expf(-h)), dg = j->a[i];
        j->b[i] = dg * (h * sg);
        j->a[i] = dg * j->h3[i] * (sg * (1.0f + h * (1.0f - sg)));
    }
}

/* elementwise, so chunks on any thread give the same bits */
void tr_swiglu_fwd(float *gg, const float *h1, const float *h3, size_t n) {
    swiglu_job j = {gg, NULL, h1, h3, n};
    kr_parallel_for((int)((n + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK), swiglu_fwd_chunk, &j);
}

void tr_swiglu_bwd(float *d1, float *d3, const float *h1, const float *h3, size_t n) {
    swiglu_job j = {d1, d3, h1, h3, n};
    kr_parallel_for((int)((n + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK), swiglu_bwd_chunk, &j);
}

void tr_rmsnorm_fwd(float *y, float *inv, const float *x, const float *w, int R, int d) {
    kr_rmsnorm(y, x, w, R, d);
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * d;
        double ss = 0.0;
        for (int i = 0; i < d; i++)
            ss += (double)xr[i] * xr[i];
        inv[r] = (float)(1.0 / sqrt(ss / d + 1e-5));
    }
}

void tr_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *inv,
                    const float *w, int R, int d, bool add) {
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * d, *gr = dy + (size_t)r * d;
        float *o = dx + (size_t)r * d, s = inv[r];
        double dot = 0.0; /* sum of w dy x */
        for (int i = 0; i < d; i++) {
            dot += (double)w[i] * gr[i] * xr[i];
            if (dw) dw[i] += gr[i] * xr[i] * s;
        }
        float c = (float)(dot * s * s * s / d);
        for (int i = 0; i < d; i++) {
            float v = s * w[i] * gr[i] - xr[i] * c;
            o[i] = add ? o[i] + v : v;
        }
    }
}

int tr_rope(float *x, int B, int T, int d, int hd, const float *inv_freq, bool inverse) {
    int half = hd / 2, H = d / hd;
    float *cs = malloc((size_t)T * half * 2 * sizeof(float));
    if (!cs) return -1;
    kr_rope_table(cs, T, hd, inv_freq);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = x + ((size_t)b * T + t) * d;
            for (int h = 0; h < H; h++) {
                float *xh = row + (size_t)h * hd;
                for (int j = 0; j < half; j++) {
                    float c = cs[((size_t)t * half + j) * 2],
                          s = cs[((size_t)t * half + j) * 2 + 1];
                    float a = xh[j], e = xh[j + half];
                    if (inverse) s = -s;
                    xh[j] = a * c - e * s;
                    xh[j + half] = e * c + a * s;
                }
            }
        }
    free(cs);
    return 0;
}

/* a · b over n in eight fixed lanes, summed in a fixed order: the same bits whether the
 * compiler runs the lanes as a vector or one by one */
__attribute__((always_inline)) static inline float dot8(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int n8 = n / 8 * 8;
    for (int c = 0; c < n8; c += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[c + l] * b[c + l];
    for (int c = n8; c < n; c++)
        acc[c - n8] += a[c] * b[c];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

typedef struct {
    const tr_attn_shape *s;
    float *out, *P, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
    float *tmp; /* per worker: 2 T^2 + T floats */
} attn_job;

/* window b, head h: P = softmax(q k^T / sqrt(hd), causal), out = drop(P) v */
__attribute__((always_inline)) static inline void attn_fwd_body(const attn_job *j, int item) {
    const tr_attn_shape *s = j->s;
    int T = s->T, d = s->d, hd = d / s->H, b = item / s->H, h = item % s->H;
    float scale = 1.0f / sqrtf((float)hd);
    float *P = j->P + (size_t)item * T * T;
    size_t base = (size_t)b * T * d + (size_t)h * hd;
    for (int i = 0; i < T; i++) {
        const float *qi = j->q + base + (size_t)i * d;
        float *pi = P + (size_t)i * T, mx = -INFINITY;
        for (int t = 0; t <= i; t++) {
            pi[t] = dot8(qi, j->k + base + (size_t)t * d, hd) * scale;
            if (pi[t] > mx) mx = pi[t];
        }
        float sum = 0.0f;
        for (int t = 0; t <= i; t++) {
            pi[t] = expf(pi[t] - mx);
            sum += pi[t];
        }
        for (int t = 0; t <= i; t++)
            pi[t] /= sum;
        for (int t = i + 1; t < T; t++)
            pi[t] = 0.0f;
        float *oi = j->out + base + (size_t)i * d;
        memset(oi, 0, (size_t)hd * sizeof(float));
        for (int t = 0; t <= i; t++) {
            float pt = pi[t];
            if (s->p_drop > 0.0f) pt *= tr_drop(s->key, ((size_t)item * T + i) * T + t, s->p_drop);
            const float *vt = j->v + base + (size_t)t * d;
            for (int c = 0; c < hd; c++)
                oi[c] += pt * vt[c];
        }
    }
}

/* window b, head h: the gradients of q, k, v of its columns (disjoint from other items').
 * First row by row: the score gradients ds[i][t] and the dropped weights pm[i][t] kept, dq[i]
 * summed over t; then key by key: dk[t] and dv[t] summed over i in a row of L1 each, in the
 * same order (i ascending from 0) as a row-by-row pass would add them, so the same bits. */
__attribute__((always_inline)) static inline void attn_bwd_body(const attn_job *j, int item,
                                                                int worker) {
    const tr_attn_shape *s = j->s;
    int T = s->T, d = s->d, hd = d / s->H, b = item / s->H, h = item % s->H;
    float scale = 1.0f / sqrtf((float)hd);
    float *dp = j->tmp + (size_t)worker * ((size_t)2 * T * T + T), *ds = dp + T, *pm = ds + T * T;
    const float *P = j->P + (size_t)item * T * T;
    size_t base = (size_t)b * T * d + (size_t)h * hd;
    for (int i = 0; i < T; i++) {
        const float *pi = P + (size_t)i * T, *go = j->dout + base + (size_t)i * d;
        float *dsi = ds + (size_t)i * T, *pmi = pm + (size_t)i * T, dot = 0.0f;
        for (int t = 0; t <= i; t++) {
            float m = s->p_drop > 0.0f ? tr_drop(s->key, ((size_t)item * T + i) * T + t, s->p_drop)
                                       : 1.0f;
            pmi[t] = pi[t] * m;
            dp[t] = dot8(go, j->v + base + (size_t)t * d, hd) * m;
            dot += pi[t] * dp[t];
        }
        float *dqi = j->dq + base + (size_t)i * d;
        memset(dqi, 0, (size_t)hd * sizeof(float));
        for (int t = 0; t <= i; t++) {
            dsi[t] = pi[t] * (dp[t] - dot) * scale;
            const float *kt = j->k + base + (size_t)t * d;
            for (int c = 0; c < hd; c++)
                dqi[c] += dsi[t] * kt[c];
        }
    }
    for (int t = 0; t < T; t++) {
        float *dkt = j->dk + base + (size_t)t * d, *dvt = j->dv + base + (size_t)t * d;
        memset(dkt, 0, (size_t)hd * sizeof(float));
        memset(dvt, 0, (size_t)hd * sizeof(float));
        for (int i = t; i < T; i++) {
            const float *qi = j->q + base + (size_t)i * d, *go = j->dout + base + (size_t)i * d;
            float dsit = ds[(size_t)i * T + t], pmit = pm[(size_t)i * T + t];
            for (int c = 0; c < hd; c++) {
                dvt[c] += pmit * go[c];
                dkt[c] += dsit * qi[c];
            }
        }
    }
}

/* a build of each body per instruction set (the compiler vectorises its loops at the
 * level's width; without contraction every element's operations are the same, so the bits
 * are too), chosen by kr_simd_level() as the kernels choose theirs */
#define ATTN_BUILDS(suffix, attr)                                                                  \
    attr static void attn_fwd_##suffix(void *ctx, int item, int worker) {                          \
        (void)worker;                                                                              \
        attn_fwd_body(ctx, item);                                                                  \
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

void tr_attn_fwd(float *out, float *P, const float *q, const float *k, const float *v,
                 const tr_attn_shape *s) {
    attn_job j = {.s = s, .out = out, .P = P, .q = q, .k = k, .v = v};
    kr_parallel_for(s->B * s->H, ATTN_PICK(fwd), &j);
}

int tr_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *P, const float *q,
                const float *k, const float *v, const tr_attn_shape *s) {
    size_t per = (size_t)2 * s->T * s->T + s->T; /* a worker's dp, ds and pm */
    float *tmp = malloc((size_t)kr_parallel_threads() * per * sizeof(float));
    if (!tmp) return -1;
    attn_job j = {.s = s,
                  .P = (float *)P,
                  .q = q,
                  .k = k,
                  .v = v,
                  .dout = dout,
                  .dq = dq,
                  .dk = dk,
                  .dv = dv,
                  .tmp = tmp};
    kr_parallel_for(s->B * s->H, ATTN_PICK(bwd), &j);
    free(tmp);
    return 0;
}
