/* test_attention_exp.c — the exp of attention's softmax (exp_fma_sub in vmath.h, its scalar lane
 * exp1_fma in scalar.h): on every kernel level this CPU runs, each vector lane gives the bits
 * of the scalar lane on the same shifted score; the scalar lane stays within 2 ulp of e^x
 * recomputed in double precision, gives exactly 1 at 0 and exactly 0 at -inf and below
 * -87.3 (a masked key adds nothing to a softmax's sum). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h" /* kr_simd_set */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KR_LANES_TEMPLATE "attention_exp_probe.h"
#include "lanes.h"
KR_DISPATCH(exp_fma_sweep, (float *s, const float *mx, int n), (s, mx, n))

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Distance in units in the last place of float between a float and a double */
static double ulps(float got, double want) {
    double ulp = ldexp(1.0, ilogb(want) - 23);
    if (want < ldexp(1.0, -126)) ulp = ldexp(1.0, -149); /* subnormal results */
    return fabs((double)got - want) / ulp;
}

/* Every float in [-87.3, 0] at a stride of bit patterns, and the edges: within 2 ulp of
 * exp in double; 1 at 0 and -0; 0 at -inf and below -87.3 */
static void test_scalar_lane(void **state) {
    (void)state;
    double worst = 0;
    for (uint32_t u = 0x80000000u; u <= 0xc2aea000u; u += 61) { /* -0 down to about -87.3 */
        float x = from_bits(u);
        if (x < -87.3f) break;
        double d = ulps(exp1_fma(x), exp((double)x));
        if (d > worst) worst = d;
    }
    assert_true(worst <= 2.0);
    assert_true(exp1_fma(0.0f) == 1.0f);
    assert_true(exp1_fma(-0.0f) == 1.0f);
    assert_true(exp1_fma(-INFINITY) == 0.0f);
    assert_true(exp1_fma(-87.31f) == 0.0f);
    assert_true(exp1_fma(-1000.0f) == 0.0f);
    assert_true(exp1_fma(-87.3f) > 0.0f);
}

/* The vector lanes of every level against the scalar lane, on shifted scores s - mx: a sweep
 * of s over [-100, 50] with maxima at and above each s, -inf scores among them */
static void test_vector_lanes(void **state) {
    (void)state;
    enum { N = 1 << 16 };
    float *s = malloc(N * sizeof(float)), *mx = malloc(N * sizeof(float));
    float *in = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
    assert_true(s && mx && in && want);
    uint32_t seed = 7;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        float a = (float)(seed >> 8) / 16777216.0f; /* [0, 1) */
        seed = seed * 1664525u + 1013904223u;
        float b = (float)(seed >> 8) / 16777216.0f;
        in[i] = -100.0f + 150.0f * a;
        mx[i] = in[i] + (i % 7 == 0 ? 0.0f : 100.0f * b * b);
        if (i % 101 == 0) in[i] = -INFINITY;
        want[i] = exp1_fma(in[i] - mx[i]);
    }
    kr_simd best = kr_simd_level();
    for (int level = KR_SIMD_GENERIC; level <= (int)best; level++) {
        assert_int_equal(kr_simd_set((kr_simd)level), 0);
        memcpy(s, in, N * sizeof(float));
        exp_fma_sweep(s, mx, N);
        assert_memory_equal(s, want, N * sizeof(float));
    }
    kr_simd_set(best);
    free(s), free(mx), free(in), free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_lane),
        cmocka_unit_test(test_vector_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
