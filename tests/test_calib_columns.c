/* test_calib_columns.c — calibration of open, high and low beside close (kr_calibration's
 * columns, core/evaluate/calibration.c and eval_calibrated.c) on hand-computed cases:
 *   * the rules of the columns' part: a version 1 object has none, every shift finite;
 *   * a rolling evaluation of six origins: open, whose candles and paths are close's, gets
 *     close's calibrated quantiles and coverage; high and low, whose paths all miss the
 *     actual, get the shifts worked out by hand and their coverage;
 *   * a forecast calibrated by the fitted object answers each origin's column quantiles, bit
 *     for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h"
#include "kronos.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static kr_model *model;

static int setup(void **state) {
    (void)state;
    return (model = tu_load_tiny(64)) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    return 0;
}

static void test_column_rules(void **state) {
    (void)state;
    const double lv[] = {0.1, 0.9};
    kr_calibration c, bad;
    kr_error err = {0};
    assert_int_equal(kr_calibration_init(&c, "m1", 2, 4, lv, 2, &err), 0);
    assert_int_equal(c.version, 2);
    assert_false(c.has_columns);
    c.fitted = 10;
    c.has_columns = true;
    c.col_shift = calloc(KR_CALIB_COLS * 2 * 99, sizeof(double));
    assert_non_null(c.col_shift);
    assert_int_equal(kr_calibration_check(&c, &err), 0);
    assert_int_equal(kr_calibration_copy(&bad, &c, &err), 0);
    assert_memory_equal(bad.col_shift, c.col_shift, KR_CALIB_COLS * 2 * 99 * sizeof(double));
    bad.version = 1;
    tu_expect_invalid(kr_calibration_check(&bad, &err), &err, "calibration.columns");
    bad.version = 2;
    bad.col_shift[(2 * 2 + 1) * 99 + 7] = INFINITY; /* low, step 1, level 7 */
    tu_expect_invalid(kr_calibration_check(&bad, &err), &err, "calibration.columns.low[1][7]");
    kr_calibration_free(&bad);
    c.has_columns = false; /* a version 1 object: close only */
    c.version = 1;
    assert_int_equal(kr_calibration_check(&c, &err), 0);
    kr_calibration_free(&c);
}

/* tu_hand8 with open equal to close: each forecast's open path and quantiles at the last close
 * too, high and low at 0 while their candles are 1. */
static tu_hand8 hand;

static void hand_request(kr_evaluate_request *r) {
    tu_hand8_init(&hand, true);
    tu_hand8_request(&hand, r);
}

static void run_hand(const kr_evaluate_request *r, kr_evaluation *ev) {
    tu_hand8_run(model, &hand, r, ev);
}

static void test_rolling_columns(void **state) {
    (void)state;
    kr_evaluate_request r;
    hand_request(&r);
    r.calibration_mode = KR_CALIB_ROLLING;
    kr_evaluation ev;
    run_hand(&r, &ev);
    const kr_eval_calibrated *c = ev.calibrated;
    assert_true(c->fitted.has_columns);
    assert_non_null(c->col_quantiles);
    const size_t NQ = 6 * 3, H = 2; /* one pair; [raw, cal][column][pair][step, overall] */
    /* open is close over again */
    for (size_t i = 0; i < NQ; i++) {
        const double a = c->col_quantiles[i], b = c->quantiles[i];
        assert_true(isnan(a) ? isnan(b) : a == b);
    }
    assert_true(c->col_coverage[(0 * 3 + 0) * H + 1] == c->coverage[0 * H + 1]);
    assert_true(c->col_coverage[(1 * 3 + 0) * H + 1] == c->coverage[1 * H + 1]);
    /* high: scores 1 / last: 0.01, 0.01, 0.008, 0.01, 0.01, 0.008. Origin k (k earlier):
     * k 2 (last 125): 0.1 at rank 1, 0.9 at 2 of {0.01, 0.01}: [1.25, 1.25], 1 outside;
     * k 3, 4 (last 100): 0.008 and 0.01: [0.8, 1]; k 5 (last 125): [1, 1.25]; each covers 1 */
    const double lo[6] = {NAN, NAN, 1.25, 0.8, 0.8, 1}, hi[6] = {NAN, NAN, 1.25, 1, 1, 1.25};
    for (int j = 1; j < 3; j++) {
        for (int k = 0; k < 6; k++) {
            const double *q = c->col_quantiles + ((size_t)j * 6 + k) * 3;
            if (k < 2) {
                assert_true(isnan(q[0]) && isnan(q[2]));
                continue;
            }
            if (fabs(q[0] - lo[k]) > 1e-12 || fabs(q[2] - hi[k]) > 1e-12)
                fail_msg("column %d origin %d: [%.17g, %.17g], want [%g, %g]", j, k, q[0], q[2],
                         lo[k], hi[k]);
        }
        assert_true(c->col_coverage[(0 * 3 + j) * H + 1] == 0);    /* raw: 0 against 1 */
        assert_true(c->col_coverage[(1 * 3 + j) * H + 1] == 0.75); /* calibrated */
        assert_true(c->col_coverage[(1 * 3 + j) * H + 0] == 0.75);
        /* fitted on all six: the 0.1 level's rank 1 (0.008), 0.9's rank 6 (0.01) */
        const double *s = c->fitted.col_shift + (size_t)j * 99;
        assert_true(s[9] == 1.0 / 125 && s[89] == 1.0 / 100);
    }
    kr_evaluation_free(&ev);
}

static void test_forecast_columns(void **state) {
    (void)state;
    kr_evaluate_request r;
    hand_request(&r);
    kr_calibration obj;
    tu_hand8_fit(model, &hand, &r, &obj);
    kr_evaluation ev;
    run_hand(&r, &ev);
    assert_non_null(ev.calibrated->col_coverage);
    for (int k = 0; k < 6; k++) {
        kr_calibrated out;
        tu_hand8_calibrate(&hand, &obj, k, &out);
        assert_non_null(out.col_quantiles);
        for (int j = 0; j < 3; j++)
            assert_memory_equal(out.col_quantiles + (size_t)j * 3,
                                ev.calibrated->col_quantiles + ((size_t)j * 6 + k) * 3,
                                3 * sizeof(double));
        kr_calibrated_free(&out);
    }
    /* a close-only object calibrates no column */
    obj.has_columns = false;
    free(obj.col_shift);
    obj.col_shift = NULL;
    kr_evaluation_free(&ev);
    run_hand(&r, &ev);
    assert_null(ev.calibrated->col_coverage);
    assert_null(ev.calibrated->col_quantiles);
    kr_evaluation_free(&ev);
    kr_calibration_free(&obj);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_column_rules),
        cmocka_unit_test(test_rolling_columns),
        cmocka_unit_test(test_forecast_columns),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
