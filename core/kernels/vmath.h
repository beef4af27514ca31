/* vmath.h — element-wise float math shared by attention and the feed-forward layers.
 * Internal to core/. */
#ifndef KR_VMATH_H
#define KR_VMATH_H

#include <stdint.h>

#include "kronos.h" /* kr_simd_level */

/* The hot loops are written once, on the 16-lane vectors below, as an always-inline body
 * name_body; KR_LEVELS(name, (params), (args)) builds it for AVX-512, for AVX2 and for the
 * baseline, and makes a function name that runs the build of the products' level
 * (kr_simd_level(): the CPU's best, or a lower one named by KRONOS_SIMD). So a lower level
 * runs, and is tested and timed, whole on a CPU that has a higher one. Without FMA
 * contraction (-ffp-contract=off) every build performs the same IEEE operations in the same
 * order: the bits never depend on the level. */
#define KR_INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KR_LEVELS(name, params, args)                                                              \
    __attribute__((target("avx512f"))) static void name##_avx512 params {                          \
        name##_body args;                                                                          \
    }                                                                                              \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params {                           \
        name##_body args;                                                                          \
    }                                                                                              \
    static void name##_generic params {                                                            \
        name##_body args;                                                                          \
    }                                                                                              \
    static void name params {                                                                      \
        switch (kr_simd_level()) {                                                                 \
        case KR_SIMD_AVX512:                                                                       \
            name##_avx512 args;                                                                    \
            break;                                                                                 \
        case KR_SIMD_AVX2:                                                                         \
            name##_avx2 args;                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            name##_generic args;                                                                   \
        }                                                                                          \
    }
#else
#define KR_LEVELS(name, params, args)                                                              \
    static void name params {                                                                      \
        name##_body args;                                                                          \
    }
#endif

/* Sixteen lanes as one value (GCC/clang vector extensions): the build for each
 * instruction set maps them onto its own registers, and every lane performs exactly the
 * scalar code's IEEE operations, in its order (no contraction: -ffp-contract=off). */
typedef float kr_v16f __attribute__((vector_size(64), aligned(4)));
typedef int32_t kr_v16i __attribute__((vector_size(64), aligned(4)));

/* Cephes' single-precision e^x, one lane of exp16 (the tail of exp_array). */
KR_INLINE float exp1(float x) {
    float v = x < -87.3f ? -87.3f : x;
    float fx = v * 1.44269504088896341f;
    int k = (int)(fx + (fx >= 0.0f ? 0.5f : -0.5f)); /* round to nearest */
    float kf = (float)k;
    float r = v - kf * 0.693359375f - kf * -2.12194440e-4f;
    float z = r * r;
    float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) *
                   r +
               1.6666665459e-1f) *
                  r +
              5.0000001201e-1f;
    y = y * z + r + 1.0f;
    union {
        uint32_t u;
        float f;
    } scale = {.u = (uint32_t)(k + 127) << 23};
    return x < -87.3f ? 0.0f : y * scale.f;
}

/* a where m is all ones, b where it is zero (a macro: a function taking or returning
 * 64-byte vectors would have an ABI that depends on the instruction set) */
#define KR_SELECT16(m, a, b) ((kr_v16f)(((m) & (kr_v16i)(a)) | (~(m) & (kr_v16i)(b))))

/* e^x for each x[i] <= 88, 16 at a time: Cephes' single-precision range reduction and
 * polynomial, within 2 ulp of expf (libm's expf does not vectorise). The reference and the
 * cached paths both use it; every element gets the same bits whether it falls in a vector
 * or in the tail. */
KR_INLINE void exp_array(float *x, int n) {
    int i = 0;
    const kr_v16f zero = {0}, lo = zero - 87.3f, half = zero + 0.5f;
    for (; i + 16 <= n; i += 16) { /* exp1, lane by lane */
        kr_v16f x16;
        __builtin_memcpy(&x16, x + i, sizeof x16);
        kr_v16i under = x16 < lo;
        kr_v16f v = KR_SELECT16(under, lo, x16);
        kr_v16f fx = v * 1.44269504088896341f;
        kr_v16i k = __builtin_convertvector(fx + KR_SELECT16(fx >= zero, half, -half), kr_v16i);
        kr_v16f kf = __builtin_convertvector(k, kr_v16f);
        kr_v16f r = v - kf * 0.693359375f - kf * -2.12194440e-4f;
        kr_v16f z = r * r;
        kr_v16f y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                      4.1665795894e-2f) *
                         r +
                     1.6666665459e-1f) *
                        r +
                    5.0000001201e-1f;
        y = y * z + r + 1.0f;
        kr_v16f scale = (kr_v16f)((k + 127) << 23);
        x16 = KR_SELECT16(under, zero, y * scale);
        __builtin_memcpy(x + i, &x16, sizeof x16);
    }
    for (; i < n; i++)
        x[i] = exp1(x[i]);
}

/* r[16] (16 rows of 16 floats) transposed in place: r[i][l] becomes the old r[l][i]. Four
 * rounds of two-source shuffles (32-bit, 64-bit, 128-bit, 256-bit), 64 in all; only moves,
 * no arithmetic. Inlined: the build for each instruction set keeps the rows in its own
 * registers. */
#define KR_SHUF16 __builtin_shufflevector
KR_INLINE void kr_transpose16(kr_v16f r[16]) {
    kr_v16f t[16], u[16];
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
        kr_v16f a0 =
            KR_SHUF16(u[e], u[4 + e], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        kr_v16f b0 =
            KR_SHUF16(u[e], u[4 + e], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
        kr_v16f a1 =
            KR_SHUF16(u[8 + e], u[12 + e], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        kr_v16f b1 = KR_SHUF16(u[8 + e], u[12 + e], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15,
                               28, 29, 30, 31);
        r[e] = KR_SHUF16(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[e + 4] = KR_SHUF16(a0, a1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
        r[e + 8] = KR_SHUF16(b0, b1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[e + 12] = KR_SHUF16(b0, b1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    }
}
#undef KR_SHUF16

#endif
