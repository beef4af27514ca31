/* test_layers.c — the building blocks (RMSNorm, RoPE, attention, linear layers, the
 * transformer block, time stamps, the tokenizer's bit packing, normalisation) against small
 * values computed by hand or by an independent double-precision reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "forecast_impl.h" /* kr_normalise */
#include "kronos.h"
#include "model.h"
#include "nn.h"
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b, tol) near_((double)(a), (double)(b), (tol), #a, __FILE__, __LINE__)

static void near_(double a, double b, double tol, const char *expr, const char *file, int line) {
    if (!(fabs(a - b) <= tol)) {
        print_error("%s = %.9g, expected %.9g (tolerance %.3g)\n", expr, a, b, tol);
        _fail(file, line);
    }
}

static void assert_contains(const char *msg, const char *word) {
    if (!strstr(msg, word)) fail_msg("message \"%s\" does not contain \"%s\"", msg, word);
}

/* ---- RMSNorm -------------------------------------------------------------------------- */

static void test_rmsnorm(void **state) {
    (void)state;
    /* row 0: mean(x²) = (1 + 4 + 9 + 16) / 4 = 7.5, scale = 1 / sqrt(7.50001) = 0.36514813
     * row 1: mean(x²) = 4 / 4 = 1, scale = 1 / sqrt(1.00001) = 0.99999500 */
    const float x[8] = {1, 2, 3, 4, -2, 0, 0, 0};
    const float w[4] = {1, 1, 2, 0.5f};
    float y[8];
    kr_rmsnorm(y, x, w, 2, 4);
    const double want[8] = {0.36514813, 0.73029626, 2.19088877, 0.73029626, -1.99999000, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        NEAR(y[i], want[i], 1e-6);
    /* in place works too (the block does not need it, but nothing forbids it) */
    float z[4] = {1, 2, 3, 4};
    kr_rmsnorm(z, z, w, 1, 4);
    for (int i = 0; i < 4; i++)
        NEAR(z[i], want[i], 1e-6);
}

/* Rows normed together (groups of eight, a last group of 1-7 with its last row repeated)
 * get the bits of each row normed alone, in place or not, for every count up to three
 * groups. */
static void test_rmsnorm_rows_alone(void **state) {
    (void)state;
    enum { D = 67, MAX_ROWS = 24 };
    float x[MAX_ROWS * D], w[D], y[MAX_ROWS * D], one[D], inplace[MAX_ROWS * D];
    for (int i = 0; i < MAX_ROWS * D; i++)
        x[i] = (float)((i * 7919) % 2003) / 997.0f - 1.0f;
    for (int i = 0; i < D; i++)
        w[i] = 0.5f + (float)i / D;
    for (int rows = 1; rows <= MAX_ROWS; rows++) {
        kr_rmsnorm(y, x, w, rows, D);
        memcpy(inplace, x, sizeof(float) * rows * D);
        kr_rmsnorm(inplace, inplace, w, rows, D);
        for (int r = 0; r < rows; r++) {
            kr_rmsnorm(one, x + r * D, w, 1, D);
            if (memcmp(one, y + r * D, sizeof one) || memcmp(one, inplace + r * D, sizeof one))
                fail_msg("%d rows: row %d differs from the row normed alone", rows, r);
        }
    }
}

/* ---- RoPE ----------------------------------------------------------------------------- */

static void test_rope_halves(void **state) {
    (void)state;
    const float inv_freq[2] = {1.0f, 0.01f};
    /* position 1: c0 = cos 1, s0 = sin 1, c1 = cos 0.01, s1 = sin 0.01;
     * (x0 c0 - x2 s0, x1 c1 - x3 s1, x2 c0 + x0 s0, x3 c1 + x1 s1) with x = [1, 2, 3, 4] */
    const double want1[4] = {-1.98411065, 1.95990067, 2.46237790, 4.01979967};
    /* second head [5, 6, 7, 8] with the same angles */
    const double want2[4] = {-3.18878536, 5.91970134, 7.98947107, 8.05959900};

    /* position 0 is the identity */
    float x0[4] = {1, 2, 3, 4};
    kr_rope(x0, 1, 4, 1, 4, 0, inv_freq);
    for (int i = 0; i < 4; i++)
        NEAR(x0[i], i + 1, 0);

    /* one row at position 1 (T = 1 from pos0 = 1) */
    float x1[4] = {1, 2, 3, 4};
    kr_rope(x1, 1, 4, 1, 4, 1, inv_freq);
    for (int i = 0; i < 4; i++)
        NEAR(x1[i], want1[i], 1e-6);

    /* two rows from pos0 = 0: row 0 unchanged, row 1 rotated at 1 */
    float x2[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    kr_rope(x2, 2, 4, 1, 4, 0, inv_freq);
    for (int i = 0; i < 4; i++) {
        NEAR(x2[i], i + 1, 0);
        NEAR(x2[4 + i], want1[i], 1e-6);
    }

    /* two heads rotate independently; columns past the heads (stride 10) are untouched */
    float x3[10] = {1, 2, 3, 4, 5, 6, 7, 8, 42, -42};
    kr_rope(x3, 1, 10, 2, 4, 1, inv_freq);
    for (int i = 0; i < 4; i++) {
        NEAR(x3[i], want1[i], 1e-6);
        NEAR(x3[4 + i], want2[i], 1e-6);
    }
    NEAR(x3[8], 42, 0);
    NEAR(x3[9], -42, 0);
}

static void test_rope_pos0(void **state) {
    (void)state;
    const float inv_freq[2] = {1.0f, 0.01f};
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    kr_rope(x, 2, 4, 1, 4, 5, inv_freq);
    for (int r = 0; r < 2; r++) {
        double p = 5 + r;
        double c0 = cos(p), s0 = sin(p), c1 = cos(p * 0.01), s1 = sin(p * 0.01);
        const double want[4] = {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1};
        for (int i = 0; i < 4; i++)
            NEAR(x[r * 4 + i], want[i], 2e-6);
    }
    /* position 5: cos 5 = 0.28366219, sin 5 = -0.95892427 → x0' = 0.28366 + 2.87677 */
    NEAR(x[0], 3.16043500, 2e-6);
}

/* ---- attention ------------------------------------------------------------------------ */

/* A cache in the documented layout: blocks of `block_len` positions, each holding per layer
 * the keys transposed ([d][block_len]) then block_len V rows of d floats. Filled here by
 * hand (not through nn.h's accessors) so that the layout itself is checked. */
typedef struct {
    float *blk[8];
    kr_kv_view view;
} test_cache;

static void cache_init(test_cache *c, int n_blocks, int block_len, int n_layers, int d) {
    memset(c, 0, sizeof *c);
    for (int b = 0; b < n_blocks; b++) {
        c->blk[b] = calloc((size_t)n_layers * 2 * block_len * d, sizeof(float));
        assert_non_null(c->blk[b]);
    }
    c->view = (kr_kv_view){c->blk, block_len, d, 0};
}

static void cache_put(test_cache *c, int layer, int pos, const float *k, const float *v) {
    int L = c->view.block_len, d = c->view.d;
    float *base = c->blk[pos / L] + (size_t)layer * 2 * L * d;
    for (int i = 0; i < d; i++)
        base[(size_t)i * L + pos % L] = k[i];
    memcpy(base + (size_t)(L + pos % L) * d, v, (size_t)d * sizeof(float));
}

static void cache_free(test_cache *c) {
    for (int b = 0; b < 8; b++)
        free(c->blk[b]);
}

/* one head, hd = d = 4 (scale 1/2); keys are unit vectors e0, e1, e2 */
static const float att_k[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
static const float att_v[12] = {1, 2, 3, 4, -1, 0, 1, 0, 0, 0, 0, 10};
/* q0 = 0 (uniform when it sees everything); q1·k = (2, 0, 0) → scores (1, 0, 0);
 * q2·k = (0, 2, 4) → scores (0, 1, 2) */
static const float att_q[12] = {0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 4, 0};

/* row 1 over keys 0..1: softmax(1, 0) = (e/(1+e), 1/(1+e)) = (0.73105858, 0.26894142) */
static const double att_r1[4] = {0.46211716, 1.46211716, 2.46211716, 2.92423431};
/* row 2 over keys 0..2: softmax(0, 1, 2) = (1, e, e²)/(1 + e + e²)
 * = (0.09003057, 0.24472847, 0.66524096) → 0.09003·v0 + 0.24473·v1 + 0.66524·v2 */
static const double att_r2[4] = {-0.15469790, 0.18006115, 0.51482019, 7.01253185};

static void fill_att_cache(test_cache *c, int block_len, int layer) {
    cache_init(c, (3 + block_len - 1) / block_len, block_len, 2, 4);
    const float junk[4] = {100, -100, 100, -100};
    for (int p = 0; p < 3; p++) {
        cache_put(c, layer, p, att_k + 4 * p, att_v + 4 * p);
        cache_put(c, 1 - layer, p, junk, junk); /* the other layer must not be read */
    }
}

static void test_attention_causal(void **state) {
    (void)state;
    const int block_lens[] = {3, 2, 1};
    for (int bl = 0; bl < 3; bl++)
        for (int layer = 0; layer < 2; layer++) {
            test_cache c;
            fill_att_cache(&c, block_lens[bl], layer);
            float out[4], scores[3];
            /* causal: query t sees keys 0..t. Row 0 sees only key 0: exactly v0 */
            kr_attend(out, att_q, &c.view, layer, 1, 1, scores);
            for (int i = 0; i < 4; i++)
                NEAR(out[i], att_v[i], 0);
            kr_attend(out, att_q + 4, &c.view, layer, 2, 1, scores);
            for (int i = 0; i < 4; i++)
                NEAR(out[i], att_r1[i], 1e-6);
            /* row 2 (also: one query at position 2 over a cache of 3 keys) */
            kr_attend(out, att_q + 8, &c.view, layer, 3, 1, scores);
            for (int i = 0; i < 4; i++)
                NEAR(out[i], att_r2[i], 1e-5);
            cache_free(&c);
        }
}

static void test_attention_all_keys(void **state) {
    (void)state;
    test_cache c;
    fill_att_cache(&c, 2, 0);
    float out[4], scores[3];
    /* q0 over all three keys: equal scores, the mean of v */
    kr_attend(out, att_q, &c.view, 0, 3, 1, scores);
    const double r0[4] = {0.0, 2.0 / 3, 4.0 / 3, 14.0 / 3};
    for (int i = 0; i < 4; i++)
        NEAR(out[i], r0[i], 1e-6);
    /* q1 over all three: scores (1, 0, 0) → (e, 1, 1)/(e + 2) = (0.57611688, 0.21194156, ...) */
    kr_attend(out, att_q + 4, &c.view, 0, 3, 1, scores);
    const double r1[4] = {0.36417533, 1.15223377, 1.94029221, 4.42388312};
    for (int i = 0; i < 4; i++)
        NEAR(out[i], r1[i], 1e-5);
    cache_free(&c);
}

static void test_attention_heads(void **state) {
    (void)state;
    /* d = 4, 2 heads of hd = 2 (scale 1/sqrt 2). Head 0: q = (sqrt2·ln3, 0), k0 = 0,
     * k1 = (1, 0) → scores (0, ln 3) → weights (1/4, 3/4). Head 1: q = 0 → (1/2, 1/2). */
    const float q[4] = {(float)(sqrt(2.0) * log(3.0)), 0, 0, 0};
    const float k[8] = {0, 0, 0, 0, 1, 0, 1, 1};
    const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    test_cache c;
    cache_init(&c, 1, 2, 1, 4);
    cache_put(&c, 0, 0, k, v);
    cache_put(&c, 0, 1, k + 4, v + 4);
    float out[4], scores[4]; /* n_heads * n_keys */
    kr_attend(out, q, &c.view, 0, 2, 2, scores);
    const double want[4] = {4, 5, 5, 6}; /* .25·(1,2) + .75·(5,6); .5·(3,4) + .5·(7,8) */
    for (int i = 0; i < 4; i++)
        NEAR(out[i], want[i], 1e-5);
    cache_free(&c);
}

/* ---- linear layers -------------------------------------------------------------------- */

static uint32_t lcg_state;
static float lcg(void) { /* uniform in [-1, 1) */
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)((lcg_state >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

static void test_linear_small(void **state) {
    (void)state;
    const float w[6] = {1, 2, 3, 4, 5, 6}; /* [2][3] */
    const float b[2] = {0.5f, -1};
    kr_linear nb = {.w = w, .out = 2, .in = 3}, wb = {.w = w, .b = b, .out = 2, .in = 3};
    /* T = 1: W·(1, 0, -1) = (1 - 3, 4 - 6) = (-2, -2) */
    const float x1[3] = {1, 0, -1};
    float y1[2];
    kr_linear_forward(y1, x1, 1, &nb);
    NEAR(y1[0], -2, 1e-6);
    NEAR(y1[1], -2, 1e-6);
    kr_linear_forward(y1, x1, 1, &wb);
    NEAR(y1[0], -1.5, 1e-6);
    NEAR(y1[1], -3, 1e-6);
    /* T = 3: rows (1,0,-1), (2,1,0), (0,0,1) → (-2,-2), (4,13), (3,6) */
    const float x3[9] = {1, 0, -1, 2, 1, 0, 0, 0, 1};
    const double want[6] = {-2, -2, 4, 13, 3, 6};
    float y3[6];
    kr_linear_forward(y3, x3, 3, &nb);
    for (int i = 0; i < 6; i++)
        NEAR(y3[i], want[i], 1e-6);
    kr_linear_forward(y3, x3, 3, &wb);
    for (int i = 0; i < 6; i++)
        NEAR(y3[i], want[i] + b[i % 2], 1e-6);
}

static void test_linear_vs_loops(void **state) {
    (void)state;
    enum { OUT = 5, IN = 7, T = 3 };
    float w[OUT * IN], b[OUT], x[T * IN], y[T * OUT];
    lcg_state = 7;
    for (int i = 0; i < OUT * IN; i++)
        w[i] = lcg();
    for (int i = 0; i < OUT; i++)
        b[i] = lcg();
    for (int i = 0; i < T * IN; i++)
        x[i] = lcg();
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        kr_linear l = {.w = w, .b = with_bias ? b : NULL, .out = OUT, .in = IN};
        for (int rows = 1; rows <= T; rows += T - 1) { /* 1: gemv, 3: gemm */
            memset(y, 0, sizeof y);
            kr_linear_forward(y, x, rows, &l);
            for (int t = 0; t < rows; t++)
                for (int o = 0; o < OUT; o++) {
                    double acc = with_bias ? b[o] : 0.0;
                    for (int i = 0; i < IN; i++)
                        acc += (double)x[t * IN + i] * w[o * IN + i];
                    NEAR(y[t * OUT + o], acc, 1e-5);
                }
        }
    }
}

/* ---- transformer block ------------------------------------------------------------------ */

enum { BD = 8, BH = 2, BHD = 4, BFF = 16, BT = 6 };

typedef struct {
    float norm1[BD], norm2[BD];
    float qw[BD * BD], qb[BD], kw[BD * BD], kb[BD], vw[BD * BD], vb[BD], ow[BD * BD], ob[BD];
    float w1[BFF * BD], w3[BFF * BD], w2[BD * BFF];
    float inv_freq[BHD / 2];
    float kv_shift[4 * BH];
    float x[BT * BD];
} block_data;

static void make_block(block_data *bd, kr_block *b, bool shift) {
    lcg_state = 12345;
    for (int i = 0; i < BD; i++)
        bd->norm1[i] = 1.0f + 0.5f * lcg();
    for (int i = 0; i < BD; i++)
        bd->norm2[i] = 1.0f + 0.5f * lcg();
    float *mats[] = {bd->qw, bd->kw, bd->vw, bd->ow};
    float *biases[] = {bd->qb, bd->kb, bd->vb, bd->ob};
    for (int m = 0; m < 4; m++) {
        for (int i = 0; i < BD * BD; i++)
            mats[m][i] = 0.5f * lcg();
        for (int i = 0; i < BD; i++)
            biases[m][i] = 0.2f * lcg();
    }
    for (int i = 0; i < BFF * BD; i++)
        bd->w1[i] = 0.4f * lcg();
    for (int i = 0; i < BFF * BD; i++)
        bd->w3[i] = 0.4f * lcg();
    for (int i = 0; i < BD * BFF; i++)
        bd->w2[i] = 0.3f * lcg();
    for (int j = 0; j < BHD / 2; j++)
        bd->inv_freq[j] = (float)pow(10000.0, -2.0 * j / BHD);
    for (int i = 0; i < BT * BD; i++)
        bd->x[i] = lcg();
    /* rows a0, a1, b0, b1 per head */
    const float ks[4 * BH] = {0.9f, 1.1f, 0.3f, -0.2f, 1.0f, 0.8f, -0.5f, 0.25f};
    memcpy(bd->kv_shift, ks, sizeof ks);
    *b = (kr_block){
        .d = BD,
        .n_heads = BH,
        .hd = BHD,
        .ff = BFF,
        .norm1 = bd->norm1,
        .norm2 = bd->norm2,
        .q = {.w = bd->qw, .b = bd->qb, .out = BD, .in = BD},
        .k = {.w = bd->kw, .b = bd->kb, .out = BD, .in = BD},
        .v = {.w = bd->vw, .b = bd->vb, .out = BD, .in = BD},
        .o = {.w = bd->ow, .b = bd->ob, .out = BD, .in = BD},
        .inv_freq = bd->inv_freq,
        .w1 = {.w = bd->w1, .b = NULL, .out = BFF, .in = BD},
        .w2 = {.w = bd->w2, .b = NULL, .out = BD, .in = BFF},
        .w3 = {.w = bd->w3, .b = NULL, .out = BFF, .in = BD},
        .kv_shift = shift ? bd->kv_shift : NULL,
    };
}

static void ref_linear(double *y, const double *x, const float *w, const float *b, int out,
                       int in) {
    for (int o = 0; o < out; o++) {
        double acc = b ? b[o] : 0.0;
        for (int i = 0; i < in; i++)
            acc += x[i] * w[o * in + i];
        y[o] = acc;
    }
}

static void ref_rmsnorm(double *y, const double *x, const float *w, int d) {
    double ss = 0;
    for (int i = 0; i < d; i++)
        ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / d + 1e-5);
    for (int i = 0; i < d; i++)
        y[i] = x[i] * s * w[i];
}

/* The block written out from the spec in double precision, positions 0 .. T-1. */
static void ref_block(const kr_block *b, const float *xin, int T, double *x) {
    double xn[BT][BD], q[BT][BD], k[BT][BD], v[BT][BD], k2[BT][BD], v2[BT][BD], at[BT][BD];
    double o[BD], h1[BFF], h3[BFF];
    for (int i = 0; i < T * BD; i++)
        x[i] = xin[i];
    for (int t = 0; t < T; t++) {
        ref_rmsnorm(xn[t], x + t * BD, b->norm1, BD);
        ref_linear(q[t], xn[t], b->q.w, b->q.b, BD, BD);
        ref_linear(k[t], xn[t], b->k.w, b->k.b, BD, BD);
        ref_linear(v[t], xn[t], b->v.w, b->v.b, BD, BD);
    }
    for (int t = 0; t < T; t++)
        for (int i = 0; i < BD; i++) {
            int h = i / BHD;
            if (b->kv_shift) {
                const float *ks = b->kv_shift;
                k2[t][i] = ks[h] * k[t][i] + (t ? ks[BH + h] * k[t - 1][i] : 0.0);
                v2[t][i] = ks[2 * BH + h] * v[t][i] + (t ? ks[3 * BH + h] * v[t - 1][i] : 0.0);
            } else {
                k2[t][i] = k[t][i];
                v2[t][i] = v[t][i];
            }
        }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < BH; h++)
            for (int j = 0; j < BHD / 2; j++) {
                double a = t * (double)b->inv_freq[j], c = cos(a), s = sin(a);
                int i0 = h * BHD + j, i1 = i0 + BHD / 2;
                double q0 = q[t][i0], q1 = q[t][i1], k0 = k2[t][i0], k1 = k2[t][i1];
                q[t][i0] = q0 * c - q1 * s;
                q[t][i1] = q1 * c + q0 * s;
                k2[t][i0] = k0 * c - k1 * s;
                k2[t][i1] = k1 * c + k0 * s;
            }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < BH; h++) {
            double sc[BT], mx = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                double dot = 0;
                for (int i = 0; i < BHD; i++)
                    dot += q[t][h * BHD + i] * k2[j][h * BHD + i];
                sc[j] = dot / sqrt((double)BHD);
                if (sc[j] > mx) mx = sc[j];
            }
            for (int j = 0; j <= t; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            for (int i = 0; i < BHD; i++) {
                double acc = 0;
                for (int j = 0; j <= t; j++)
                    acc += sc[j] / sum * v2[j][h * BHD + i];
                at[t][h * BHD + i] = acc;
            }
        }
    for (int t = 0; t < T; t++) {
        double *xt = x + t * BD;
        ref_linear(o, at[t], b->o.w, b->o.b, BD, BD);
        for (int i = 0; i < BD; i++)
            xt[i] += o[i];
        ref_rmsnorm(xn[t], xt, b->norm2, BD);
        ref_linear(h1, xn[t], b->w1.w, NULL, BFF, BD);
        ref_linear(h3, xn[t], b->w3.w, NULL, BFF, BD);
        for (int i = 0; i < BFF; i++)
            h1[i] = h1[i] / (1 + exp(-h1[i])) * h3[i];
        ref_linear(o, h1, b->w2.w, NULL, BD, BFF);
        for (int i = 0; i < BD; i++)
            xt[i] += o[i];
    }
}

/* One sequence being run through the block chunk by chunk: its rows, its cache (2-layer
 * layout; the block runs as layer 1 so that layer offsets matter), its unshifted last k/v. */
typedef struct {
    float x[BT * BD];
    test_cache c;
    float raw[2 * 2 * BD];
    int pos;
    bool pass_raw;
} seq_state;

static void seq_init(seq_state *q, const float *x, int block_len, bool pass_raw) {
    memcpy(q->x, x, sizeof q->x);
    cache_init(&q->c, (BT + block_len - 1) / block_len, block_len, 2, BD);
    for (int i = 0; i < 2 * 2 * BD; i++)
        q->raw[i] = NAN; /* must be written before read */
    q->pos = 0;
    q->pass_raw = pass_raw;
}

/* Appends the next T rows of each of the S sequences in one kr_block_forward call. */
static void seq_step(const kr_block *b, seq_state **qs, int S, int T) {
    kr_block_scratch s;
    kr_error err = {0};
    assert_int_equal(kr_block_scratch_init(&s, S * T, BT, BD, BFF, b->n_heads, &err), 0);
    float x[2 * BT * BD];
    kr_seq seqs[2];
    assert_true(S <= 2);
    for (int i = 0; i < S; i++) {
        assert_true(qs[i]->pos + T <= BT);
        memcpy(x + (size_t)i * T * BD, qs[i]->x + (size_t)qs[i]->pos * BD,
               (size_t)T * BD * sizeof(float));
        seqs[i] = (kr_seq){&qs[i]->c.view, qs[i]->pos, qs[i]->pass_raw ? qs[i]->raw : NULL, T};
    }
    kr_block_forward(b, 1, x, S, seqs, &s);
    for (int i = 0; i < S; i++) {
        memcpy(qs[i]->x + (size_t)qs[i]->pos * BD, x + (size_t)i * T * BD,
               (size_t)T * BD * sizeof(float));
        qs[i]->pos += T;
    }
    kr_block_scratch_free(&s);
}

/* Runs one sequence through the block in chunks of the given sizes. */
static void run_chunks(const kr_block *b, const float *xin, const int *sizes, int n_chunks,
                       int block_len, bool pass_raw, float *xout) {
    seq_state q;
    seq_init(&q, xin, block_len, pass_raw);
    seq_state *qs[1] = {&q};
    for (int c = 0; c < n_chunks; c++)
        seq_step(b, qs, 1, sizes[c]);
    assert_int_equal(q.pos, BT);
    memcpy(xout, q.x, sizeof q.x);
    cache_free(&q.c);
}

static void check_block(bool shift) {
    block_data bd;
    kr_block b;
    make_block(&bd, &b, shift);
    const char *tag = shift ? "on" : "off";
    const int one[] = {6}, two[] = {2, 4}, six[] = {1, 1, 1, 1, 1, 1}, mixed[] = {3, 1, 2};
    float full[BT * BD], part[BT * BD];
    run_chunks(&b, bd.x, one, 1, BT, true, full);

    /* the full call against the spec, in double */
    double ref[BT * BD], mx = 0, worst = 0;
    ref_block(&b, bd.x, BT, ref);
    for (int i = 0; i < BT * BD; i++)
        if (fabs(ref[i]) > mx) mx = fabs(ref[i]);
    for (int i = 0; i < BT * BD; i++) {
        double r = fabs(full[i] - ref[i]) / mx;
        if (!(r <= worst)) worst = r;
    }
    print_message("block (kv_shift %s): full call vs double reference %.2e\n", tag, worst);
    assert_true(worst < 1e-5);
    /* the block changed its input (a block that did nothing would pass the chunk checks) */
    assert_true(tu_max_rel_floats(full, bd.x, BT * BD) > 1e-2);

    /* chunked calls, with one cache block for all 6 positions and with blocks of 4 and 1 */
    const int block_lens[] = {BT, 4, 1};
    for (int l = 0; l < 3; l++) {
        int bl = block_lens[l];
        run_chunks(&b, bd.x, one, 1, bl, true, part);
        double r1 = tu_max_rel_floats(part, full, BT * BD);
        run_chunks(&b, bd.x, two, 2, bl, true, part);
        double r2 = tu_max_rel_floats(part, full, BT * BD);
        run_chunks(&b, bd.x, six, 6, bl, true, part);
        double r6 = tu_max_rel_floats(part, full, BT * BD);
        run_chunks(&b, bd.x, mixed, 3, bl, true, part);
        double r3 = tu_max_rel_floats(part, full, BT * BD);
        print_message("block (kv_shift %s, cache blocks of %d): 6 %.2e, 2+4 %.2e, 1x6 %.2e, "
                      "3+1+2 %.2e\n",
                      tag, bl, r1, r2, r6, r3);
        assert_true(r1 < 1e-5);
        assert_true(r2 < 1e-5);
        assert_true(r6 < 1e-5);
        assert_true(r3 < 1e-5);
    }
    if (shift) {
        /* without the previous chunk's k/v the shift sees k_{-1} = 0 at every chunk start */
        run_chunks(&b, bd.x, two, 2, BT, false, part);
        assert_true(tu_max_rel_floats(part, full, BT * BD) > 1e-3);
    }
}

static void test_block_chunking(void **state) {
    (void)state;
    check_block(false);
}

static void test_block_chunking_kv_shift(void **state) {
    (void)state;
    check_block(true);
}

/* Two sequences in one call (S = 2) equal each run alone, also at different offsets. */
static void check_block_batch(bool shift) {
    block_data bd;
    kr_block b;
    make_block(&bd, &b, shift);
    float xb[BT * BD], fa[BT * BD], fb[BT * BD];
    for (int i = 0; i < BT * BD; i++)
        xb[i] = lcg();
    const int one[] = {6};
    run_chunks(&b, bd.x, one, 1, BT, true, fa);
    run_chunks(&b, xb, one, 1, BT, true, fb);
    assert_true(tu_max_rel_floats(fa, fb, BT * BD) > 1e-2);

    /* same offsets: S = 2, T = 3 twice */
    seq_state A, B;
    seq_init(&A, bd.x, 4, true);
    seq_init(&B, xb, 4, true);
    seq_state *ab[2] = {&A, &B};
    seq_step(&b, ab, 2, 3);
    seq_step(&b, ab, 2, 3);
    double ra = tu_max_rel_floats(A.x, fa, BT * BD), rb = tu_max_rel_floats(B.x, fb, BT * BD);
    cache_free(&A.c);
    cache_free(&B.c);

    /* different offsets: A 4 rows alone, B 2 alone, then A rows 4-5 (pos0 4) with B rows
     * 2-3 (pos0 2) in one call, then B's last 2 alone */
    seq_init(&A, bd.x, 4, true);
    seq_init(&B, xb, 4, true);
    seq_state *a1[1] = {&A}, *b1[1] = {&B};
    seq_step(&b, a1, 1, 4);
    seq_step(&b, b1, 1, 2);
    seq_step(&b, ab, 2, 2);
    seq_step(&b, b1, 1, 2);
    double ra2 = tu_max_rel_floats(A.x, fa, BT * BD), rb2 = tu_max_rel_floats(B.x, fb, BT * BD);
    cache_free(&A.c);
    cache_free(&B.c);
    print_message("block batch (kv_shift %s): same offsets %.2e %.2e, different %.2e %.2e\n",
                  shift ? "on" : "off", ra, rb, ra2, rb2);
    assert_true(ra < 1e-5);
    assert_true(rb < 1e-5);
    assert_true(ra2 < 1e-5);
    assert_true(rb2 < 1e-5);
}

static void test_block_batch(void **state) {
    (void)state;
    check_block_batch(false);
    check_block_batch(true);
}

/* ---- time stamps ------------------------------------------------------------------------ */

static void expect_stamp(int64_t wall, int minute, int hour, int weekday, int day, int month) {
    kr_stamp s = kr_stamp_from_wall(wall);
    if (s.minute != minute || s.hour != hour || s.weekday != weekday || s.day != day ||
        s.month != month)
        fail_msg("wall %lld: got minute %d hour %d weekday %d day %d month %d, expected "
                 "%d %d %d %d %d",
                 (long long)wall, s.minute, s.hour, s.weekday, s.day, s.month, minute, hour,
                 weekday, day, month);
    kr_error err = {0};
    assert_int_equal(kr_stamp_check(&s, &err), 0);
}

/* Run scratch (core/base/scratch.c): a slot's buffer is kept and handed out again on the
 * same thread, grown when a call needs more; a nested take of a busy slot gets memory of its
 * own; release of an all-zero kr_scratch does nothing. */
static void *scratch_other_thread(void *arg) {
    kr_scratch s = {0};
    void *p = kr_scratch_take(&s, KR_SCRATCH_BLOCK, 1000);
    *(void **)arg = p;
    kr_scratch_release(&s);
    return NULL; /* the thread's slots are freed as it exits (ASan checks) */
}

static void test_scratch_slots(void **state) {
    (void)state;
    kr_scratch a = {0}, b = {0}, none = {0};
    kr_scratch_release(&none);
    char *p = kr_scratch_take(&a, KR_SCRATCH_TOKENIZER, 1000);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 7, 1000);
    char *q = kr_scratch_take(&b, KR_SCRATCH_TOKENIZER, 1000); /* busy: its own memory */
    assert_non_null(q);
    assert_ptr_not_equal(p, q);
    memset(q, 1, 1000);
    kr_scratch_release(&b);
    kr_scratch_release(&a);
    char *r = kr_scratch_take(&a, KR_SCRATCH_TOKENIZER, 500); /* the kept buffer again */
    assert_ptr_equal(r, p);
    assert_int_equal(r[999], 7);
    kr_scratch_release(&a);
    char *big = kr_scratch_take(&a, KR_SCRATCH_TOKENIZER, 100000); /* grown */
    assert_non_null(big);
    memset(big, 0, 100000);
    kr_scratch_release(&a);
    assert_ptr_equal(kr_scratch_take(&a, KR_SCRATCH_TOKENIZER, 100000), big);
    kr_scratch_release(&a);
    void *other = NULL;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, scratch_other_thread, &other), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_non_null(other);
}

static void test_stamp_from_wall(void **state) {
    (void)state;
    /* 2024-06-18T11:15:00 = 19892 days · 86400 + 11·3600 + 15·60, a Tuesday */
    assert_true(tu_wall("2024-06-18T11:15:00") == 1718709300);
    expect_stamp(1718709300, 15, 11, 1, 18, 6);
    expect_stamp(0, 0, 0, 3, 1, 1); /* 1970-01-01, a Thursday */
    /* 2024-02-29T23:59:00, a Thursday */
    assert_true(tu_wall("2024-02-29T23:59:00") == 1709251140);
    expect_stamp(1709251140, 59, 23, 3, 29, 2);
    expect_stamp(1709251140 + 60, 0, 0, 4, 1, 3); /* the next minute is 1 March */
    /* before 1970: 1969-12-31T23:59:00 (a Wednesday) */
    expect_stamp(-60, 59, 23, 2, 31, 12);
    expect_stamp(-86400, 0, 0, 2, 31, 12);    /* 1969-12-31T00:00:00 */
    expect_stamp(-86401, 59, 23, 1, 30, 12);  /* 1969-12-30T23:59:59 */
    expect_stamp(-1, 59, 23, 2, 31, 12);      /* 1969-12-31T23:59:59 */
    expect_stamp(951782400, 0, 0, 1, 29, 2);  /* 2000-02-29 (a leap century), Tuesday */
    expect_stamp(4107542400, 0, 0, 0, 1, 3);  /* 2100-03-01 (2100 is not leap), Monday */
    expect_stamp(4107456000, 0, 0, 6, 28, 2); /* 2100-02-28, Sunday */
    expect_stamp(-2208988800, 0, 0, 0, 1, 1); /* 1900-01-01, a Monday */
}

static void test_stamp_check(void **state) {
    (void)state;
    const kr_stamp ok = {59, 23, 6, 31, 12};
    kr_error err = {0};
    assert_int_equal(kr_stamp_check(&ok, &err), 0);
    struct {
        kr_stamp s;
        const char *field;
    } bad[] = {
        {{60, 0, 0, 1, 1}, "minute"}, {{-1, 0, 0, 1, 1}, "minute"}, {{0, 24, 0, 1, 1}, "hour"},
        {{0, 0, 7, 1, 1}, "weekday"}, {{0, 0, 0, 0, 1}, "day"},     {{0, 0, 0, 32, 1}, "day"},
        {{0, 0, 0, 1, 0}, "month"},   {{0, 0, 0, 1, 13}, "month"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(kr_stamp_check(&bad[i].s, &err), -1);
        assert_contains(err.msg, bad[i].field);
    }
}

/* ---- tokenizer bit packing ---------------------------------------------------------------- */

/* A hand-made tokenizer with no blocks: z = embed(x), quant_embed = identity, so the 20 sign
 * bits are those of embed's output; post_quant_embed = identity and head picks 6 of the 20
 * decoded values. */
static void test_bit_packing_handmade(void **state) {
    (void)state;
    enum { NB = 20 };
    float ew[NB * KR_D_IN] = {0}, eb[NB], ident[NB * NB] = {0}, hw[KR_D_IN * NB] = {0};
    /* positive at s1 bits 0, 3, 9 and s2 bits 1, 4, 9; exactly 0 at bit 5 (counts as 0) */
    for (int i = 0; i < NB; i++)
        eb[i] = -1.0f;
    eb[0] = eb[3] = eb[9] = 0.5f;
    eb[5] = 0.0f;
    eb[10 + 1] = eb[10 + 4] = eb[10 + 9] = 2.0f;
    ew[0 * KR_D_IN + 0] = 1.0f; /* value 0 also depends on x[0] */
    for (int i = 0; i < NB; i++)
        ident[i * NB + i] = 1.0f;
    const int pick[KR_D_IN] = {0, 1, 9, 10, 11, 19};
    for (int k = 0; k < KR_D_IN; k++)
        hw[k * NB + pick[k]] = 1.0f;

    kr_model m;
    memset(&m, 0, sizeof m);
    m.tc = (kr_tokenizer_config){.d_in = KR_D_IN,
                                 .d_model = NB,
                                 .n_heads = 1,
                                 .ff_dim = 4,
                                 .n_enc_layers = 1,
                                 .n_dec_layers = 1,
                                 .s1_bits = 10,
                                 .s2_bits = 10};
    m.tok.embed = (kr_linear){.w = ew, .b = eb, .out = NB, .in = KR_D_IN};
    m.tok.quant_embed = (kr_linear){.w = ident, .b = NULL, .out = NB, .in = NB};
    m.tok.post_quant_embed = (kr_linear){.w = ident, .b = NULL, .out = NB, .in = NB};
    m.tok.head = (kr_linear){.w = hw, .b = NULL, .out = KR_D_IN, .in = NB};

    const float x[2 * KR_D_IN] = {0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0};
    int32_t s1[2], s2[2];
    kr_error err = {0};
    assert_int_equal(kr_tokenizer_encode(&m, x, 2, s1, s2, &err), 0);
    /* least significant bit first: s1 = 1 + 8 + 512, s2 = 2 + 16 + 512 */
    assert_int_equal(s1[0], 521);
    assert_int_equal(s2[0], 530);
    assert_int_equal(s1[1], 520); /* row 1: value 0 = 0.5 - 1 < 0 */
    assert_int_equal(s2[1], 530);

    /* decode: value i = (2·bit_i - 1)/sqrt(20) = ±0.22360680 */
    float out[2 * KR_D_IN];
    assert_int_equal(kr_tokenizer_decode(&m, s1, s2, 2, out, &err), 0);
    const double u = 0.22360680;
    const double want0[KR_D_IN] = {u, -u, u, -u, u, u};
    for (int k = 0; k < KR_D_IN; k++) {
        NEAR(out[k], want0[k], 1e-7);
        NEAR(out[KR_D_IN + k], k == 0 ? -u : want0[k], 1e-7);
    }
}

static void test_tokenizer_fixture(void **state) {
    (void)state;
    kr_model *m = tu_load_tiny(512);
    assert_non_null(m);
    enum { N = 64 };
    float x[N * KR_D_IN];
    lcg_state = 99;
    for (int i = 0; i < N * KR_D_IN; i++)
        x[i] = 3.0f * lcg();
    x[0] = 5.0f;
    x[1] = -5.0f;
    int32_t s1[N], s2[N];
    kr_error err = {0};
    assert_int_equal(kr_tokenizer_encode(m, x, N, s1, s2, &err), 0);
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        assert_true(s1[i] >= 0 && s1[i] < 1024);
        assert_true(s2[i] >= 0 && s2[i] < 1024);
        if (i && s1[i] != s1[i - 1]) distinct++;
    }
    assert_true(distinct > 0); /* the encoder does look at its input */
    /* tokens the encoder made decode fine */
    float out[N * KR_D_IN];
    assert_int_equal(kr_tokenizer_decode(m, s1, s2, N, out, &err), 0);
    for (int i = 0; i < N * KR_D_IN; i++)
        assert_true(isfinite(out[i]));

    /* out-of-range tokens are rejected with a message naming the pair and the value */
    struct {
        int32_t a, b;
        const char *value;
    } bad[] = {{1024, 0, "1024"}, {0, 1024, "1024"}, {-1, 5, "-1"}, {3, -7, "-7"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t a[3] = {1, 2, bad[i].a}, b[3] = {1, 2, bad[i].b};
        memset(&err, 0, sizeof err);
        assert_int_equal(kr_tokenizer_decode(m, a, b, 3, out, &err), -1);
        assert_contains(err.msg, "out of range");
        assert_contains(err.msg, "pair 2");
        assert_contains(err.msg, bad[i].value);
    }
    memset(&err, 0, sizeof err);
    assert_int_equal(kr_tokenizer_decode(m, s1, s2, 0, out, &err), -1);
    assert_true(err.msg[0] != '\0');
    kr_model_free(m);
}

/* ---- normalisation ------------------------------------------------------------------------ */

static void test_normalise_simple(void **state) {
    (void)state;
    /* column c is (1, 2, 3, 4)·k_c: mean 2.5·k, std sqrt(1.25)·k; the last column is constant */
    const float k[KR_D_IN] = {1, 10, 0.5f, 100, 1000, 0};
    float x[4 * KR_D_IN], xn[4 * KR_D_IN], mean[KR_D_IN], std[KR_D_IN];
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < KR_D_IN; c++)
            x[i * KR_D_IN + c] = c == 5 ? 7.0f : (i + 1) * k[c];
    kr_error err = {0};
    assert_int_equal(kr_normalise(x, 4, xn, mean, std, &err), 0);
    for (int c = 0; c < 5; c++) {
        NEAR(mean[c], 2.5 * k[c], 1e-6 * k[c]);
        NEAR(std[c], 1.11803399 * k[c], 1e-6 * k[c]);
        for (int i = 0; i < 4; i++) {
            double want = (i + 1 - 2.5) * k[c] / (1.11803399 * k[c] + 1e-5);
            NEAR(xn[i * KR_D_IN + c], want, 2e-6);
        }
    }
    /* (i - 2.5)/sqrt(1.25) for k = 1: -1.3416, -0.4472, 0.4472, 1.3416 (minus 1e-5 effect) */
    NEAR(xn[0], -1.34162879, 1e-6);
    NEAR(xn[3 * KR_D_IN], 1.34162879, 1e-6);
    /* constant column: std 0, (7 - 7)/(0 + 1e-5) = 0 */
    NEAR(mean[5], 7, 0);
    NEAR(std[5], 0, 0);
    for (int i = 0; i < 4; i++)
        NEAR(xn[i * KR_D_IN + 5], 0, 0);
}

static void test_normalise_clip(void **state) {
    (void)state;
    /* 27 rows: 26 zeros and one 27 (or -27 in column 1). mean 1, variance
     * (26·1 + 26²)/27 = 26, std sqrt 26 = 5.09901951: the outlier's z = 26/5.099 = 5.099 clips
     * to 5, the zeros give -1/(5.09901951 + 1e-5) = -0.19611576. */
    enum { N = 27 };
    float x[N * KR_D_IN] = {0}, xn[N * KR_D_IN], mean[KR_D_IN], std[KR_D_IN];
    x[10 * KR_D_IN + 0] = 27.0f;
    x[10 * KR_D_IN + 1] = -27.0f;
    for (int i = 0; i < N; i++)
        x[i * KR_D_IN + 2] = 3.0f; /* constant, non-zero */
    assert_int_equal(kr_normalise(x, N, xn, mean, std, NULL), 0);
    NEAR(mean[0], 1, 1e-6);
    NEAR(mean[1], -1, 1e-6);
    NEAR(std[0], 5.09901951, 1e-5);
    NEAR(std[1], 5.09901951, 1e-5);
    NEAR(xn[10 * KR_D_IN + 0], 5.0, 0);
    NEAR(xn[10 * KR_D_IN + 1], -5.0, 0);
    for (int i = 0; i < N; i++) {
        if (i == 10) continue;
        NEAR(xn[i * KR_D_IN + 0], -0.19611576, 1e-6);
        NEAR(xn[i * KR_D_IN + 1], 0.19611576, 1e-6);
        NEAR(xn[i * KR_D_IN + 2], 0, 0);
        NEAR(xn[i * KR_D_IN + 3], 0, 0);
    }
    NEAR(mean[2], 3, 0);
    NEAR(std[2], 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rmsnorm_rows_alone),
        cmocka_unit_test(test_rope_halves),
        cmocka_unit_test(test_rope_pos0),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_all_keys),
        cmocka_unit_test(test_attention_heads),
        cmocka_unit_test(test_linear_small),
        cmocka_unit_test(test_linear_vs_loops),
        cmocka_unit_test(test_block_chunking),
        cmocka_unit_test(test_block_chunking_kv_shift),
        cmocka_unit_test(test_block_batch),
        cmocka_unit_test(test_scratch_slots),
        cmocka_unit_test(test_stamp_from_wall),
        cmocka_unit_test(test_stamp_check),
        cmocka_unit_test(test_bit_packing_handmade),
        cmocka_unit_test(test_tokenizer_fixture),
        cmocka_unit_test(test_normalise_simple),
        cmocka_unit_test(test_normalise_clip),
    };
    return cmocka_run_group_tests_name("units", tests, NULL, NULL);
}
