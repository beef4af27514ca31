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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KR_LANES_X86 1
#include <immintrin.h> /* the levels' FMA (vmath.h) */
#define KR_DISPATCH(name, params, args)                                                            \
    static void name params {                                                                      \
        switch (kr_simd_level()) {                                                                 \
        case KR_SIMD_AMX:                                                                          \
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

#endif

#ifndef KR_LANES_TEMPLATE
#error "lanes.h: define KR_LANES_TEMPLATE, the file of hot loops to build per level"
#endif

/* a level a width: vmath.h sets up the level of KR_W floats */
#ifdef KR_LANES_X86
#define KR_W 16
#include "vmath.h"
#define KR_W 8
#include "vmath.h"
#endif
#define KR_W 4
#include "vmath.h"

#undef KR_LANES_TEMPLATE
