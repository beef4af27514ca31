/* vmath.h — element-wise float math shared by attention and the feed-forward layers.
 * Internal to core/. */
#ifndef KR_VMATH_H
#define KR_VMATH_H

#include <stdint.h>

/* Built for AVX-512 and AVX2 too, chosen at run time. Without FMA contraction (ISO C mode) both
 * builds perform the same IEEE operations in the same order, so results do not depend on the CPU.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KR_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KR_HOT
#endif

/* Sixteen lanes as one value (GCC/clang vector extensions): the clone built for each
 * instruction set maps them onto its own registers, and every lane performs exactly the
 * scalar code's IEEE operations, in its order (no contraction: -ffp-contract=off). */
typedef float kr_v16f __attribute__((vector_size(64), aligned(4)));
typedef int32_t kr_v16i __attribute__((vector_size(64), aligned(4)));

/* Cephes' single-precision e^x, one lane of exp16 (the tail of exp_array). */
static inline float exp1(float x) {
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
static inline void exp_array(float *x, int n) {
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

#endif
