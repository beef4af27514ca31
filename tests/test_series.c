/* test_series.c — live candle series (kr_series): the encoder's own cache gives the tokens of
 * encoding the whole series at once, however the series was split into appends, with the
 * statistics pinned or taken from the first candles, past max_context too; and a forecast
 * from a series (forking its predictor cache) equals, bit for bit, the stateless forecast of
 * the same candles with the series' statistics pinned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "forecast_impl.h" /* kr_series_tokens */
#include "kronos.h"
#include "run.h" /* kr_forecast_series */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N      150 /* candles: past the window of 64 */
#define WINDOW 64

static kr_model *model;
static int64_t ts[N];
static double cols[KR_D_IN][N];

static int setup(void **state) {
    (void)state;
    if (!(model = tu_load_tiny(WINDOW))) return -1;
    double *const c[KR_D_IN] = {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]};
    tu_random_candles(777u, N, ts, c);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    return 0;
}

/* Candles [from, from + n) as a request. */
static void candles(kr_forecast_request *r, int from, int n) {
    kr_forecast_request_init(r);
    r->context.n = n;
    r->context.timestamps = ts + from;
    for (int c = 0; c < KR_D_IN; c++)
        r->context.columns[c] = cols[c] + from;
}

/* A series of n candles built from `first` candles, then appends of `chunk`; cacheless:
 * one without a predictor cache (kr_series_create_cacheless). */
static kr_series *build_series(kr_pool *pool, int n, int first, int chunk, const float *pin_mean,
                               const float *pin_std, bool cacheless) {
    kr_forecast_request r;
    kr_error err = {0};
    candles(&r, 0, first);
    if (pin_mean) {
        r.norm.pinned = true;
        memcpy(r.norm.mean, pin_mean, sizeof r.norm.mean);
        memcpy(r.norm.std, pin_std, sizeof r.norm.std);
    }
    kr_series *s = cacheless ? kr_series_create_cacheless(model, pool, &r.context, &r.norm, 0, &err)
                             : kr_series_create(model, pool, &r.context, &r.norm, 0, &err);
    if (!s) fail_msg("create: %s", err.msg);
    for (int at = first; at < n; at += chunk) {
        candles(&r, at, at + chunk <= n ? chunk : n - at);
        if (kr_series_append(s, &r.context, &err)) fail_msg("append at %d: %s", at, err.msg);
    }
    assert_int_equal(kr_series_length(s), n);
    if (cacheless) assert_int_equal(kr_series_bytes(s), kr_series_heap_bytes(s));
    return s;
}

static kr_series *build(kr_pool *pool, int n, int first, int chunk, const float *pin_mean,
                        const float *pin_std) {
    return build_series(pool, n, first, chunk, pin_mean, pin_std, false);
}

/* The series' tokens equal kr_tokenize_candles of its candles with its statistics pinned. */
static void check_tokens(const kr_series *s) {
    int n = kr_series_length(s);
    int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    float mean[KR_D_IN], std[KR_D_IN];
    kr_forecast_request r;
    kr_error err = {0};
    kr_forecast_request_init(&r);
    kr_series_request(s, &r);
    assert_int_equal(kr_tokenize_candles(model, &r.context, &r.norm, a, b, mean, std, &err), 0);
    assert_memory_equal(a, kr_series_tokens(s, 1), n * sizeof *a);
    assert_memory_equal(b, kr_series_tokens(s, 2), n * sizeof *b);
    free(a);
    free(b);
}

static void test_encoder_splits(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(model, (size_t)32 << 20, &err);
    assert_non_null(pool);
    const float pin_mean[KR_D_IN] = {101.5f, 102.0f, 100.5f, 101.0f, 1200.0f, 120000.0f};
    const float pin_std[KR_D_IN] = {3.0f, 3.5f, 2.5f, 3.0f, 150.0f, 20000.0f};
    static const int splits[][2] = {{2, 1}, {10, 7}, {40, 33}, {N, 1}, {1, 1}};
    for (int pinned = 0; pinned < 2; pinned++)
        for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
            kr_series *s = build(pool, N, splits[k][0], splits[k][1], pinned ? pin_mean : NULL,
                                 pinned ? pin_std : NULL);
            check_tokens(s);
            float mean[KR_D_IN], std[KR_D_IN];
            kr_series_stats(s, mean, std);
            if (pinned) assert_memory_equal(mean, pin_mean, sizeof mean);
            kr_series_free(s);
        }
    /* one shot, unpinned: upstream's statistics of the whole series */
    kr_series *s = build(pool, N, N, 1, NULL, NULL);
    kr_forecast_request r;
    candles(&r, 0, N);
    int32_t a[N], b[N];
    float mean[KR_D_IN], std[KR_D_IN], smean[KR_D_IN], sstd[KR_D_IN];
    assert_int_equal(kr_tokenize_candles(model, &r.context, &r.norm, a, b, mean, std, &err), 0);
    kr_series_stats(s, smean, sstd);
    assert_memory_equal(mean, smean, sizeof mean);
    assert_memory_equal(std, sstd, sizeof std);
    assert_memory_equal(a, kr_series_tokens(s, 1), sizeof a);
    assert_memory_equal(b, kr_series_tokens(s, 2), sizeof b);
    kr_series_free(s);
    kr_pool_stats st;
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 0);
    kr_pool_free(pool);
}

static void test_append_errors(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(model, (size_t)16 << 20, &err);
    kr_series *s = build(pool, 20, 20, 1, NULL, NULL);
    kr_forecast_request r;
    candles(&r, 19, 2); /* starts at the last candle held */
    assert_int_equal(kr_series_append(s, &r.context, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "candles.timestamps[0]"));
    candles(&r, 20, 2);
    r.context.columns[KR_AMOUNT] = NULL;
    assert_int_equal(kr_series_append(s, &r.context, &err), -1);
    assert_non_null(strstr(err.msg, "candles.amount: missing"));
    assert_int_equal(kr_series_length(s), 20);
    candles(&r, 20, 2);
    assert_int_equal(kr_series_append(s, &r.context, &err), 0);
    check_tokens(s);
    kr_series_free(s);
    kr_pool_free(pool);
}

/* ---- forecasts ---------------------------------------------------------------------------- */

static void sched_done(void *tag, const kr_error *err, void *ctx) {
    (void)ctx;
    *(kr_error *)tag = *err;
}

static void test_series_forecast(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_sched *ks = kr_sched_create(model, pool, &(kr_sched_config){.done = sched_done}, &err);
    assert_non_null(ks);
    /* lengths below, at and past the window; horizons that slide while decoding; a series
     * with its predictor cache and one without (whose forecasts fill their own window) */
    static const int cases[][3] = {{40, 30, 8}, {63, 1, 12}, {64, 60, 5}, {100, 80, 30}};
    for (size_t k = 0; k < 2 * sizeof cases / sizeof cases[0]; k++) {
        const bool cacheless = k % 2;
        int n = cases[k / 2][0], P = cases[k / 2][2];
        kr_series *s = build_series(pool, n, cases[k / 2][1], 3, NULL, NULL, cacheless);
        kr_forecast_request r;
        kr_forecast_request_init(&r);
        kr_series_request(s, &r);
        r.horizon = P;
        r.samples = 8;
        r.seed = 42 + k;
        r.return_paths = true;
        r.n_quantiles = 2;
        r.quantiles[0] = 0.1;
        r.quantiles[1] = 0.9;
        kr_forecast_result from_series, stateless;
        kr_error done = {0};
        assert_int_equal(kr_sched_add_forecast_series(ks, s, &r, &from_series, &done, &err), 0);
        while (kr_sched_step(ks) > 0)
            ;
        if (done.code) fail_msg("series forecast %zu: %s", k, done.msg);
        assert_int_equal(kr_forecast(model, NULL, &r, &stateless, &err), 0);
        tu_same_result(&from_series, &stateless);
        /* the series' cache is as it was: a second forecast is the same again */
        kr_forecast_result again;
        assert_int_equal(kr_sched_add_forecast_series(ks, s, &r, &again, &done, &err), 0);
        while (kr_sched_step(ks) > 0)
            ;
        assert_int_equal(done.code, 0);
        tu_same_result(&again, &stateless);
        /* and the one-shot driver gives the same */
        kr_forecast_result once;
        assert_int_equal(kr_forecast_series(s, &r, &once, &err), 0);
        tu_same_result(&once, &stateless);
        print_message("# %d candles (built from %d%s), horizon %d: series = one-shot = "
                      "stateless\n",
                      n, cases[k / 2][1], cacheless ? ", cacheless" : "", P);
        kr_forecast_result_free(&from_series);
        kr_forecast_result_free(&again);
        kr_forecast_result_free(&once);
        kr_forecast_result_free(&stateless);
        kr_series_free(s);
    }
    kr_sched_free(ks);
    kr_pool_free(pool);
}

/* An append on another clock (kr_series_append_shifted) moves the series to it: its
 * forecast is then the stateless one of all the candles on the new clock, below and past
 * the window; a failed one leaves the series as it was. And the cost of an append: past
 * the window (or with a new clock) a one-candle append prefills a whole window. */
static void test_shifted_append(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    static const int cases[][2] = {{40, 10}, {100, 5}}; /* held, appended */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int held = cases[k][0], add = cases[k][1];
        const int64_t shift = -3600; /* the series on +01:00, the new candles on UTC */
        int64_t early[N];
        for (int i = 0; i < held; i++)
            early[i] = ts[i] - shift;
        kr_forecast_request r;
        candles(&r, 0, held);
        r.context.timestamps = early;
        kr_series *s = kr_series_create(model, pool, &r.context, NULL, 0, &err);
        assert_non_null(s);
        /* the last held candle again, as an instant: refused, nothing moved */
        candles(&r, held - 1, add);
        assert_int_equal(kr_series_append_shifted(s, &r.context, shift, &err), -1);
        assert_int_equal(kr_series_last_timestamp(s), early[held - 1]);
        /* within the window a one-candle append extends the cache; with a new clock, or
         * past the window, it prefills a whole window again */
        const double plain = kr_series_append_flops(s, 1, false);
        const double moved = kr_series_append_flops(s, 1, true);
        static double within;
        if (held < WINDOW) {
            within = plain;
            assert_true(moved > 5 * plain);
        } else {
            assert_true(moved == plain && plain > 5 * within);
        }
        candles(&r, held, add);
        assert_int_equal(kr_series_append_shifted(s, &r.context, shift, &err), 0);
        assert_int_equal(kr_series_last_timestamp(s), ts[held + add - 1]);
        kr_forecast_request q;
        kr_forecast_request_init(&q);
        kr_series_request(s, &q);
        q.horizon = 6;
        q.samples = 4;
        q.seed = 9;
        q.return_paths = true;
        kr_forecast_result from_series, stateless;
        assert_int_equal(kr_forecast_series(s, &q, &from_series, &err), 0);
        candles(&r, 0, held + add); /* every candle on the new clock, the series' statistics */
        r.norm = q.norm;
        r.horizon = q.horizon;
        r.samples = q.samples;
        r.seed = q.seed;
        r.return_paths = true;
        assert_int_equal(kr_forecast(model, NULL, &r, &stateless, &err), 0);
        tu_same_result(&from_series, &stateless);
        print_message("# %d candles on +01:00, %d appended on UTC: series = stateless\n", held,
                      add);
        kr_forecast_result_free(&from_series);
        kr_forecast_result_free(&stateless);
        kr_series_free(s);
    }
    kr_pool_free(pool);
}

/* Pinned statistics on a stateless forecast are used and reported; unpinned, the context's. */
static void test_pinned_forecast(void **state) {
    (void)state;
    kr_error err = {0};
    kr_forecast_request r;
    candles(&r, 0, 50);
    r.horizon = 4;
    r.samples = 3;
    r.return_paths = true;
    kr_forecast_result a, b;
    assert_int_equal(kr_forecast(model, NULL, &r, &a, &err), 0);
    r.norm.pinned = true;
    memcpy(r.norm.mean, a.norm_mean, sizeof r.norm.mean);
    memcpy(r.norm.std, a.norm_std, sizeof r.norm.std);
    assert_int_equal(kr_forecast(model, NULL, &r, &b, &err), 0);
    tu_same_result(&a, &b); /* pinning the context's own statistics changes nothing */
    kr_forecast_result_free(&b);
    r.norm.std[KR_CLOSE] = -1.0f;
    assert_int_equal(kr_forecast(model, NULL, &r, &b, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "normalization.std.close"));
    kr_forecast_result_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_splits),  cmocka_unit_test(test_append_errors),
        cmocka_unit_test(test_series_forecast), cmocka_unit_test(test_pinned_forecast),
        cmocka_unit_test(test_shifted_append),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
