/* vmath.h — one level's set-up, vector type and element-wise math, then the template of hot
 * loops (KR_LANES_TEMPLATE) built on them. lanes.h includes it once per level, with KR_W
 * (floats a register) set; nothing else includes it. Internal to core/kernels. */
#include "scalar.h" /* KR_INLINE, exp1 and the expression exp_array shares with it */

/* The level of width KR_W: its target attribute KR_LEVEL_FN, its suffix KR_LN(name) (the
 * names KR_DISPATCH in lanes.h calls), and KR_FMA(a, b, c), a * b + c with one rounding lane
 * by lane: the level's FMA instruction, or fmaf on the baseline, so every level rounds alike */
#if KR_W == 16
#define KR_LEVEL_FN     __attribute__((target("avx512f")))
#define KR_LN(name)     name##_avx512
#define KR_FMA(a, b, c) ((vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif KR_W == 8
#define KR_LEVEL_FN     __attribute__((target("avx2,fma")))
#define KR_LN(name)     name##_avx2
#define KR_FMA(a, b, c) ((vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define KR_LEVEL_FN
#define KR_LN(name) name##_generic
#define KR_FMA(a, b, c)                                                                            \
    __extension__({                                                                                \
        vf fa_ = (a), fb_ = (b), fc_ = (c);                                                        \
        for (int fl_ = 0; fl_ < KR_W; fl_++)                                                       \
            fc_[fl_] = __builtin_fmaf(fa_[fl_], fb_[fl_], fc_[fl_]);                               \
        fc_;                                                                                       \
    })
#endif

/* KR_W floats (or int32s) as one value: one register of the level. aligned(4): loads and
 * stores need no alignment. Each lane performs the scalar code's IEEE operations, in order. */
#define vf        KR_LN(vf)
#define vi        KR_LN(vi)
#define exp_array KR_LN(exp_array)
typedef float vf __attribute__((vector_size(4 * KR_W), aligned(4)));
typedef int32_t vi __attribute__((vector_size(4 * KR_W), aligned(4)));

/* the KR_W floats at p */
#define KR_LOAD(p) (*(const vf *)(p))
/* a where m is all ones, b where it is zero (a macro: a function taking or returning vectors
 * would have an ABI that depends on the instruction set) */
#define KR_SELECT(m, a, b) ((vf)(((m) & (vi)(a)) | (~(m) & (vi)(b))))
/* x in every lane: x - (+0) is x itself, -0 included */
#define KR_SPLAT(x) ((x) - (vf){0})

/* e^x for each x[i] <= 88, KR_W at a time: exp1 (scalar.h) lane by lane; every element gets
 * the same bits whether it falls in a vector or in the tail, on every level. */
KR_INLINE void exp_array(float *x, int n) {
    int i = 0;
    const vf zero = {0}, lo = zero - 87.3f, half = zero + 0.5f;
    for (; i + KR_W <= n; i += KR_W) {
        vf xw = KR_LOAD(x + i);
        vi under = xw < lo;
        vf v = KR_SELECT(under, lo, xw);
        vf fx = v * 1.44269504088896341f;
        vi k = __builtin_convertvector(fx + KR_SELECT(fx >= zero, half, -half), vi);
        vf kf = __builtin_convertvector(k, vf);
        vf r = KR_EXP_REDUCE(v, kf);
        vf y = KR_EXP_POLY(r);
        vf scale = (vf)((k + 127) << 23);
        xw = KR_SELECT(under, zero, y * scale);
        __builtin_memcpy(x + i, &xw, sizeof xw);
    }
    for (; i < n; i++)
        x[i] = exp1(x[i]);
}

/* s[l] = e^(s[l] - mx[l]) for the KR_W lanes at s, each s[l] <= mx[l] (or -inf): exp1_fma
 * (scalar.h) lane by lane, the same bits on every level. */
#define exp_fma_sub KR_LN(exp_fma_sub)
KR_INLINE KR_LEVEL_FN void exp_fma_sub(float *s, const float *mx) {
    const vf zero = {0}, lo = zero + KR_EXP_LO;
    vf x = KR_LOAD(s) - KR_LOAD(mx);
    vi under = x < lo;
    vf v = KR_SELECT(under, lo, x);
    vi k = __builtin_convertvector(v * 1.44269504088896341f - 0.5f, vi);
    vf kf = __builtin_convertvector(k, vf);
    vf r = KR_FMA(kf, zero + KR_EXP_LN2H, v);
    r = KR_FMA(kf, zero + KR_EXP_LN2L, r);
    vf p = KR_FMA(zero + 1.9875691500e-4f, r, zero + 1.3981999507e-3f);
    p = KR_FMA(p, r, zero + 8.3334519073e-3f);
    p = KR_FMA(p, r, zero + 4.1665795894e-2f);
    p = KR_FMA(p, r, zero + 1.6666665459e-1f);
    p = KR_FMA(p, r, zero + 5.0000001201e-1f);
    vf y = KR_FMA(p, r * r, r) + 1.0f;
    vf e = KR_SELECT(under, zero, y * (vf)((k + 127) << 23));
    __builtin_memcpy(s, &e, sizeof e);
}

#if KR_W == 16
#define transpose16 KR_LN(transpose16)
/* r[16] (16 rows of 16 floats) transposed in place: r[i][l] becomes the old r[l][i]. Four
 * rounds of two-source shuffles (32-bit, 64-bit, 128-bit, 256-bit), 64 in all; only moves,
 * no arithmetic. Inlined: the rows stay in the caller's registers. */
#define KR_SHUF16 __builtin_shufflevector
KR_INLINE void transpose16(vf r[16]) {
    vf t[16], u[16];
    for (int k = 0; k < 16; k += 2) { /* rows 2k, 2k+1 interleaved within 128-bit lanes */
        t[k] = KR_SHUF16(r[k], r[k + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
        t[k + 1] =
            KR_SHUF16(r[k], r[k + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
    }
    for (int k = 0; k < 16; k += 4) /* u[k + e]: rows k..k+3, elements e, e+4, e+8, e+12 */
        for (int h = 0; h < 2; h++) {
            u[k + 2 * h] = KR_SHUF16(t[k + h], t[k + h + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24,
                                     25, 12, 13, 28, 29);
            u[k + 2 * h + 1] = KR_SHUF16(t[k + h], t[k + h + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11,
                                         26, 27, 14, 15, 30, 31);
        }
    for (int e = 0; e < 4; e++) {
        /* rows 0-7 and 8-15: elements e, e+4 (a) and e+8, e+12 (b) */
        vf a0 = KR_SHUF16(u[e], u[4 + e], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        vf b0 =
            KR_SHUF16(u[e], u[4 + e], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
        vf a1 =
            KR_SHUF16(u[8 + e], u[12 + e], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        vf b1 = KR_SHUF16(u[8 + e], u[12 + e], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29,
                          30, 31);
        r[e] = KR_SHUF16(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[e + 4] = KR_SHUF16(a0, a1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
        r[e + 8] = KR_SHUF16(b0, b1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[e + 12] = KR_SHUF16(b0, b1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    }
}
#undef KR_SHUF16
#endif

#include KR_LANES_TEMPLATE

#if KR_W == 16
#undef transpose16
#endif

#undef exp_fma_sub
#undef KR_LOAD
#undef KR_SELECT
#undef KR_SPLAT
#undef KR_FMA
#undef exp_array
#undef vi
#undef vf
#undef KR_LN
#undef KR_LEVEL_FN
#undef KR_W
