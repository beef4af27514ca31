/* train_nn.c — the row-wise parts of training and their gradients: RMSNorm, RoPE at the
 * window's positions (upstream's training runs the dependency layer's cross-attention
 * causally too, its query and keys rotated at positions 0..T-1), SwiGLU, dropout masks drawn
 * from a counter (no mask stored: the backward draws the same ones); attention is
 * train_attn.c's. */
#include "train_ops.h"

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
#define SILU_RUN     256 /* elements of e^-h on the stack at a time */

typedef struct {
    float *a, *b; /* forward: gg; backward: d1 (in: the gate's gradient), d3 */
    const float *h1, *h3;
    size_t n;
} swiglu_job;

#define KR_LANES_TEMPLATE "train_nn_lanes.h"
#include "lanes.h"

KR_DISPATCH(swiglu_fwd_chunk, (void *ctx, int c, int worker), (ctx, c, worker))
KR_DISPATCH(swiglu_bwd_chunk, (void *ctx, int c, int worker), (ctx, c, worker))

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
