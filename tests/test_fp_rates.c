/* test_fp_rates.c — the bench's phase ceiling: a phase whose attention runs at the products'
 * rate reaches the yardstick; at half the rate, its attention counts twice; counts or rates
 * that mean nothing give NAN. And the rates' measurement: nothing at the portable level, two
 * positive rates at each vector level this CPU has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fp_rates.h"
#include "kronos.h"

#include <math.h>
#include <stdio.h>

static void expect_near(const char *what, double got, double want) {
    if (!(isnan(want) ? isnan(got) : fabs(got - want) < 1e-12))
        fail_msg("%s: got %.6f, want %.6f", what, got, want);
}

/* The phase ceiling from a phase's attention share and that attention's rate. */
static void test_phase_ceiling(void **state) {
    (void)state;
    expect_near("no attention", kb_phase_ceiling(100, 0, 0.5), 1.0);
    expect_near("attention at the products' rate", kb_phase_ceiling(100, 10, 1.0), 1.0);
    expect_near("10% attention at half the rate", kb_phase_ceiling(100, 10, 0.5), 100.0 / 110.0);
    expect_near("all attention at half the rate", kb_phase_ceiling(100, 100, 0.5), 0.5);
    expect_near("attention at 3/4 of the rate", kb_phase_ceiling(200, 60, 0.75), 200.0 / 220.0);
    expect_near("a rate above 1", kb_phase_ceiling(100, 10, 1.5), NAN);
    expect_near("a rate of 0", kb_phase_ceiling(100, 10, 0), NAN);
    expect_near("a NAN rate", kb_phase_ceiling(100, 10, NAN), NAN);
    expect_near("more attention than work", kb_phase_ceiling(100, 101, 0.5), NAN);
    expect_near("no work", kb_phase_ceiling(0, 0, 0.5), NAN);
}

/* The rates' measurement: nothing at the portable level, two rates at each vector level. */
static void test_rates_measured(void **state) {
    (void)state;

    kb_fp_rates r;
    int rc = kb_fp_rates_measure(KR_SIMD_GENERIC, &r);
    assert_int_equal(rc, -1);
    for (int level = KR_SIMD_AVX2; level <= (int)kr_simd_level(); level++) {
        rc = kb_fp_rates_measure(level, &r);
        assert_int_equal(rc, 0);
        assert_true(r.fma_gflops > 0 && isfinite(r.fma_gflops));
        assert_true(r.muladd_gflops > 0 && isfinite(r.muladd_gflops));
        print_message("# level %s: fma %.1f, muladd %.1f GFLOP/s\n", kr_simd_name((kr_simd)level),
                      r.fma_gflops, r.muladd_gflops);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phase_ceiling),
        cmocka_unit_test(test_rates_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
