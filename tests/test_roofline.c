/* test_roofline.c — the bench's phase ceiling: a phase bound by its FLOPs reaches the
 * yardstick; one whose products or attention wait for their bytes reaches the share their
 * FLOPs' time is of the parts' times added; counts or rates that mean nothing give NAN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "roofline.h"

#include <math.h>

static void expect_near(const char *what, double got, double want) {
    if (!(isnan(want) ? isnan(got) : fabs(got - want) < 1e-12))
        fail_msg("%s: got %.6f, want %.6f", what, got, want);
}

/* 100 GFLOP/s and 10 GB/s: a GFLOP takes 10 ms, a GB 100 ms. */
static double ceiling(double flops, double attn, double weights, double kv) {
    return kb_phase_ceiling((kb_phase_work){flops, attn, weights, kv}, 100, 10);
}

static void test_bound_by_flops(void **state) {
    (void)state;
    expect_near("no bytes", ceiling(1e9, 1e8, 0, 0), 1.0);
    expect_near("bytes within the FLOPs' time", ceiling(1e9, 1e8, 9e7, 1e7), 1.0);
    expect_near("no attention", ceiling(1e9, 0, 1e8, 0), 1.0);
}

static void test_bound_by_bytes(void **state) {
    (void)state;
    /* products 9 ms of FLOPs against 20 ms of weights; attention 1 ms of both */
    expect_near("weights", ceiling(1e9, 1e8, 2e8, 1e7), 10.0 / 21.0);
    /* products 9 ms; attention 1 ms of FLOPs against 5 ms of keys and values */
    expect_near("keys and values", ceiling(1e9, 1e8, 0, 5e7), 10.0 / 14.0);
    /* the parts add: each bound by its own bytes */
    expect_near("both", ceiling(1e9, 1e8, 2e8, 5e7), 10.0 / 25.0);
    /* a part's bytes do not hide behind the other part's FLOPs */
    expect_near("attention's bytes beside long products", ceiling(1e9, 1e7, 0, 2e7),
                10.0 / (9.9 + 2.0));
}

static void test_meaningless(void **state) {
    (void)state;
    expect_near("no work", ceiling(0, 0, 0, 0), NAN);
    expect_near("more attention than work", ceiling(1e9, 2e9, 0, 0), NAN);
    expect_near("negative attention", ceiling(1e9, -1, 0, 0), NAN);
    expect_near("negative bytes", ceiling(1e9, 0, -1, 0), NAN);
    expect_near("NAN bytes", ceiling(1e9, 0, 0, NAN), NAN);
    kb_phase_work w = {1e9, 1e8, 0, 0};
    expect_near("no bandwidth", kb_phase_ceiling(w, 100, 0), NAN);
    expect_near("a NAN bandwidth", kb_phase_ceiling(w, 100, NAN), NAN);
    expect_near("no peak", kb_phase_ceiling(w, 0, 10), NAN);
    expect_near("an infinite peak", kb_phase_ceiling(w, INFINITY, 10), NAN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_by_flops),
        cmocka_unit_test(test_bound_by_bytes),
        cmocka_unit_test(test_meaningless),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
