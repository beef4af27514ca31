/* test_anomalies.c — anomaly flags of an evaluation (kr_anomalies, core/evaluate):
 *   * a hand-made two-origin evaluation with two symmetric pairs: which origin-steps are
 *     flagged for each band, the bounds counted inside, every pair an actual fell outside of
 *     (outermost first), the PIT, the counts;
 *   * the same evaluation calibrated by a given identity object: flagged against the paths'
 *     own (numpy linear) quantiles and the calibrated PIT;
 *   * the contract: a band that is not one of the request's pairs is KR_E_INVALID naming
 *     anomalies.band and listing the pairs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h"
#include "kronos.h"
#include "test_util.h"

#include <math.h>
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

static int64_t t6[6] = {0, 60, 120, 180, 240, 300};
static double one6[6] = {1, 1, 1, 1, 1, 1};
/* lookback 2, horizon 2: origins 2 and 4; actual closes 11, 12 and 12, 9 */
static double close6[6] = {10, 10, 11, 12, 12, 9};
static const double levels[4] = {0.05, 0.1, 0.9, 0.95};

static void hand_request(kr_evaluate_request *r, double lo, double hi) {
    kr_evaluate_request_init(r);
    r->candles = (kr_candles){6, t6, {one6, one6, one6, close6, NULL, NULL}};
    r->lookback = 2;
    r->horizon = 2;
    r->samples = 2;
    r->n_quantiles = 4;
    memcpy(r->quantiles, levels, sizeof levels);
    r->anomalies = true;
    r->anomaly_lo = lo;
    r->anomaly_hi = hi;
}

/* The two origins' forecasts, hand-made: paths [k][p][h] and quantiles [k][q][h]. */
static void hand_evaluation(const kr_evaluate_request *r, kr_evaluation *ev) {
    static const double paths[2][2][2] = {{{9, 12}, {13, 12}}, {{14, 8}, {15, 10}}};
    /* origin 2, step 1: 11 above 0.9's 10.5, within 0.95's 11.5; step 2: 12 on every bound;
     * origin 4, step 1: 12 below both pairs; step 2: 9 within both */
    static const double qs[2][4][2] = {{{9, 12}, {10, 12}, {10.5, 12}, {11.5, 12}},
                                       {{13, 8}, {13.5, 8.5}, {14, 9.5}, {15, 10}}};
    kr_evaluate_plan plan;
    kr_error err = {0};
    if (kr_evaluate_plan_make(model, r, &plan, &err)) fail_msg("%s", err.msg);
    assert_int_equal(kr_evaluation_init(r, &plan, ev, &err), 0);
    assert_int_equal(ev->n_pairs, 2);
    for (int k = 0; k < 2; k++) {
        kr_forecast_result res = {.horizon = 2, .samples = 2, .n_quantiles = 4};
        double mean[KR_D_IN * 2] = {0}, pa[2 * KR_D_IN * 2] = {0}, q[4 * KR_D_IN * 2] = {0};
        double up[2] = {0.5, 0.5};
        for (int h = 0; h < 2; h++) {
            mean[KR_CLOSE * 2 + h] = (paths[k][0][h] + paths[k][1][h]) / 2;
            for (int p = 0; p < 2; p++)
                pa[(p * KR_D_IN + KR_CLOSE) * 2 + h] = paths[k][p][h];
            for (int l = 0; l < 4; l++)
                q[(l * KR_D_IN + KR_CLOSE) * 2 + h] = qs[k][l][h];
        }
        res.mean = mean;
        res.paths = pa;
        res.quantiles = q;
        res.prob_close_up = up;
        assert_int_equal(kr_evaluation_add(ev, r, k, &res, &err), 0);
    }
    if (kr_evaluation_finish(ev, r, &err)) fail_msg("%s", err.msg);
}

static void test_raw_flags(void **state) {
    (void)state;
    kr_evaluate_request r;
    kr_evaluation ev;
    hand_request(&r, 0.1, 0.9);
    hand_evaluation(&r, &ev);
    const kr_anomalies *a = ev.anomalies;
    assert_non_null(a);
    assert_false(a->calibrated);
    assert_int_equal(a->pair, 1); /* 0.05-0.95 is the outermost, pair 0 */
    assert_int_equal(a->checked, 4);
    assert_int_equal(a->count, 2);
    /* origin 0 step 0: outside 0.1-0.9 only; share of {9, 13} below 11: 0.5 */
    assert_int_equal(a->points[0].origin, 0);
    assert_int_equal(a->points[0].step, 0);
    assert_int_equal(a->points[0].outside, 2u);
    assert_true(a->points[0].pit == 0.5);
    assert_true(a->points[0].lower == 10 && a->points[0].upper == 10.5);
    /* origin 1 step 0: outside both; none of {14, 15} below 12 */
    assert_int_equal(a->points[1].origin, 1);
    assert_int_equal(a->points[1].step, 0);
    assert_int_equal(a->points[1].outside, 3u);
    assert_true(a->points[1].pit == 0.0);
    assert_true(a->points[1].lower == 13.5 && a->points[1].upper == 14);
    kr_evaluation_free(&ev);
    assert_null(ev.anomalies);

    hand_request(&r, 0.05, 0.95);
    hand_evaluation(&r, &ev);
    a = ev.anomalies;
    assert_int_equal(a->pair, 0);
    assert_int_equal(a->count, 1);
    assert_int_equal(a->points[0].origin, 1);
    assert_int_equal(a->points[0].outside, 3u);
    assert_true(a->points[0].lower == 13 && a->points[0].upper == 15);
    kr_evaluation_free(&ev);

    r.anomalies = false;
    hand_evaluation(&r, &ev);
    assert_null(ev.anomalies);
    kr_evaluation_free(&ev);
}

static void test_calibrated_flags(void **state) {
    (void)state;
    kr_evaluate_request r;
    kr_evaluation ev;
    kr_calibration c;
    kr_error err = {0};
    hand_request(&r, 0.1, 0.9);
    if (kr_calibration_init(&c, NULL, 2, 2, levels, 4, &err)) fail_msg("%s", err.msg);
    c.fitted = 1; /* an object says what it was fitted on */
    r.calibration_mode = KR_CALIB_GIVEN;
    r.calibration = &c;
    hand_evaluation(&r, &ev);
    const kr_anomalies *a = ev.anomalies;
    assert_true(a->calibrated);
    assert_int_equal(a->checked, 4);
    /* identity: the paths' linear quantiles. {9, 13}: 0.1-0.9 is 9.4..12.6, 11 within;
     * {14, 15}: 14.1..14.9, 12 below both pairs (0.05-0.95: 14.05..14.95); {12, 12}: 12;
     * {8, 10}: 8.2..9.8, 9 within */
    assert_int_equal(a->count, 1);
    assert_int_equal(a->points[0].origin, 1);
    assert_int_equal(a->points[0].step, 0);
    assert_int_equal(a->points[0].outside, 3u);
    assert_true(fabs(a->points[0].lower - 14.1) < 1e-12);
    assert_true(fabs(a->points[0].upper - 14.9) < 1e-12);
    /* below the whole grid (0.01 .. 0.99): half its first level */
    assert_true(fabs(a->points[0].pit - 0.005) < 1e-12);
    kr_evaluation_free(&ev);
    kr_calibration_free(&c);
}

static void test_contract(void **state) {
    (void)state;
    kr_evaluate_request r;
    kr_evaluate_plan plan;
    kr_error err = {0};
    hand_request(&r, 0.2, 0.8);
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_true(strncmp(err.msg, "anomalies.band:", 15) == 0);
    assert_non_null(strstr(err.msg, "\"0.05-0.95\""));
    assert_non_null(strstr(err.msg, "\"0.1-0.9\""));
    hand_request(&r, 0.9, 0.1); /* the pair's order matters */
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), -1);
    assert_true(strncmp(err.msg, "anomalies.band:", 15) == 0);
    hand_request(&r, 0.1, 0.9);
    r.n_quantiles = 1;
    r.quantiles[0] = 0.5;
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), -1);
    assert_true(strncmp(err.msg, "anomalies.band:", 15) == 0);
    assert_non_null(strstr(err.msg, "no symmetric pair"));
    hand_request(&r, 0.1, 0.9);
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_flags),
        cmocka_unit_test(test_calibrated_flags),
        cmocka_unit_test(test_contract),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
