/* test_calibration.c — calibration (core/evaluate/calib_math.c, calibration.c,
 * eval_calibrated.c) on hand-computed cases:
 *   * the conformal rank, numpy's linear quantile, the rearranged shifted grid, the PIT
 *     within a grid, the quantile-form CRPS, pool-adjacent-violators, the P(up) map and its
 *     clamp, the KS distance, the grid;
 *   * the object's rules and its match to a request, each refusal naming its field;
 *   * a rolling evaluation of six origins whose every calibrated quantile and P(up) is worked
 *     out by hand from the outcomes before it, and the object fitted on all of them; an
 *     outcome changed moves only the origins made after it was known;
 *   * a forecast calibrated by an object equals the evaluation with that object, bit for bit. */
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

/* ---- the arithmetic ---------------------------------------------------------------------- */

static void test_conformal_rank(void **state) {
    (void)state;
    assert_int_equal(kr_conformal_rank(9, 0.1), 1);    /* floor(10 x 0.1) = 1 */
    assert_int_equal(kr_conformal_rank(9, 0.9), 9);    /* ceil(9) */
    assert_int_equal(kr_conformal_rank(9, 0.05), 1);   /* floor(0.5) = 0, clamped */
    assert_int_equal(kr_conformal_rank(9, 0.95), 9);   /* ceil(9.5) = 10, clamped */
    assert_int_equal(kr_conformal_rank(99, 0.9), 90);  /* 100 x 0.9 = 90.00000000000001 */
    assert_int_equal(kr_conformal_rank(4, 0.5), 3);    /* ceil(2.5) */
    assert_int_equal(kr_conformal_rank(19, 0.25), 5);  /* floor(5) */
    assert_int_equal(kr_conformal_rank(20, 0.25), 5);  /* floor(5.25) */
    assert_int_equal(kr_conformal_rank(20, 0.75), 16); /* ceil(15.75) */
}

static void test_quantile_and_rearrangement(void **state) {
    (void)state;
    const double x[] = {1, 2, 4, 8};
    assert_true(kr_quantile_linear(x, 4, 0.5) == 3.0); /* position 1.5 */
    assert_true(kr_quantile_linear(x, 4, 0.0) == 1.0);
    assert_true(kr_quantile_linear(x, 4, 1.0) == 8.0);
    assert_true(kr_quantile_linear(x, 1, 0.3) == 1.0);
    /* {1, 2, 3} + 10 x {0.05, -0.2, 0} = {1.5, 0, 3}, sorted */
    const double raw[] = {1, 2, 3}, shift[] = {0.05, -0.2, 0};
    double out[3];
    kr_calib_shifted(raw, 3, 10, shift, out);
    assert_true(out[0] == 0 && out[1] == 1.5 && out[2] == 3);
}

static void test_pit_in_grid(void **state) {
    (void)state;
    const double q[] = {1, 2, 2, 4}, lv[] = {0.2, 0.4, 0.6, 0.8};
    assert_true(kr_pit_in_grid(q, lv, 4, 0.5) == 0.1);            /* below: the first level / 2 */
    assert_true(kr_pit_in_grid(q, lv, 4, 5) == 0.9);              /* above: (1 + 0.8) / 2 */
    assert_true(kr_pit_in_grid(q, lv, 4, 2) == 0.5);              /* a run: its middle level */
    assert_true(kr_pit_in_grid(q, lv, 4, 1) == 0.2);              /* on a single quantile */
    assert_true(fabs(kr_pit_in_grid(q, lv, 4, 3) - 0.7) < 1e-15); /* 0.6 + 0.2 x 1/2 */
    assert_true(fabs(kr_pit_in_grid(q, lv, 4, 1.5) - 0.3) < 1e-15);
}

static void test_crps_quantile(void **state) {
    (void)state;
    /* q {1, 3} at {0.25, 0.75}, y 2: pinball 0.25 x 1 and 0.25 x 1; 2 x 0.5 / 2 */
    const double q[] = {1, 3}, lv[] = {0.25, 0.75};
    assert_true(kr_crps_quantile(q, lv, 2, 2) == 0.5);
    /* y 4: 0.25 x 3 + 0.75 x 1 = 1.5; 2 x 1.5 / 2 */
    assert_true(kr_crps_quantile(q, lv, 2, 4) == 1.5);
    /* y 0: 0.75 x 1 + 0.25 x 3 = 1.5 */
    assert_true(kr_crps_quantile(q, lv, 2, 0) == 1.5);
}

static void test_pav_and_map(void **state) {
    (void)state;
    double fit[4], scratch[12];
    const double w1[] = {1, 1, 1, 1}, s1[] = {1, 0, 1, 1};
    assert_int_equal(kr_pav(w1, s1, 4, fit, scratch), 3); /* 1, 0 pooled */
    assert_true(fit[0] == 0.5 && fit[1] == 0.5 && fit[2] == 1 && fit[3] == 1);
    const double s2[] = {0, 1, 0, 1};
    assert_int_equal(kr_pav(w1, s2, 4, fit, scratch), 3);
    assert_true(fit[0] == 0 && fit[1] == 0.5 && fit[2] == 0.5 && fit[3] == 1);
    const double w3[] = {2, 1}, s3[] = {2, 0}; /* means 1, 0 -> 2/3 both */
    assert_int_equal(kr_pav(w3, s3, 2, fit, scratch), 1);
    assert_true(fit[0] == 2.0 / 3 && fit[1] == 2.0 / 3);
    const double s4[] = {0, 1, 1, 1}, w4[] = {1, 2, 1, 1}; /* already monotone: 0, 0.5, 1, 1 */
    assert_int_equal(kr_pav(w4, s4, 4, fit, scratch), 4);
    assert_true(fit[0] == 0 && fit[1] == 0.5 && fit[2] == 1 && fit[3] == 1);
    /* the map: linear between points, the end's outside */
    const double x[] = {0, 0.5, 1}, y[] = {0.2, 0.4, 0.9};
    assert_true(kr_isotonic_at(x, y, 3, -0.1) == 0.2);
    assert_true(fabs(kr_isotonic_at(x, y, 3, 0.25) - 0.3) < 1e-15);
    assert_true(kr_isotonic_at(x, y, 3, 0.5) == 0.4);
    assert_true(fabs(kr_isotonic_at(x, y, 3, 0.75) - 0.65) < 1e-15);
    assert_true(kr_isotonic_at(x, y, 3, 2) == 0.9);
    assert_true(kr_isotonic_at(x, y, 1, 0.7) == 0.2);
    /* the fit clamps to [1 / (n + 2), (n + 1) / (n + 2)]: n = 2 -> [1/4, 3/4] */
    const double xs[] = {0, 1}, ws[] = {1, 1}, ss[] = {0, 1};
    double ox[2], oy[2];
    assert_int_equal(kr_isotonic_fit(xs, ws, ss, 2, ox, oy, scratch), 2);
    assert_true(ox[0] == 0 && ox[1] == 1 && oy[0] == 0.25 && oy[1] == 0.75);
}

static void test_ks_and_grid(void **state) {
    (void)state;
    double u1[] = {0.5};
    assert_true(kr_ks_uniform(u1, 1) == 0.5);
    double u2[] = {0.6, 0.1}; /* sorted {0.1, 0.6}: max(0.5 - 0.1, 1 - 0.6) */
    assert_true(fabs(kr_ks_uniform(u2, 2) - 0.4) < 1e-15);
    double u4[] = {0.125, 0.375, 0.625, 0.875}; /* midpoints: 1/8 */
    assert_true(fabs(kr_ks_uniform(u4, 4) - 0.125) < 1e-15);
    double grid[KR_CALIB_MAX_GRID];
    const double lv[] = {0.5, 0.025, 0.1};
    assert_int_equal(kr_calibration_grid(lv, 3, grid), 100);
    assert_true(grid[0] == 0.01 && grid[1] == 0.02 && grid[2] == 0.025 && grid[3] == 0.03);
    assert_true(grid[99] == 0.99 && grid[50] == 0.5);
    assert_true(kr_calib_is_fine(0.07) && kr_calib_is_fine(0.5) && !kr_calib_is_fine(0.025) &&
                !kr_calib_is_fine(1.0) && !kr_calib_is_fine(0.0));
}

/* ---- the object's rules ------------------------------------------------------------------ */

static void test_object_rules(void **state) {
    (void)state;
    const double lv[] = {0.1, 0.9};
    kr_calibration c, bad;
    kr_error err = {0};
    assert_int_equal(kr_calibration_init(&c, "m1", 2, 4, lv, 2, &err), 0);
    assert_int_equal(c.n_grid, 99);
    c.fitted = 10;
    assert_int_equal(kr_calibration_check(&c, &err), 0);
    assert_int_equal(kr_calibration_match(&c, "m1", 2, 4, lv, 2, &err), 0);
#define BROKEN(edit, field)                                                                        \
    do {                                                                                           \
        assert_int_equal(kr_calibration_copy(&bad, &c, &err), 0);                                  \
        edit;                                                                                      \
        tu_expect_invalid(kr_calibration_check(&bad, &err), &err, field);                          \
        kr_calibration_free(&bad);                                                                 \
    } while (0)
    BROKEN(bad.version = 3, "calibration.version");
    BROKEN(bad.fitted = 0, "calibration.origins");
    BROKEN(bad.grid[3] = 0.035, "calibration.grid[3]");
    BROKEN(bad.n_grid = 98, "calibration.grid");
    BROKEN(bad.levels[1] = 0.1, "calibration.quantiles[1]");
    BROKEN(bad.levels[0] = 1.5, "calibration.quantiles[0]");
    BROKEN(bad.shift[99 + 5] = NAN, "calibration.steps[1].shift[5]");
    BROKEN((bad.up_x[0] = 0.5, bad.up_x[1] = 0.5), "calibration.steps[0].up_x[1]");
    BROKEN((bad.up_y[0] = 0.6, bad.up_y[1] = 0.5), "calibration.steps[0].up_y[1]");
    BROKEN(bad.up_n[1] = 6, "calibration.steps[1].up_x");
    BROKEN(bad.up_n[1] = 0, "calibration.steps[1].up_x");
#undef BROKEN
    tu_expect_invalid(kr_calibration_match(&c, "m2", 2, 4, lv, 2, &err), &err, "calibration.model");
    tu_expect_invalid(kr_calibration_match(&c, "m1", 3, 4, lv, 2, &err), &err,
                      "calibration.horizon");
    tu_expect_invalid(kr_calibration_match(&c, "m1", 2, 8, lv, 2, &err), &err,
                      "calibration.samples");
    const double other[] = {0.1, 0.8};
    tu_expect_invalid(kr_calibration_match(&c, "m1", 2, 4, other, 2, &err), &err,
                      "calibration.quantiles");
    tu_expect_invalid(kr_calibration_match(&c, "m1", 2, 4, lv, 1, &err), &err,
                      "calibration.quantiles");
    kr_calibration_free(&c);
}

/* ---- rolling, by hand --------------------------------------------------------------------- */

/* tu_hand8 with open at 1. The outcomes' returns: 0, 0.25, -0.2, 0, 0.25, 0. */
static tu_hand8 hand;

static void hand_request(kr_evaluate_request *r) {
    tu_hand8_init(&hand, false);
    tu_hand8_request(&hand, r);
}

static void run_hand(const kr_evaluate_request *r, kr_evaluation *ev) {
    tu_hand8_run(model, &hand, r, ev);
}

static void test_rolling_by_hand(void **state) {
    (void)state;
    kr_evaluate_request r;
    hand_request(&r);
    r.calibration_mode = KR_CALIB_ROLLING;
    kr_evaluation ev;
    run_hand(&r, &ev);
    const kr_eval_calibrated *c = ev.calibrated;
    /* warm-up 2: origin k has k earlier outcomes, so k >= 2 are scored */
    assert_int_equal(c->first_scored, 2);
    assert_int_equal(c->scored, 4);
    /* origin 4 (k 2, last 125): scores {0, 0.25}: ranks 1 (0.1), 2 (0.5), 2 (0.9); origin 5
     * (last 100): {-0.2, 0, 0.25}: 1, 2, 3; origin 6 (last 100): {-0.2, 0, 0, 0.25}: 1, 3, 4;
     * origin 7 (last 125): {-0.2, 0, 0, 0.25, 0.25}: 1, 3, 5 */
    const double want[6][3] = {{NAN, NAN, NAN}, {NAN, NAN, NAN}, {125, 156.25, 156.25},
                               {80, 100, 125},  {80, 100, 125},  {100, 125, 156.25}};
    /* P(up): the raw is 0 everywhere; the ups before: {0, 1}, {0, 1, 0}, {0, 1, 0, 0},
     * {0, 1, 0, 0, 1} */
    const double up[6] = {NAN, NAN, 0.5, 1.0 / 3, 0.25, 0.4};
    for (int k = 0; k < 6; k++) {
        for (int q = 0; q < 3; q++) {
            const double got = c->quantiles[k * 3 + q];
            if (isnan(want[k][q]) ? !isnan(got) : got != want[k][q])
                fail_msg("origin %d level %d: %.17g, want %g", k, q, got, want[k][q]);
        }
        assert_true(isnan(up[k]) ? isnan(c->prob_close_up[k])
                                 : fabs(c->prob_close_up[k] - up[k]) < 1e-15);
    }
    const int H = 2;
    const double *cal = c->scores + KR_EVAL_METRICS * H, *raw = c->scores;
    /* coverage of 0.1-0.9: 100 outside [125, 156.25], then 100, 125, 125 inside */
    assert_true(c->coverage[1 * 1 * H + 0] == 0.75 && c->coverage[1 * 1 * H + 1] == 0.75);
    /* the raw band [last, last] on the same origins: 100 vs 100 and 125 vs 125 */
    assert_true(c->coverage[0 * H + 1] == 0.5);
    const double brier = (0.25 + 1.0 / 9 + 0.5625 + 0.16) / 4;
    assert_true(fabs(cal[KR_EVAL_BRIER * H + 1] - brier) < 1e-15);
    assert_true(raw[KR_EVAL_MAE * H + 1] == 12.5);   /* |125 - 100|, 0, 25, 0 */
    assert_true(raw[KR_EVAL_BRIER * H + 1] == 0.25); /* raw 0 against ups 0, 0, 1, 0 */
    /* the object fitted on all six: scores {-0.2, 0, 0, 0, 0.25, 0.25}: ranks 1, 4, 6 */
    const kr_calibration *f = &c->fitted;
    assert_int_equal(f->fitted, 6);
    assert_true(f->shift[9] == -0.2 && f->shift[49] == 0 && f->shift[89] == 0.25);
    assert_int_equal(f->up_n[0], 1);
    assert_true(f->up_x[0] == 0 && fabs(f->up_y[0] - 1.0 / 3) < 1e-15);
    kr_error err = {0};
    assert_int_equal(kr_calibration_check(f, &err), 0);
    kr_evaluation_free(&ev);
}

/* No look-ahead: an outcome changes only the origins made after it was known. Origin 6's
 * outcome (candle 6) is known from origin 7 on; origin 7's own outcome from none. */
static void test_no_look_ahead(void **state) {
    (void)state;
    kr_evaluate_request r;
    hand_request(&r);
    r.calibration_mode = KR_CALIB_ROLLING;
    kr_evaluation before, after;
    run_hand(&r, &before);
    const double keep6 = hand.close[6], keep7 = hand.close[7];
    hand.close[7] = 90; /* origin 7's outcome: no origin's calibration uses it */
    run_hand(&r, &after);
    assert_memory_equal(before.calibrated->quantiles, after.calibrated->quantiles,
                        6 * 3 * sizeof(double));
    assert_memory_equal(before.calibrated->prob_close_up, after.calibrated->prob_close_up,
                        6 * sizeof(double));
    kr_evaluation_free(&after);
    hand.close[7] = keep7;
    hand.close[6] = 150; /* origin 6's outcome: origin 7 (k 5) only */
    run_hand(&r, &after);
    assert_memory_equal(before.calibrated->quantiles, after.calibrated->quantiles,
                        5 * 3 * sizeof(double));
    assert_memory_equal(before.calibrated->prob_close_up, after.calibrated->prob_close_up,
                        5 * sizeof(double));
    assert_true(after.calibrated->quantiles[5 * 3 + 2] != before.calibrated->quantiles[5 * 3 + 2]);
    hand.close[6] = keep6;
    kr_evaluation_free(&after);
    kr_evaluation_free(&before);
}

/* A forecast calibrated by an object is the evaluation's origin with that object. */
static void test_given_equals_forecast(void **state) {
    (void)state;
    kr_evaluate_request r;
    hand_request(&r);
    kr_calibration obj;
    tu_hand8_fit(model, &hand, &r, &obj);
    kr_evaluation ev;
    run_hand(&r, &ev);
    assert_int_equal(ev.calibrated->scored, 6);
    for (int k = 0; k < 6; k++) {
        kr_calibrated out;
        tu_hand8_calibrate(&hand, &obj, k, &out);
        for (int q = 0; q < 3; q++)
            assert_memory_equal(&out.quantiles[q], &ev.calibrated->quantiles[k * 3 + q],
                                sizeof(double));
        assert_memory_equal(&out.prob_close_up[0], &ev.calibrated->prob_close_up[k],
                            sizeof(double));
        kr_calibrated_free(&out);
    }
    /* origin 5 (last 100): 100 (1 - 0.2), 100, 100 (1 + 0.25); P(up) 1/3 */
    assert_true(ev.calibrated->quantiles[3 * 3 + 0] == 80);
    assert_true(ev.calibrated->quantiles[3 * 3 + 2] == 125);
    /* a mismatched object is refused by the plan, naming the field */
    kr_evaluate_plan plan;
    kr_error err = {0};
    r.horizon = 2;
    tu_expect_invalid(kr_evaluate_plan_make(model, &r, &plan, &err), &err, "calibration.horizon");
    r.horizon = 1;
    r.model_id = "another";
    tu_expect_invalid(kr_evaluate_plan_make(model, &r, &plan, &err), &err, "calibration.model");
    r.calibration_mode = KR_CALIB_ROLLING;
    r.calibration_warmup = 0;
    tu_expect_invalid(kr_evaluate_plan_make(model, &r, &plan, &err), &err, "calibration_warmup");
    kr_evaluation_free(&ev);
    kr_calibration_free(&obj);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conformal_rank), cmocka_unit_test(test_quantile_and_rearrangement),
        cmocka_unit_test(test_pit_in_grid),    cmocka_unit_test(test_crps_quantile),
        cmocka_unit_test(test_pav_and_map),    cmocka_unit_test(test_ks_and_grid),
        cmocka_unit_test(test_object_rules),   cmocka_unit_test(test_rolling_by_hand),
        cmocka_unit_test(test_no_look_ahead),  cmocka_unit_test(test_given_equals_forecast),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
