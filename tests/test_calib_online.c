/* test_calib_online.c — online calibration of a live series (core/evaluate/calib_online.c) on
 * hand-computed cases: the warm-up keeps the starting shifts, then each level's shift is its
 * conformal rank among the window's scores; adaptive conformal inference moves a level's rank
 * after an outcome of a forecast issued past the warm-up; the running coverage, Brier score
 * and PIT; the outcome of a candle is its most recent forecast's; a forecast from the same
 * origin replaces the unresolved one; a mismatched forecast is refused naming the field; the
 * same sequence gives the same object bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h"
#include "kronos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a and b within tol (0: equal) */
#define assert_near(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static const double levels[3] = {0.1, 0.5, 0.9};
/* four paths, sorted: the grid at 0.1 is 0.93, at 0.5 1.0, at 0.9 1.07 */
static const double paths[4] = {0.9, 1.0, 1.0, 1.1};

static kr_calib_online *online_of(int horizon) {
    kr_error err = {0};
    kr_calib_online *o = kr_calib_online_new(NULL, &err);
    assert_non_null(o);
    assert_false(kr_calib_online_shaped(o));
    assert_int_equal(kr_calib_online_fit(o, "m", horizon, 4, levels, 3, &err), 0);
    assert_true(kr_calib_online_shaped(o));
    return o;
}

static double shift_at(const kr_calib_online *o, int h, double level) {
    const kr_calibration *c = kr_calib_online_current(o);
    return c->shift[(size_t)h * c->n_grid + kr_calib_level_index(c, level)];
}

/* A one-step forecast from origin i, resolved by candle i at close y. */
static kr_online_outcome step_once(kr_calib_online *o, long i, double y, double p_up) {
    kr_error err = {0};
    kr_online_outcome out;
    assert_int_equal(kr_calib_online_keep(o, i, 1.0, paths, &p_up, &err), 0);
    assert_int_equal(kr_calib_online_resolve(o, i, y, &out, &err), 0);
    return out;
}

static void test_warmup_then_conformal_then_aci(void **state) {
    (void)state;
    kr_calib_online *o = online_of(1);
    double pits[KR_ONLINE_WARMUP + 1];
    int within = 0;
    for (int i = 0; i < KR_ONLINE_WARMUP; i++) {
        const double y = 1.005 + 0.01 * i;
        /* before the warm-up is over the shifts are the start's: 0 */
        assert_true(shift_at(o, 0, 0.1) == 0 && shift_at(o, 0, 0.5) == 0);
        const kr_online_outcome out = step_once(o, i, y, 0.5);
        within += y <= 1.07; /* above 0.93 always */
        assert_true(out.covered);
        assert_int_equal(out.step, 0);
        assert_int_equal(out.outside, y <= 1.07 ? 0u : 1u);
        pits[i] = out.pit;
    }
    /* 20 scores at 0.1: y - 0.93 = 0.075 + 0.01 i; rank floor(21 x 0.1) = 2: the second */
    assert_near(shift_at(o, 0, 0.1), (1.015 - 0.93), 1e-12);
    /* at 0.5: y - 1 = 0.005 + 0.01 i; rank ceil(21 x 0.5) = 11 */
    assert_near(shift_at(o, 0, 0.5), 1.105 - 1.0, 1e-12);
    /* an outcome above everything, of a forecast issued past the warm-up: at 0.5 tau moves
     * to 0.5 + 0.005 x 0.5 = 0.5025 and the rank to ceil(22 x 0.5025) = 12 of 21 scores
     * (the new one 1.0 the largest); without the move it would be ceil(22 x 0.5) = 11 */
    const kr_online_outcome out = step_once(o, KR_ONLINE_WARMUP, 2.0, 0.75);
    assert_true(out.covered);
    assert_int_equal(out.outside, 1u);
    assert_near(out.pit, (1 + 0.99) / 2, 1e-12);
    pits[KR_ONLINE_WARMUP] = out.pit;
    assert_near(shift_at(o, 0, 0.5), 1.115 - 1.0, 1e-12);
    kr_calib_online_stats st;
    kr_calib_online_stats_get(o, &st);
    assert_int_equal(st.resolved, KR_ONLINE_WARMUP + 1);
    assert_int_equal(st.n_pairs, 1);
    assert_near(st.pair_lo[0], 0.1, 0);
    assert_near(st.pair_hi[0], 0.9, 0);
    assert_near(st.coverage[0], (double)within / (KR_ONLINE_WARMUP + 1), 1e-15);
    /* Brier: the first 20 said 0.5 (the identity map) of an up (y > 1: every one); the last,
     * past the warm-up, the isotonic map of 20 ups at 0.5: one point, 1 clamped to 21 / 22 */
    assert_near(st.brier, (20 * 0.25 + 1.0 / 484) / 21, 1e-12);
    /* the PIT's KS distance, worked out from the PITs the outcomes reported */
    double d = 0;
    for (int i = 0; i < KR_ONLINE_WARMUP + 1; i++)
        for (int j = i + 1; j < KR_ONLINE_WARMUP + 1; j++)
            if (pits[j] < pits[i]) {
                const double t = pits[i];
                pits[i] = pits[j];
                pits[j] = t;
            }
    const int n = KR_ONLINE_WARMUP + 1;
    for (int i = 0; i < n; i++) {
        d = fmax(d, (i + 1.0) / n - pits[i]);
        d = fmax(d, pits[i] - (double)i / n);
    }
    assert_near(st.pit_ks, d, 1e-15);
    kr_calib_online_free(o);
}

static void test_most_recent_and_replace(void **state) {
    (void)state;
    kr_calib_online *o = online_of(2);
    kr_error err = {0};
    const double two[8] = {0.9, 1.0, 1.0, 1.1, 0.8, 1.0, 1.0, 1.2}, up[2] = {0.5, 0.5};
    kr_online_outcome out;
    assert_int_equal(kr_calib_online_keep(o, 0, 1.0, two, up, &err), 0);
    assert_int_equal(kr_calib_online_keep(o, 0, 1.0, two, up, &err), 0); /* replaces */
    assert_int_equal(kr_calib_online_resolve(o, 0, 1.0, &out, &err), 0);
    assert_true(out.covered);
    assert_int_equal(out.step, 0);
    assert_int_equal(kr_calib_online_keep(o, 1, 1.0, two, up, &err), 0);
    /* candle 1: step 1 of origin 0 (0.86 to 1.14: 1.12 is inside) and step 0 of origin 1
     * (the narrow one: outside); the outcome is the most recent forecast's */
    assert_int_equal(kr_calib_online_resolve(o, 1, 1.12, &out, &err), 0);
    assert_int_equal(out.step, 0);
    assert_int_equal(out.outside, 1u);
    kr_calib_online_stats st;
    kr_calib_online_stats_get(o, &st);
    assert_int_equal(st.resolved, 3);
    assert_near(st.coverage[0], 2.0 / 3, 1e-15);
    /* a candle nothing forecast */
    assert_int_equal(kr_calib_online_resolve(o, 9, 1.0, &out, &err), 0);
    assert_false(out.covered);
    kr_calib_online_free(o);
}

static void test_refusals(void **state) {
    (void)state;
    kr_calib_online *o = online_of(2);
    kr_error err = {0};
    assert_int_equal(kr_calib_online_fit(o, "m", 3, 4, levels, 3, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "horizon: must be 2"));
    assert_int_equal(kr_calib_online_fit(o, "m", 2, 5, levels, 3, &err), -1);
    assert_non_null(strstr(err.msg, "samples: must be 4"));
    assert_int_equal(kr_calib_online_fit(o, "m", 2, 4, levels, 2, &err), -1);
    assert_non_null(strstr(err.msg, "quantiles:"));
    assert_int_equal(kr_calib_online_fit(o, "other", 2, 4, levels, 3, &err), -1);
    assert_non_null(strstr(err.msg, "\"m\""));
    assert_int_equal(kr_calib_online_fit(o, "m", 2, 4, levels, 3, &err), 0);
    kr_calib_online_free(o);
}

/* Fed the same forecasts and closes, two states are the same object bit for bit; one that
 * started from an object keeps its shifts through the warm-up. */
static void test_same_sequence_same_bits(void **state) {
    (void)state;
    kr_error err = {0};
    kr_calibration start;
    assert_int_equal(kr_calibration_init(&start, "m", 1, 4, levels, 3, &err), 0);
    start.fitted = 7;
    for (int g = 0; g < start.n_grid; g++)
        start.shift[g] = 0.001 * g;
    kr_calib_online *a = kr_calib_online_new(&start, &err), *b = kr_calib_online_new(&start, &err);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 3 * KR_ONLINE_WARMUP; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const double y = 0.9 + 0.2 * (double)(x % 1000) / 1000, p = (double)(x % 5) / 4;
        if (i < KR_ONLINE_WARMUP) assert_near(shift_at(a, 0, 0.5), 0.001 * 49, 0);
        step_once(a, i, y, p);
        step_once(b, i, y, p);
    }
    const kr_calibration *ca = kr_calib_online_current(a), *cb = kr_calib_online_current(b);
    assert_memory_equal(ca->shift, cb->shift, (size_t)ca->n_grid * sizeof *ca->shift);
    assert_int_equal(ca->up_n[0], cb->up_n[0]);
    assert_memory_equal(ca->up_y, cb->up_y, (size_t)ca->up_n[0] * sizeof *ca->up_y);
    assert_int_equal(kr_calibration_check(ca, &err), 0);
    assert_true(shift_at(a, 0, 0.5) != 0.001 * 49);
    kr_calib_online_free(a);
    kr_calib_online_free(b);
    kr_calibration_free(&start);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_then_conformal_then_aci),
        cmocka_unit_test(test_most_recent_and_replace),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_same_sequence_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
