/* scalar.h — what every level's build shares with the scalar code: KR_INLINE, the
 * always-inline of the templates' helpers (inlined, a helper is compiled for its caller's
 * level), and e^x on one float, exp1, with the expression exp_array (vmath.h) repeats on
 * vectors, and exp1_fma, the lane of attention's softmax (exp_fma_sub). Below the levels: vmath.h
 * includes it, it includes nothing of theirs. Internal to core/kernels (and the tests that probe
 * it). */
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

/* e^x for x <= 0 or -inf (a softmax's shifted scores), 0 below -87.3: Cephes' reduction and
 * polynomial as above, each step a fused multiply-add (one rounding: fmaf here, the level's
 * FMA instruction in exp_fma_sub, vmath.h, whose lane this is), and for x <= 0 the rounding
 * of k needs no sign test. Attention's softmax on every path and level; within 2 ulp of
 * expf. */
#define KR_EXP_LO   -87.3f
#define KR_EXP_LN2H -0.693359375f
#define KR_EXP_LN2L 2.12194440e-4f
KR_INLINE float exp1_fma(float x) {
    float v = x < KR_EXP_LO ? KR_EXP_LO : x;
    int k = (int)(v * 1.44269504088896341f - 0.5f); /* to nearest: v <= 0 */
    float kf = (float)k;
    float r = __builtin_fmaf(kf, KR_EXP_LN2L, __builtin_fmaf(kf, KR_EXP_LN2H, v));
    float p = __builtin_fmaf(1.9875691500e-4f, r, 1.3981999507e-3f);
    p = __builtin_fmaf(p, r, 8.3334519073e-3f);
    p = __builtin_fmaf(p, r, 4.1665795894e-2f);
    p = __builtin_fmaf(p, r, 1.6666665459e-1f);
    p = __builtin_fmaf(p, r, 5.0000001201e-1f);
    float y = __builtin_fmaf(p, r * r, r) + 1.0f;
    union {
        uint32_t u;
        float f;
    } scale = {.u = (uint32_t)(k + 127) << 23};
    return x < KR_EXP_LO ? 0.0f : y * scale.f;
}

#endif
