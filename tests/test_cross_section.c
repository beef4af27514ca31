/* test_cross_section.c — cross-sectional scores (core/evaluate/eval_cross.c) on hand-computed
 * cases: Pearson and average ranks with ties; the IC, RankIC, hit rate and top-k spread of
 * four series at three origins (one with constant forecasts, one with tied actuals) and
 * their summaries, for k 1 and 2 and the default; the alignment rule and top_k's range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h"
#include "kronos.h"

#include <math.h>
#include <string.h>

#define CLOSE_TO(a, b) assert_true(fabs((a) - (b)) < 1e-12)

static void test_pearson_and_ranks(void **state) {
    (void)state;
    /* x = 1, 2, 3; y = 2, 4, 7: dx = -1, 0, 1; dy = -7/3, -1/3, 8/3; sxy = 5, sxx = 2,
     * syy = 114/9; r = 5 / sqrt(2 * 114 / 9) = 15 / sqrt(228) */
    const double x[] = {1, 2, 3}, y[] = {2, 4, 7}, c[] = {5, 5, 5};
    CLOSE_TO(kr_pearson(x, y, 3), 15.0 / sqrt(228.0));
    assert_true(isnan(kr_pearson(x, c, 3)));
    assert_true(isnan(kr_pearson(c, y, 3)));
    assert_true(isnan(kr_pearson(x, y, 1)));
    /* 3, 1, 3, 2: 1 is first, 2 second, the two 3s share ranks 3 and 4 */
    const double t[] = {3, 1, 3, 2};
    kr_keyed scratch[4];
    double rank[4];
    kr_average_ranks(t, 4, scratch, rank);
    assert_true(rank[0] == 3.5 && rank[1] == 1 && rank[2] == 3.5 && rank[3] == 2);
    const double all[] = {7, 7, 7};
    kr_average_ranks(all, 3, scratch, rank);
    assert_true(rank[0] == 2 && rank[1] == 2 && rank[2] == 2);
}

/* Four series, three origins, horizon 1 (returns in the comments):
 *   origin 0: last 100; forecast 0.10, -0.10, 0, 0.20; actual 0.05, -0.05, 0.03, -0.01
 *   origin 1: last 200; forecast 0 everywhere (constant);  actual 0.05, -0.05, 0, 0
 *   origin 2: last 100; forecast 0.01 .. 0.04;             actual 0, 0.02, 0.02, 0.10 */
static const double last[3] = {100, 200, 100};
static const double mean[3][4] = {{110, 90, 100, 120}, {200, 200, 200, 200}, {101, 102, 103, 104}};
static const double actual[3][4] = {{105, 95, 103, 99}, {210, 190, 200, 200}, {100, 102, 102, 110}};

static kr_evaluation evs[4];
static double buf[4][3][3]; /* per series: last, mean, actual by origin */
static int64_t stamps[4][3];

static void make_evaluations(void) {
    for (int i = 0; i < 4; i++) {
        memset(&evs[i], 0, sizeof evs[i]);
        evs[i].origins = 3;
        evs[i].horizon = 1;
        for (int k = 0; k < 3; k++) {
            buf[i][0][k] = last[k];
            buf[i][1][k] = mean[k][i];
            buf[i][2][k] = actual[k][i];
            stamps[i][k] = 1000 + k;
        }
        evs[i].last_close = buf[i][0];
        evs[i].mean = buf[i][1];
        evs[i].actual = buf[i][2];
        evs[i].timestamps = stamps[i];
    }
}

static void test_scores_by_hand(void **state) {
    (void)state;
    make_evaluations();
    kr_cross_section cs;
    kr_error err = {0};
    assert_int_equal(kr_cross_section_score(evs, 4, 1, &cs, &err), 0);
    assert_int_equal(cs.top_k, 1);
    /* origin 0: fr mean 0.05, ar mean 0.005: sxy = 0.007, sxx = 0.05, syy = 0.0059; ranks
     * 3 1 2 4 against 4 1 3 2: 2 / 5 = 0.4; hits: the first two */
    const double ic0 = 0.007 / sqrt(0.05 * 0.0059);
    CLOSE_TO(cs.ic[0], ic0);
    CLOSE_TO(cs.rank_ic[0], 0.4);
    CLOSE_TO(cs.hit[0], 0.5);
    CLOSE_TO(cs.spread[0], -0.01 - -0.05); /* top: series 3, bottom: series 1 */
    /* origin 1: constant forecasts: undefined; hits where both are 0 (series 2 and 3);
     * ties by index: bottom series 0, top series 3 */
    assert_true(isnan(cs.ic[1]) && isnan(cs.rank_ic[1]));
    CLOSE_TO(cs.hit[1], 0.5);
    CLOSE_TO(cs.spread[1], 0 - 0.05);
    /* origin 2: sxy = 0.0015, sxx = 0.0005, syy = 0.0059; ranks 1 2 3 4 against
     * 1 2.5 2.5 4: 4.5 / sqrt(5 * 4.5); series 0's 0.01 against 0 misses */
    const double ic2 = 0.0015 / sqrt(0.0005 * 0.0059), r2 = 4.5 / sqrt(22.5);
    CLOSE_TO(cs.ic[2], ic2);
    CLOSE_TO(cs.rank_ic[2], r2);
    CLOSE_TO(cs.hit[2], 0.75);
    CLOSE_TO(cs.spread[2], 0.10);
    /* over origins (step 0, and index 1: every step, the same with one step) */
    for (int h = 0; h < 2; h++) {
        assert_int_equal(cs.ic_count[h], 2);
        assert_int_equal(cs.rank_ic_count[h], 2);
        CLOSE_TO(cs.ic_mean[h], (ic0 + ic2) / 2);
        CLOSE_TO(cs.ic_std[h], fabs(ic0 - ic2) / sqrt(2.0));
        CLOSE_TO(cs.ic_ir[h], (ic0 + ic2) / 2 / (fabs(ic0 - ic2) / sqrt(2.0)));
        CLOSE_TO(cs.rank_ic_mean[h], (0.4 + r2) / 2);
        CLOSE_TO(cs.rank_ic_std[h], fabs(0.4 - r2) / sqrt(2.0));
        CLOSE_TO(cs.hit_rate[h], (0.5 + 0.5 + 0.75) / 3);
        CLOSE_TO(cs.top_bottom_spread[h], (0.04 - 0.05 + 0.10) / 3);
    }
    kr_cross_section_free(&cs);
    /* k = 2: origin 0: (0.05 - 0.01) / 2 - (-0.05 + 0.03) / 2; origin 1: 0 - 0; origin 2:
     * (0.02 + 0.10) / 2 - (0 + 0.02) / 2 */
    assert_int_equal(kr_cross_section_score(evs, 4, 2, &cs, &err), 0);
    CLOSE_TO(cs.spread[0], 0.03);
    CLOSE_TO(cs.spread[1], 0.0);
    CLOSE_TO(cs.spread[2], 0.05);
    CLOSE_TO(cs.top_bottom_spread[0], (0.03 + 0.05) / 3);
    kr_cross_section_free(&cs);
    /* the default: a fifth of 4 series is 0, so 1 */
    assert_int_equal(kr_cross_section_score(evs, 4, 0, &cs, &err), 0);
    assert_int_equal(cs.top_k, 1);
    kr_cross_section_free(&cs);
    /* out of range, too few series */
    assert_int_equal(kr_cross_section_score(evs, 4, 3, &cs, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_int_equal(kr_cross_section_score(evs, 1, 0, &cs, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
}

static void test_zero_sd(void **state) {
    (void)state;
    /* three series whose two origins are the same: two equal ICs, sd 0, so no IR */
    static double l[2] = {100, 100}, m[3][2] = {{101, 101}, {99, 99}, {103, 103}},
                  y[3][2] = {{102, 102}, {97, 97}, {100, 100}};
    kr_evaluation two[3];
    for (int i = 0; i < 3; i++)
        two[i] = (kr_evaluation){
            .origins = 2, .horizon = 1, .last_close = l, .mean = m[i], .actual = y[i]};
    kr_cross_section cs;
    kr_error err = {0};
    assert_int_equal(kr_cross_section_score(two, 3, 0, &cs, &err), 0);
    assert_true(cs.ic[0] == cs.ic[1] && !isnan(cs.ic[0]));
    assert_int_equal(cs.ic_count[0], 2);
    assert_true(cs.ic_std[0] == 0.0);
    assert_true(isnan(cs.ic_ir[0]) && isnan(cs.rank_ic_ir[0]));
    kr_cross_section_free(&cs);
}

/* Two series of 6 candles, origins 2 and 4 (lookback 2, horizon 2, stride 2). */
static int64_t ts_a[6] = {10, 20, 30, 40, 50, 60}, ts_b[6] = {10, 20, 30, 40, 50, 60};
static double close_a[6] = {1, 2, 3, 4, 5, 6}, close_b[6] = {1, 2, 3, 4, 5, 6};

static void align_case(kr_evaluate_request reqs[2], kr_evaluate_plan plans[2]) {
    for (int i = 0; i < 2; i++) {
        kr_evaluate_request_init(&reqs[i]);
        reqs[i].candles.n = 6;
        reqs[i].candles.timestamps = i ? ts_b : ts_a;
        reqs[i].candles.columns[KR_CLOSE] = i ? close_b : close_a;
        reqs[i].lookback = 2;
        reqs[i].horizon = 2;
        memset(&plans[i], 0, sizeof plans[i]);
        plans[i].first_origin = 2;
        plans[i].stride = 2;
        plans[i].origins = 2;
        plans[i].last_origin = 4;
    }
}

static void test_alignment(void **state) {
    (void)state;
    kr_evaluate_request reqs[2];
    kr_evaluate_plan plans[2];
    kr_error err = {0};
    align_case(reqs, plans);
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 0, &err), 0);
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 1, &err), 0);
    /* a timestamp in the second origin's range differs */
    ts_b[5] = 61;
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 0, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "series[1].candles.timestamps[5]: 61"));
    assert_non_null(strstr(err.msg, "origin 4 (number 2 of 2)"));
    ts_b[5] = 60;
    /* one before every origin's range does not matter */
    ts_b[0] = 9;
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 0, &err), 0);
    ts_b[0] = 10;
    /* another count of origins */
    plans[1].origins = 1;
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 0, &err), -1);
    assert_non_null(strstr(err.msg, "series[1]: 1 origins, where series[0] has 2"));
    align_case(reqs, plans);
    /* a zero last close */
    close_b[3] = 0;
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 0, &err), -1);
    assert_non_null(strstr(err.msg, "series[1].candles.close[3]"));
    close_b[3] = 4;
    /* top_k beyond half, and one series */
    assert_int_equal(kr_cross_section_check(reqs, plans, 2, 2, &err), -1);
    assert_true(strncmp(err.msg, "cross_section.top_k: ", 21) == 0);
    assert_int_equal(kr_cross_section_check(reqs, plans, 1, 0, &err), -1);
    assert_true(strncmp(err.msg, "series: ", 8) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pearson_and_ranks),
        cmocka_unit_test(test_scores_by_hand),
        cmocka_unit_test(test_zero_sd),
        cmocka_unit_test(test_alignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
