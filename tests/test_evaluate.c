/* test_evaluate.c — walk-forward evaluation (core/evaluate):
 *   * each score on small hand-computed cases (ensemble CRPS, Gaussian CRPS, PIT share,
 *     log-return sd) and the per-step tables of a hand-made two-origin evaluation;
 *   * the request contract: defaults, origins, each rule named by its field;
 *   * window mode: origin o is, bit for bit in mean and quantiles, kr_forecast of
 *     candles[o - lookback, o) with the actual timestamps;
 *   * live mode: origin o is, bit for bit in mean, the forecast of a series created with the
 *     first window and appended up to o (sliding past max_context too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h"
#include "kronos.h"
#include "run.h" /* kr_forecast_series */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N      160
#define WINDOW 64

static kr_model *model;
static int64_t ts[N];
static double cols[KR_D_IN][N];

static int setup(void **state) {
    (void)state;
    if (!(model = tu_load_tiny(WINDOW))) return -1;
    double *const c[KR_D_IN] = {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]};
    tu_random_candles(4242u, N, ts, c);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    return 0;
}

static void series_request(kr_evaluate_request *r) {
    kr_evaluate_request_init(r);
    r->candles.n = N;
    r->candles.timestamps = ts;
    for (int c = 0; c < KR_D_IN; c++)
        r->candles.columns[c] = cols[c];
}

/* ---- the scores on hand-computed cases ------------------------------------------------------ */

static void test_crps_ensemble(void **state) {
    (void)state;
    /* x = {1, 2, 4}, y = 3: mean|x - y| = (2 + 1 + 1) / 3 = 4/3; pairs: |1-2| + |1-4| + |2-4|
     * = 6, twice over 9 pairs = 12/9; CRPS = 4/3 - 6/9 = 2/3 */
    const double x[] = {1, 2, 4};
    assert_true(fabs(kr_crps_ensemble_sorted(x, 3, 3.0) - 2.0 / 3.0) < 1e-15);
    /* one member: the absolute error */
    assert_true(kr_crps_ensemble_sorted(x, 1, 3.5) == 2.5);
    /* x = {0, 0, 10, 10}, y = 5: mean|x - y| = 5; pairs: 8 of |0 - 10| over 16 = 5; 5 - 2.5 */
    const double z[] = {0, 0, 10, 10};
    assert_true(fabs(kr_crps_ensemble_sorted(z, 4, 5.0) - 2.5) < 1e-15);
}

static void test_crps_gaussian(void **state) {
    (void)state;
    /* at the mean: sd (2 phi(0) - 1/sqrt(pi)) = sd (sqrt(2) - 1) / sqrt(pi) */
    assert_true(fabs(kr_crps_gaussian(10, 2, 10) - 2 * (sqrt(2.0) - 1) / sqrt(M_PI)) < 1e-14);
    /* sd 0: the absolute error */
    assert_true(kr_crps_gaussian(10, 0, 12.5) == 2.5);
    /* far out it tends to |y - mu| - sd / sqrt(pi) */
    assert_true(fabs(kr_crps_gaussian(0, 1, 40) - (40 - 1 / sqrt(M_PI))) < 1e-12);
    assert_true(fabs(kr_normal_cdf(0) - 0.5) < 1e-16);
    assert_true(fabs(kr_normal_cdf(1.959963984540054) - 0.975) < 1e-12);
}

static void test_pit_share_and_sd(void **state) {
    (void)state;
    const double x[] = {1, 2, 2, 3};
    assert_true(kr_share_below_sorted(x, 4, 2.0) == 0.5); /* 1 below, 2 ties: (1 + 1) / 4 */
    assert_true(kr_share_below_sorted(x, 4, 0.5) == 0.0);
    assert_true(kr_share_below_sorted(x, 4, 9.0) == 1.0);
    /* closes 1, e, e^3: log-returns 1 and 2, mean 1.5, population sd 0.5 */
    const double c[] = {1, M_E, M_E * M_E * M_E};
    assert_true(fabs(kr_log_return_sd(c, 3) - 0.5) < 1e-14);
    const double bad[] = {1, 0, 2};
    assert_true(isnan(kr_log_return_sd(bad, 3)));
}

/* Two origins of two steps and two paths, made by hand; every table checked. */
static void test_tables_by_hand(void **state) {
    (void)state;
    static int64_t t[6] = {0, 60, 120, 180, 240, 300};
    static double o[6] = {1, 1, 1, 1, 1, 1};
    /* closes: lookback 2; origins 2 and 4 (stride 2); last closes 10 and 12 */
    static double close[6] = {10, 10, 11, 12, 12, 9};
    kr_evaluate_request r;
    kr_evaluate_request_init(&r);
    r.candles = (kr_candles){6, t, {o, o, o, close, NULL, NULL}};
    r.lookback = 2;
    r.horizon = 2;
    r.samples = 2;
    r.n_quantiles = 2;
    r.quantiles[0] = 0.1;
    r.quantiles[1] = 0.9;
    kr_evaluate_plan plan;
    kr_error err = {0};
    if (kr_evaluate_plan_make(model, &r, &plan, &err)) fail_msg("%s", err.msg);
    assert_int_equal(plan.origins, 2);
    assert_int_equal(plan.first_origin, 2);
    assert_int_equal(plan.last_origin, 4);
    kr_evaluation ev;
    assert_int_equal(kr_evaluation_init(&r, &plan, &ev, &err), 0);
    assert_int_equal(ev.n_pairs, 1);
    /* origin 2 (last 10, actual 11, 12): paths {9, 13} at step 1, {12, 12} at step 2
     * origin 4 (last 12, actual 12, 9): paths {12, 14}, {8, 10} */
    const double paths[2][2][2] = {{{9, 12}, {13, 12}}, {{12, 8}, {14, 10}}}; /* [k][p][h] */
    const double qs[2][2][2] = {{{9.4, 12}, {12.6, 12}},
                                {{12.2, 8.2}, {13.8, 9.8}}}; /* [k][q][h] */
    const double prob[2][2] = {{0.5, 1}, {0.5, 0}};
    for (int k = 0; k < 2; k++) {
        kr_forecast_result res = {.horizon = 2, .samples = 2, .n_quantiles = 2};
        double mean[KR_D_IN * 2] = {0}, pa[2 * KR_D_IN * 2] = {0}, q[2 * KR_D_IN * 2] = {0};
        double up[2];
        for (int h = 0; h < 2; h++) {
            mean[KR_CLOSE * 2 + h] = (paths[k][0][h] + paths[k][1][h]) / 2;
            for (int p = 0; p < 2; p++)
                pa[(p * KR_D_IN + KR_CLOSE) * 2 + h] = paths[k][p][h];
            for (int l = 0; l < 2; l++)
                q[(l * KR_D_IN + KR_CLOSE) * 2 + h] = qs[k][l][h];
            up[h] = prob[k][h];
        }
        res.mean = mean;
        res.paths = pa;
        res.quantiles = q;
        res.prob_close_up = up;
        assert_int_equal(kr_evaluation_add(&ev, &r, k, &res, &err), 0);
    }
    assert_int_equal(kr_evaluation_add(&ev, &r, 0, &(kr_forecast_result){0}, &err), -1);
    assert_int_equal(kr_evaluation_finish(&ev, &r, &err), 0);
    const int H = 3;
    const double *model_s = ev.scores, *pers = ev.scores + KR_EVAL_METRICS * H;
    const double *rw = ev.scores + 2 * KR_EVAL_METRICS * H;
#define AT(s, metric, h) (s)[(metric)*H + (h)]
    /* model means: origin 2: 11, 12 (actual 11, 12): errors 0, 0; origin 4: 13, 9 (actual
     * 12, 9): errors 1, 0 */
    assert_true(AT(model_s, KR_EVAL_MAE, 0) == 0.5);
    assert_true(AT(model_s, KR_EVAL_MAE, 1) == 0.0);
    assert_true(AT(model_s, KR_EVAL_MAE, 2) == 0.25);
    assert_true(fabs(AT(model_s, KR_EVAL_RMSE, 0) - sqrt(0.5)) < 1e-15);
    assert_true(AT(model_s, KR_EVAL_RMSE, 2) == 0.5);
    assert_true(fabs(AT(model_s, KR_EVAL_MAPE, 0) - 100 * (1.0 / 12) / 2) < 1e-12);
    /* direction: step 1: origin 2 sign(11-10) = sign(11-10); origin 4 sign(13-12) = 1 vs
     * sign(12-12) = 0: 1/2; step 2: 12 vs 12 up, up; 9 vs 9 down, down: 1 */
    assert_true(AT(model_s, KR_EVAL_DIRECTION, 0) == 0.5);
    assert_true(AT(model_s, KR_EVAL_DIRECTION, 1) == 1.0);
    assert_true(AT(model_s, KR_EVAL_DIRECTION, 2) == 0.75);
    /* Brier: step 1: (0.5 - 1)^2, (0.5 - 0)^2 -> 0.25; step 2: (1 - 1)^2, (0 - 0)^2 -> 0 */
    assert_true(AT(model_s, KR_EVAL_BRIER, 0) == 0.25);
    assert_true(AT(model_s, KR_EVAL_BRIER, 1) == 0.0);
    /* CRPS step 1: {9, 13} vs 11: 2 - 4/2... mean|x-y| = 2, pairs 2*4/4 = 2, 2 - 1 = 1;
     * {12, 14} vs 12: 1 - 0.5 = 0.5 -> 0.75; step 2: {12, 12} vs 12: 0; {8, 10} vs 9: 1 - 0.5
     * = 0.5 -> 0.25 */
    assert_true(AT(model_s, KR_EVAL_CRPS, 0) == 0.75);
    assert_true(AT(model_s, KR_EVAL_CRPS, 1) == 0.25);
    assert_true(AT(model_s, KR_EVAL_CRPS, 2) == 0.5);
    /* coverage [q0.1, q0.9]: 11 in [9.4, 12.6], 12 in [12, 12], 12 in [12.2, 13.8] no, 9 in
     * [8.2, 9.8] */
    assert_true(ev.coverage[0 * H + 0] == 0.5);
    assert_true(ev.coverage[0 * H + 1] == 1.0);
    assert_true(ev.coverage[0 * H + 2] == 0.75);
    /* persistence: last 10 vs 11, 12; 12 vs 12, 9: errors 1, 2, 0, 3 */
    assert_true(AT(pers, KR_EVAL_MAE, 0) == 0.5);
    assert_true(AT(pers, KR_EVAL_MAE, 1) == 2.5);
    assert_true(AT(pers, KR_EVAL_CRPS, 2) == 1.5);
    assert_true(isnan(AT(pers, KR_EVAL_DIRECTION, 0)) && isnan(AT(pers, KR_EVAL_BRIER, 0)));
    assert_true(isnan(ev.coverage[1 * H + 0]));
    /* random walk: the same point; Brier 0.25; sigma: origin 2 from closes 10, 10 -> 0, so a
     * point mass: CRPS = |error|; origin 4 from 11, 12: one return, sd 0 again */
    assert_true(AT(rw, KR_EVAL_MAE, 2) == AT(pers, KR_EVAL_MAE, 2));
    assert_true(AT(rw, KR_EVAL_BRIER, 2) == 0.25);
    assert_true(AT(rw, KR_EVAL_CRPS, 2) == 1.5);
    assert_true(isnan(AT(rw, KR_EVAL_DIRECTION, 2)));
    /* skill vs persistence: MAE 1 - 0.25 / 1.5, CRPS 1 - 0.5 / 1.5 */
    assert_true(fabs(ev.skill[0 * H + 2] - (1 - 0.25 / 1.5)) < 1e-15);
    assert_true(fabs(ev.skill[1 * H + 2] - (1 - 0.5 / 1.5)) < 1e-15);
    /* PIT: step 1: 11 vs {9, 13}: 0.5; 12 vs {12, 14}: 0.25; step 2: 12 vs {12, 12}: 0.5;
     * 9 vs {8, 10}: 0.5 -> bins 5: 3/4, 2: 1/4 */
    assert_true(ev.pit[5] == 0.75 && ev.pit[2] == 0.25);
#undef AT
    kr_evaluation_free(&ev);
}

/* ---- the contract ------------------------------------------------------------------------- */

static void expect_invalid(const kr_evaluate_request *r, const char *field) {
    kr_evaluate_plan plan;
    kr_error err = {0};
    assert_int_equal(kr_evaluate_plan_make(model, r, &plan, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    if (strncmp(err.msg, field, strlen(field)) != 0) fail_msg("%s: %s", field, err.msg);
}

static void test_contract(void **state) {
    (void)state;
    kr_evaluate_request r;
    kr_evaluate_plan plan;
    kr_error err = {0};
    series_request(&r);
    r.lookback = 40;
    r.horizon = 8;
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), 0);
    /* origins 40, 48, ..., 152 (160 - 8) */
    assert_int_equal(plan.stride, 8);
    assert_int_equal(plan.first_origin, 40);
    assert_int_equal(plan.last_origin, 152);
    assert_int_equal(plan.origins, 15);
    assert_true(plan.flops > 0 && plan.pool_bytes > 0);
    /* each origin is classed by the whole evaluation's work, not its own */
    for (int k = 0; k < plan.origins; k += 7) {
        kr_forecast_request origin;
        kr_evaluate_origin_request(&r, &plan, k, &origin);
        assert_true(origin.class_flops == plan.flops);
    }
    r.stride = 50;
    r.first_origin = 45;
    r.last_origin = 150;
    assert_int_equal(kr_evaluate_plan_make(model, &r, &plan, &err), 0);
    assert_int_equal(plan.origins, 3); /* 45, 95, 145 */
    assert_int_equal(plan.last_origin, 145);
    series_request(&r);
    r.lookback = 40;
    r.horizon = 8;
    r.lookback = 1;
    expect_invalid(&r, "lookback:");
    r.lookback = 40;
    r.horizon = 0;
    expect_invalid(&r, "horizon:");
    r.horizon = 8;
    r.stride = -1;
    expect_invalid(&r, "stride:");
    r.stride = 0;
    r.first_origin = 39;
    expect_invalid(&r, "first_origin:");
    r.first_origin = 153;
    expect_invalid(&r, "first_origin:");
    r.first_origin = 60;
    r.last_origin = 50;
    expect_invalid(&r, "last_origin:");
    r.last_origin = 153;
    expect_invalid(&r, "last_origin:");
    r.last_origin = -1;
    r.samples = 0;
    expect_invalid(&r, "samples:");
    r.samples = 1;
    r.quantiles[0] = 1.5;
    expect_invalid(&r, "quantiles[0]:");
    r.quantiles[0] = 0.1;
    r.norm.pinned = true;
    expect_invalid(&r, "normalization:");
    r.norm.pinned = false;
    r.lookback = 155;
    expect_invalid(&r, "candles:");
    r.lookback = 40;
    r.candles.columns[KR_CLOSE] = NULL;
    expect_invalid(&r, "candles.close:");
}

/* ---- window mode: each origin is /forecast of its window --------------------------------------
 */

static void test_window_equals_forecast(void **state) {
    (void)state;
    kr_evaluate_request r;
    series_request(&r);
    r.lookback = 48;
    r.horizon = 6;
    r.stride = 30;
    r.samples = 4;
    r.seed = 7;
    r.keep_origins = true;
    kr_evaluation ev;
    kr_error err = {0};
    if (kr_evaluate(model, NULL, &r, &ev, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ev.origins, 4); /* 48, 78, 108, 138 */
    const int P = 6, Q = 3, S = 4;
    for (int k = 0; k < ev.origins; k++) {
        const int o = ev.origin_index[k];
        kr_forecast_request f;
        kr_forecast_request_init(&f);
        f.context.n = r.lookback;
        f.context.timestamps = ts + o - r.lookback;
        for (int c = 0; c < KR_D_IN; c++)
            f.context.columns[c] = cols[c] + o - r.lookback;
        f.horizon = P;
        f.future_timestamps = ts + o;
        f.samples = S;
        f.seed = 7;
        f.n_quantiles = Q;
        memcpy(f.quantiles, r.quantiles, sizeof f.quantiles);
        kr_forecast_result res;
        if (kr_forecast(model, NULL, &f, &res, &err)) fail_msg("%s", err.msg);
        for (int h = 0; h < P; h++) {
            assert_memory_equal(&ev.mean[k * P + h], &res.mean[KR_CLOSE * P + h], sizeof(double));
            assert_memory_equal(&ev.prob_close_up[k * P + h], &res.prob_close_up[h],
                                sizeof(double));
            for (int q = 0; q < Q; q++)
                assert_memory_equal(&ev.quantiles[(k * Q + q) * P + h],
                                    &res.quantiles[(q * KR_D_IN + KR_CLOSE) * P + h],
                                    sizeof(double));
            assert_true(ev.actual[k * P + h] == cols[KR_CLOSE][o + h]);
        }
        assert_true(ev.last_close[k] == cols[KR_CLOSE][o - 1]);
        kr_forecast_result_free(&res);
    }
    /* the scores are there and sane */
    const int H = P + 1;
    for (int h = 0; h < H; h++) {
        assert_true(ev.scores[KR_EVAL_MAE * H + h] >= 0);
        assert_true(ev.scores[KR_EVAL_CRPS * H + h] >= 0);
    }
    double pit = 0;
    for (int i = 0; i < KR_EVAL_PIT_BINS; i++)
        pit += ev.pit[i];
    assert_true(fabs(pit - 1) < 1e-12);
    kr_evaluation_free(&ev);
}

/* ---- live mode: each origin is the series' forecast ------------------------------------------ */

static void live_case(int max_context) {
    kr_evaluate_request r;
    series_request(&r);
    r.lookback = 40;
    r.horizon = 5;
    r.stride = 17;
    r.samples = 3;
    r.seed = 3;
    r.max_context = max_context;
    r.mode = KR_EVAL_LIVE;
    kr_evaluation ev;
    kr_error err = {0};
    if (kr_evaluate(model, NULL, &r, &ev, &err)) fail_msg("%s", err.msg);
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_candles first = {40, ts, {0}};
    for (int c = 0; c < KR_D_IN; c++)
        first.columns[c] = cols[c];
    kr_series *s = kr_series_create(model, pool, &first, NULL, 0, &err);
    if (!s) fail_msg("%s", err.msg);
    int have = 40;
    for (int k = 0; k < ev.origins; k++) {
        const int o = ev.origin_index[k];
        if (o > have) {
            kr_candles more = {o - have, ts + have, {0}};
            for (int c = 0; c < KR_D_IN; c++)
                more.columns[c] = cols[c] + have;
            if (kr_series_append(s, &more, &err)) fail_msg("%s", err.msg);
            have = o;
        }
        kr_forecast_request f;
        kr_forecast_request_init(&f);
        kr_series_request(s, &f);
        f.horizon = 5;
        f.future_timestamps = ts + o;
        f.samples = 3;
        f.seed = 3;
        f.max_context = max_context;
        kr_forecast_result res;
        if (kr_forecast_series(s, &f, &res, &err)) fail_msg("%s", err.msg);
        assert_memory_equal(&ev.mean[k * 5], &res.mean[KR_CLOSE * 5], 5 * sizeof(double));
        kr_forecast_result_free(&res);
    }
    assert_true(have > (max_context ? max_context : WINDOW));
    kr_series_free(s);
    kr_pool_free(pool);
    kr_evaluation_free(&ev);
}

static void test_live_equals_series(void **state) {
    (void)state;
    live_case(0);
    live_case(48);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crps_ensemble),      cmocka_unit_test(test_crps_gaussian),
        cmocka_unit_test(test_pit_share_and_sd),   cmocka_unit_test(test_tables_by_hand),
        cmocka_unit_test(test_contract),           cmocka_unit_test(test_window_equals_forecast),
        cmocka_unit_test(test_live_equals_series),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
