/* scalar.h — what every level's build shares with the scalar code: KR_INLINE, the
 * always-inline of the templates' helpers (inlined, a helper is compiled for its caller's
 * level), and e^x on one float, exp1, with the expression exp_array (vmath.h) repeats on
 * vectors. Below the levels: vmath.h includes it, it includes nothing of theirs. Internal to
 * core/kernels (and the tests that probe it). */
#ifndef KR_SCALAR_H
#define KR_SCALAR_H

#include <stdint.h>

#define KR_INLINE static inline __attribute__((always_inline))

/* Cephes' single-precision e^x: v - k ln 2 in two parts (r), then e^r by its polynomial.
 * One expression for a float and for a vector of floats: the scalar lane and every level's
 * vectors perform the same operations in the same order. */
#define KR_EXP_REDUCE(v, kf) ((v) - (kf)*0.693359375f - (kf) * -2.12194440e-4f)
#define KR_EXP_POLY(r)                                                                             \
    ((((((1.9875691500e-4f * (r) + 1.3981999507e-3f) * (r) + 8.3334519073e-3f) * (r) +             \
        4.1665795894e-2f) *                                                                        \
           (r) +                                                                                   \
       1.6666665459e-1f) *                                                                         \
          (r) +                                                                                    \
      5.0000001201e-1f) *                                                                          \
         ((r) * (r)) +                                                                             \
     (r) + 1.0f)

/* e^x for x <= 88, within 2 ulp of expf (libm's expf does not vectorise). One lane of every
 * level's exp_array (vmath.h), and its tail. */
KR_INLINE float exp1(float x) {
    float v = x < -87.3f ? -87.3f : x;
    float fx = v * 1.44269504088896341f;
    int k = (int)(fx + (fx >= 0.0f ? 0.5f : -0.5f)); /* round to nearest */
    float kf = (float)k;
    float r = KR_EXP_REDUCE(v, kf);
    float y = KR_EXP_POLY(r);
    union {
        uint32_t u;
        float f;
    } scale = {.u = (uint32_t)(k + 127) << 23};
    return x < -87.3f ? 0.0f : y * scale.f;
}

#endif
