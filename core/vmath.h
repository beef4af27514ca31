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

/* e^x for each x[i] <= 88, written so that it vectorises (libm's expf does not): Cephes'
 * single-precision range reduction and polynomial, within 2 ulp of expf. The reference and
 * the cached paths both use it. */
static inline void exp_array(float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i] < -87.3f ? -87.3f : x[i];
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
        x[i] = x[i] < -87.3f ? 0.0f : y * scale.f;
    }
}

#endif
