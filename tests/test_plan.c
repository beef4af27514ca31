/* test_plan.c — the forecast request contract (kr_forecast_plan_make): each rule with its
 * field and code, the window of every step, and pool bytes that are enough. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "forecast_impl.h" /* kr_forecast_window, kr_encode_cost_rows */
#include "kronos.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static kr_model *model;
static tu_case tc;
static json_t *golden;

static int setup(void **state) {
    (void)state;
    model = tu_load_tiny(512);
    golden = tu_load_golden();
    if (!model || !golden) return -1;
    return tu_case_load(json_array_get(json_object_get(golden, "cases"), 0), &tc);
}

static int teardown(void **state) {
    (void)state;
    tu_case_free(&tc);
    json_decref(golden);
    kr_model_free(model);
    return 0;
}

/* The request with one change must fail with `code`, its message starting with `field`. */
static void refused(const kr_forecast_request *r, kr_error_code code, const char *field) {
    kr_forecast_plan plan;
    kr_error err = {0};
    assert_int_equal(kr_forecast_plan_make(model, r, &plan, &err), -1);
    if (err.code != code || strncmp(err.msg, field, strlen(field)) != 0)
        fail_msg("want code %d and '%s...', got code %d: %s", code, field, err.code, err.msg);
}

static void test_rules(void **state) {
    (void)state;
    kr_forecast_request r;
    double nan_col[512];
    int64_t back[512];
#define WITH(change, code, field)                                                                  \
    do {                                                                                           \
        r = tc.req;                                                                                \
        change;                                                                                    \
        refused(&r, code, field);                                                                  \
    } while (0)
    WITH(r.context.n = 1, KR_E_INVALID, "candles: at least 2");
    WITH(r.context.timestamps = NULL, KR_E_INVALID, "candles.timestamps");
    WITH(r.context.columns[KR_CLOSE] = NULL, KR_E_INVALID, "candles.close: missing");
    WITH((r.context.columns[KR_VOLUME] = NULL,
          r.context.columns[KR_AMOUNT] = tc.req.context.columns[KR_OPEN]),
         KR_E_INVALID, "candles.amount");
    memcpy(nan_col, tc.req.context.columns[KR_HIGH], (size_t)tc.req.context.n * sizeof(double));
    nan_col[3] = NAN;
    WITH(r.context.columns[KR_HIGH] = nan_col, KR_E_INVALID, "candles.high[3]");
    memcpy(back, tc.req.context.timestamps, (size_t)tc.req.context.n * sizeof(int64_t));
    back[5] = back[4];
    WITH(r.context.timestamps = back, KR_E_INVALID, "candles.timestamps[5]");
    WITH(r.horizon = 0, KR_E_INVALID, "horizon");
    WITH(r.samples = 0, KR_E_INVALID, "samples");
    WITH(r.sampling.temperature = 0, KR_E_INVALID, "temperature");
    WITH(r.sampling.top_p = 1.5, KR_E_INVALID, "top_p");
    WITH(r.sampling.top_k = -1, KR_E_INVALID, "top_k");
    WITH(r.max_context = 513, KR_E_INVALID, "max_context");
    WITH((r.n_quantiles = 1, r.quantiles[0] = 1.5), KR_E_INVALID, "quantiles[0]");
    WITH((r.n_quantiles = 2, r.quantiles[0] = 0.5, r.quantiles[1] = 0.5), KR_E_INVALID,
         "quantiles[1]: 0.5 is already quantiles[0]");
    /* valid, but this model can never serve it */
    WITH((r.max_context = 64, r.horizon = 65, r.future_timestamps = NULL), KR_E_TOO_LARGE,
         "horizon");
#undef WITH
}

/* Windows: L + i tokens up to max_context, then sliding by one a step. */
static void test_windows(void **state) {
    (void)state;
    kr_forecast_request r = tc.req;
    r.max_context = 64;
    r.context.n = 60;
    r.horizon = 10;
    kr_forecast_plan plan;
    kr_error err;
    assert_int_equal(kr_forecast_plan_make(model, &r, &plan, &err), 0);
    assert_int_equal(plan.max_context, 64);
    for (int i = 0; i < r.horizon; i++) {
        int start, w = kr_forecast_window(&plan, r.context.n, i, &start);
        int n = r.context.n + i;
        assert_int_equal(w, n < 64 ? n : 64);
        assert_int_equal(start, n - w);
    }
    /* steps 0..4 see windows of 60..64 from token 0; steps 5..9 slide */
    assert_int_equal(plan.recomputed_steps, 5);
    assert_int_equal(plan.cached_steps, 5);
    assert_true(plan.flops > 0);
}

/* A pool of exactly the planned bytes runs the forecast; cost grows with the work. */
static void test_pool_bytes_suffice(void **state) {
    (void)state;
    kr_forecast_request r = tc.req;
    r.samples = 7;
    r.max_context = 64; /* windows that slide: the most blocks at once */
    kr_forecast_plan plan, bigger;
    kr_error err;
    assert_int_equal(kr_forecast_plan_make(model, &r, &plan, &err), 0);
    kr_pool *pool = kr_pool_create(model, plan.pool_bytes, &err);
    assert_non_null(pool);
    kr_forecast_result res;
    if (kr_forecast(model, pool, &r, &res, &err)) fail_msg("%s", err.msg);
    kr_forecast_result_free(&res);
    kr_pool_free(pool);
    r.samples = 14;
    assert_int_equal(kr_forecast_plan_make(model, &r, &bigger, &err), 0);
    assert_true(bigger.pool_bytes > plan.pool_bytes);
    assert_true(bigger.flops > plan.flops);
}

/* An encode chunk's cost in predictor rows: the tiny model's tokenizer against its
 * predictor, by hand; it grows with the candles and their position; the most candles that
 * fit a budget cost at most it, one more would not (and one always fits). */
static void test_encode_cost(void **state) {
    (void)state;
    /* tokenizer: 2 encoder blocks of d 32, ff 64; predictor: 2 layers of d 64, ff 128 */
    /* attention counted twice (plan.c) */
    const double enc_row = 2 * 2.0 * (4 * 32 * 32 + 3 * 32 * 64), enc_key = 2 * 2 * 4.0 * 32;
    const double row = 2 * 2.0 * (4 * 64 * 64 + 3 * 64 * 128);
    assert_float_equal(kr_encode_cost_rows(model, 0, 1), (enc_row + enc_key * 1) / row, 1e-12);
    assert_float_equal(kr_encode_cost_rows(model, 100, 10), 10 * (enc_row + enc_key * 105.5) / row,
                       1e-9);
    assert_true(kr_encode_cost_rows(model, 1000, 10) > kr_encode_cost_rows(model, 10, 10));
    const int fits[][3] = {{0, 500, 7}, {0, 500, 64}, {300, 200, 16}, {4000, 1000, 3}};
    for (size_t k = 0; k < sizeof fits / sizeof fits[0]; k++) {
        const int pos = fits[k][0], left = fits[k][1], rows = fits[k][2];
        const int c = kr_encode_fit(model, pos, left, rows);
        assert_true(c >= 1 && c <= left);
        assert_true(c == 1 || kr_encode_cost_rows(model, pos, c) <= rows);
        if (c < left) assert_true(kr_encode_cost_rows(model, pos, c + 1) > rows);
    }
    assert_int_equal(kr_encode_fit(model, 0, 50, 1e9), 50);
    assert_int_equal(kr_encode_fit(model, 100000, 50, 0.001), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_pool_bytes_suffice),
        cmocka_unit_test(test_encode_cost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
