/* lanes.h — builds a file's hot loops once per instruction set, and chooses between the
 * builds at run time. Internal to core/kernels (and the tests that probe it).
 *
 * The hot loops of attention and of the row-wise steps are written once, in a template
 * file, on vectors of KR_W floats: one register of the level (16 for AVX-512, 8 for AVX2, 4
 * for the baseline, SSE2 or another CPU's portable build). A file names its template and
 * includes this header:
 *
 *     #define KR_LANES_TEMPLATE "attention_lanes.h"
 *     #include "lanes.h"
 *
 * which includes the template once per level (vmath.h sets each level up: its vector type
 * vf, its target attribute KR_LEVEL_FN, its suffix KR_LN(name), its exp_array). Then
 * KR_DISPATCH(name, (params), (args)) makes name() call the build of kr_simd_level(): the
 * CPU's best, or a lower one named by KRONOS_SIMD, so a lower level runs, and is tested and
 * timed, whole on a CPU that has a higher one.
 *
 * Why a build per width and not one 16-lane type: GCC keeps a vector wider than the level's
 * registers in memory: its AVX2 attention went through the stack, several times slower
 * (docs/design.md, "Tried and dropped").
 *
 * Every build performs the same IEEE operations in the same order on each element (the lanes
 * are independent, and -ffp-contract=off: no fused multiply-add unless written, KR_FMA where it
 * is, fmaf on the baseline), so the bits
 * never depend on the level; test_invariance and the conformance tests on each level check it.
 */
#ifndef KR_LANES_ONCE
#define KR_LANES_ONCE

#include "kronos.h" /* kr_simd_level */

#include <stdint.h>

#define KR_INLINE static inline __attribute__((always_inline))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KR_LANES_X86 1
#include <immintrin.h> /* the levels' FMA (vmath.h) */
#define KR_DISPATCH(name, params, args)                                                            \
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
#define KR_DISPATCH(name, params, args)                                                            \
    static void name params {                                                                      \
        name##_generic args;                                                                       \
    }
#endif

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

#ifndef KR_LANES_TEMPLATE
#error "lanes.h: define KR_LANES_TEMPLATE, the file of hot loops to build per level"
#endif

#ifdef KR_LANES_X86
#define KR_W        16
#define KR_LEVEL_FN __attribute__((target("avx512f")))
#define KR_LN(name) name##_avx512
#include "vmath.h"
#define KR_W        8
#define KR_LEVEL_FN __attribute__((target("avx2,fma")))
#define KR_LN(name) name##_avx2
#include "vmath.h"
#endif
#define KR_W 4
#define KR_LEVEL_FN
#define KR_LN(name) name##_generic
#include "vmath.h"

#undef KR_LANES_TEMPLATE
