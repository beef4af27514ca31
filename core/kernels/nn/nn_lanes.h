/* nn_lanes.h — the row-wise steps' hot loops, a template built once per instruction set
 * (lanes.h) on vectors vf of KR_W floats: sums of squares for RMSNorm, RoPE from the table,
 * transposed key stores, SwiGLU. Each entry point is named with the level's suffix; nn.c
 * dispatches to them. Included only by nn.c, after swiglu_ctx. */

#define sum_squares8 KR_LN(sum_squares8)
#define rope_heads   KR_LN(rope_heads)
#define put_keys16   KR_LN(put_keys16)
#define silu_mul     KR_LN(silu_mul)
#define swiglu       KR_LN(swiglu)
#define v8f          KR_LN(v8f)
#define v4d          KR_LN(v4d)
#define v8d          KR_LN(v8d)

/* ss[k] += x[k][i]^2 for i in [0, d8) (a multiple of 8), k = the eight rows: lane k of the
 * sums (AVX-512: one register of eight doubles; AVX2: two of four; SSE: one chain a row). */
#if KR_W >= 8
typedef float v8f __attribute__((vector_size(32), aligned(4)));
#if KR_W == 16
typedef double v8d __attribute__((vector_size(64)));
#else
typedef double v4d __attribute__((vector_size(32)));
#endif
KR_LEVEL_FN static void sum_squares8(double *ss, const float *const *xk, int d8) {
#if KR_W == 16
    v8d acc;
    __builtin_memcpy(&acc, ss, sizeof acc);
#else
    v4d lo, hi; /* rows 0-3 and 4-7 */
    __builtin_memcpy(&lo, ss, sizeof lo);
    __builtin_memcpy(&hi, ss + 4, sizeof hi);
#endif
    for (int i0 = 0; i0 < d8; i0 += 8) {
        v8f r[8], t[8], u[8];
        for (int k = 0; k < 8; k++)
            __builtin_memcpy(&r[k], xk[k] + i0, sizeof r[k]);
        for (int k = 0; k < 8; k += 2) { /* pairs of rows interleaved */
            t[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
            t[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
        }
        for (int k = 0; k < 8; k += 4) /* then quads */
            for (int h = 0; h < 2; h++) {
                u[k + 2 * h] =
                    __builtin_shufflevector(t[k + h], t[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
                u[k + 2 * h + 1] =
                    __builtin_shufflevector(t[k + h], t[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
            }
        /* then halves: element i0 + j of every row, j in order */
        for (int j = 0; j < 8; j++) {
            v8f e = j < 4 ? __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11)
                          : __builtin_shufflevector(u[j - 4], u[j], 4, 5, 6, 7, 12, 13, 14, 15);
#if KR_W == 16
            v8d a = __builtin_convertvector(e, v8d);
            acc += a * a;
#else
            v4d a = __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3), v4d);
            v4d b = __builtin_convertvector(__builtin_shufflevector(e, e, 4, 5, 6, 7), v4d);
            lo += a * a;
            hi += b * b;
#endif
        }
    }
#if KR_W == 16
    __builtin_memcpy(ss, &acc, sizeof acc);
#else
    __builtin_memcpy(ss, &lo, sizeof lo);
    __builtin_memcpy(ss + 4, &hi, sizeof hi);
#endif
}
#else
KR_LEVEL_FN static void sum_squares8(double *ss, const float *const *xk, int d8) {
    for (int i = 0; i < d8; i++)
        for (int k = 0; k < 8; k++)
            ss[k] += (double)xk[k][i] * xk[k][i];
}
#endif

/* Every head of one row, pairs (j, j + hd / 2) with cs[j] = (cos, sin): the same operations
 * as nn.c's rotate(), in vectors of pairs. */
KR_LEVEL_FN static void rope_heads(float *x, int n_heads, int hd, const float *cs) {
    int half = hd / 2;
    for (int h = 0; h < n_heads; h++) {
        float *xh = x + (size_t)h * hd;
        for (int j = 0; j < half; j++) {
            float a = xh[j], b = xh[j + half], c = cs[2 * j], s = cs[2 * j + 1];
            xh[j] = a * c - b * s;
            xh[j + half] = b * c + a * s;
        }
    }
}

/* Writes keys krows[KEY_GROUP][d] at positions pos .. pos + 15 of one block. AVX-512:
 * 16 x 16 tiles transposed in registers, each line of the transposed keys written whole at
 * once, where a key at a time writes one float into each of d lines (kr_kv_put_k; this
 * halves the store of the tokenizer's window, docs/performance.md). Narrower levels
 * write each line from the 16 rows in turn. */
KR_LEVEL_FN static void put_keys16(const kr_kv_view *kv, int layer, int pos, const float *krows,
                                   int d) {
    float *col = kr_kv_kcol(kv, layer, pos);
    size_t B = (size_t)kv->block_len;
    int i = 0;
#if KR_W == 16
    for (; i + KEY_GROUP <= d; i += KEY_GROUP) {
        vf r[KEY_GROUP];
        for (int k = 0; k < KEY_GROUP; k++)
            r[k] = KR_LOAD(krows + (size_t)k * d + i);
        transpose16(r);
        for (int k = 0; k < KEY_GROUP; k++)
            memcpy(col + (size_t)(i + k) * B, &r[k], sizeof r[k]);
    }
#endif
    for (; i < d; i++)
        for (int k = 0; k < KEY_GROUP; k++)
            col[(size_t)i * B + k] = krows[(size_t)k * d + i];
}

/* h1 = silu(h1) * h3, with silu(a) = a / (1 + e^-a) */
KR_INLINE void silu_mul(float *h1, const float *h3, size_t n) {
    float e[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        int m = n - i0 < 256 ? (int)(n - i0) : 256;
        for (int i = 0; i < m; i++)
            e[i] = -h1[i0 + i];
        exp_array(e, m);
        for (int i = 0; i < m; i++)
            h1[i0 + i] = h1[i0 + i] / (1.0f + e[i]) * h3[i0 + i];
    }
}
/* SwiGLU on rows [r0, r1), columns [c0, c1) of h1 and h3: the epilogue of the w1|w3 product,
 * and the pass over whole rows when the product is not stacked. */
KR_LEVEL_FN static void swiglu(void *arg, int r0, int r1, int c0, int c1) {
    const swiglu_ctx *c = arg;
    for (int r = r0; r < r1; r++)
        silu_mul(c->h1 + (size_t)r * c->ff + c0, c->h3 + (size_t)r * c->ff + c0, (size_t)(c1 - c0));
}

#undef v8d
#undef v4d
#undef v8f
#undef swiglu
#undef silu_mul
#undef put_keys16
#undef rope_heads
#undef sum_squares8
