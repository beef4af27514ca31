/* test_fp_rates.c — the bench's phase ceiling: a phase whose attention runs at the products'
 * rate reaches the yardstick; at half the rate, its attention counts twice; counts or rates
 * that mean nothing give NAN. And the rates' measurement: nothing at the portable level, two
 * positive rates at each vector level this CPU has. */
#include "fp_rates.h"
#include "kronos.h"

#include <math.h>
#include <stdio.h>

static int failed;

static void expect_near(const char *what, double got, double want) {
    int ok = isnan(want) ? isnan(got) : fabs(got - want) < 1e-12;
    printf("%s - %s: %.6f\n", ok ? "ok" : "not ok", what, got);
    failed += !ok;
}

int main(void) {
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

    kb_fp_rates r;
    int rc = kb_fp_rates_measure(KR_SIMD_GENERIC, &r);
    printf("%s - the portable level measures nothing: %d\n", rc == -1 ? "ok" : "not ok", rc);
    failed += rc != -1;
    for (int level = KR_SIMD_AVX2; level <= (int)kr_simd_level(); level++) {
        rc = kb_fp_rates_measure(level, &r);
        int ok = rc == 0 && r.fma_gflops > 0 && r.muladd_gflops > 0 && isfinite(r.fma_gflops) &&
                 isfinite(r.muladd_gflops);
        printf("%s - level %s: fma %.1f, muladd %.1f GFLOP/s\n", ok ? "ok" : "not ok",
               kr_simd_name((kr_simd)level), r.fma_gflops, r.muladd_gflops);
        failed += !ok;
    }
    return failed ? 1 : 0;
}
