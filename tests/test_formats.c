/* test_formats.c — the server's text formats without HTTP: shortest numbers (numfmt.c), the
 * JSON writer (json_out.c), CSV candles in and forecast rows out (candles_csv.c), query
 * parameters as fields (query_params.c) and strict fields (json_fields.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body_diff.h"
#include "candles_csv.h"
#include "evaluate_json.h"
#include "json_reader.h"
#include "json_fields.h"
#include "json_out.h"
#include "numfmt.h"
#include "query_params.h"

static void assert_contains(const char *msg, const char *word) {
    if (!strstr(msg, word)) fail_msg("message \"%s\" does not contain \"%s\"", msg, word);
}

/* ---- numbers ------------------------------------------------------------------------ */

static void test_float32_shortest(void **state) {
    (void)state;
    static const struct {
        double x;
        const char *want;
    } cases[] = {
        {11.3583374023438, "11.358337"}, /* the example, as float32 */
        {0.1, "0.1"},
        {80, "80"}, /* not 8e+01 */
        {427161, "427161"},
        {1e20, "1e+20"}, /* shorter than 100000002004087734272 */
        {-2.5, "-2.5"},
        {0, "0"},
        {1.0000001192092896, "1.0000001"}, /* the float after 1 */
        {1e-45, "1e-45"},                  /* the smallest subnormal */
        {1e300, "1e+300"},                 /* beyond float32: written as a double */
    };
    char buf[KD_NUM_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kd_fmt_float32(cases[i].x, buf, sizeof buf);
        assert_string_equal(buf, cases[i].want);
    }
    /* every float32 written reads back exactly, in at most 9 significant digits */
    uint32_t bits = 0x3f800000u;
    for (int i = 0; i < 100000; i++, bits += 0x9e3779b1u) {
        float f;
        memcpy(&f, &bits, sizeof f);
        if (!isfinite(f)) continue;
        kd_fmt_float32(f, buf, sizeof buf);
        assert_true(strtof(buf, NULL) == f);
        assert_true(strlen(buf) <= 15);
    }
}

static void test_double_labels(void **state) {
    (void)state;
    char a[KD_NUM_MAX], b[KD_NUM_MAX];
    kd_fmt_double(0.3333333333, a, sizeof a);
    kd_fmt_double(0.33333333334, b, sizeof b);
    assert_string_equal(a, "0.3333333333");
    assert_string_equal(b, "0.33333333334");
    kd_fmt_double(0.1, a, sizeof a);
    assert_string_equal(a, "0.1");
    kd_fmt_double(1, a, sizeof a);
    assert_string_equal(a, "1");
}

static void test_json_out(void **state) {
    (void)state;
    json_t *v = json_pack("{s:[f,f,i,n],s:s,s:b,s:{}}", "a", 11.3583374023438, 0.1, 7, "s",
                          "q\"\\\n\x01é", "t", 1, "e");
    char *text = kd_json_dumps(v, 0);
    assert_non_null(text);
    assert_string_equal(text, "{\"a\":[11.358337,0.1,7,null],\"s\":\"q\\\"\\\\\\u000a\\u0001é\","
                              "\"t\":true,\"e\":{}}");
    /* jansson reads it back to the same structure */
    json_t *back = json_loads(text, 0, NULL);
    assert_non_null(back);
    assert_string_equal(json_string_value(json_object_get(back, "s")), "q\"\\\n\x01é");
    free(text);
    text = kd_json_dumps(v, 2);
    assert_non_null(text);
    assert_contains(text, "{\n  \"a\": [\n    11.358337,");
    free(text);
    json_decref(back);
    json_decref(v);
}

/* ---- CSV in ------------------------------------------------------------------------- */

static int parse(const char *csv, kd_owned_candles *c, char *err, size_t n) {
    return kd_candles_csv_parse(csv, strlen(csv), 2, 0, c, err, n);
}

static void test_csv_basic(void **state) {
    (void)state;
    kd_owned_candles c;
    char err[512] = "";
    const char *csv = "\xEF\xBB\xBF,Close,date,open,high,low\r\n"
                      "0,2.5,2024-06-18 11:15:00,1,3,0.5\r\n"
                      "1,\"2,5\"\"x\",2024-06-18 11:20:00,1,3,0.5\r\n";
    /* a quoted value with a comma and a quote is one (bad) number */
    assert_int_equal(parse(csv, &c, err, sizeof err), -1);
    assert_contains(err, "CSV line 3, column 2 (Close):");
    csv = "\xEF\xBB\xBF,Close,date,open,high,low\r\n"
          "0,2.5,2024-06-18 11:15:00,1,3,0.5\r\n"
          "1,\"2.75\",2024-06-18T11:20:00,1,3,0.5\r\n\r\n";
    assert_int_equal(parse(csv, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
    assert_true(c.columns[3][1] == 2.75 && c.columns[0][0] == 1 && c.columns[2][1] == 0.5);
    assert_null(c.columns[4]);
    assert_int_equal(c.timestamps[1] - c.timestamps[0], 300);
    assert_false(c.time_form.unix_seconds);
    kd_candles_free(&c);
    /* Unix seconds, no final newline */
    csv = "timestamps,open,high,low,close,volume,amount\n1700000000,1,2,0,1,5,6\n1700000060,1,2,"
          "0,1,5,6";
    assert_int_equal(parse(csv, &c, err, sizeof err), 0);
    assert_true(c.time_form.unix_seconds && c.columns[5][1] == 6);
    kd_candles_free(&c);
}

static void test_csv_errors(void **state) {
    (void)state;
    static const struct {
        const char *csv, *want;
    } cases[] = {
        {"", "CSV: empty"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n", "at least 2 candles"},
        {"timestamps,open,high,low,close,vol\n", "column 6: unknown column \"vol\"; use volume"},
        {"timestamps,open,high,low\n", "no close column"},
        {"open,high,low,close\n", "no timestamps column"},
        {"timestamps,open,high,low,close,amount\n", "amount column without volume"},
        {"timestamps,open,high,low,close,open\n", "column 6: open: a second open column"},
        {"timestamps,open,,low,close\n", "column 3: a column with no name"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n2,1,1,1\n", "CSV line 3, column 4: 4 values"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n2,1,1,1,1,9\n",
         "line 3, column 6: more values"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n2,1,,1,1\n", "line 3, column 3 (high): empty"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n2,1,nan,1,1\n",
         "line 3, column 3 (high): NaN is not allowed"},
        {"timestamps,open,high,low,close\n1,1,1,1,1\n1,1,1,1,1\n", "line 3, column 1 (timestamps): "
                                                                   "not after"},
        {"timestamps,open,high,low,close\n2024-13-01,1,1,1,1\n", "line 2, column 1 (timestamps): "
                                                                 "\"2024-13-01\" is not a valid"},
        {"timestamps,open,high,low,close\n1,\"1,1,1,1\n", "line 2, column 2: a quoted value is not "
                                                          "closed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kd_owned_candles c;
        char err[512] = "";
        if (parse(cases[i].csv, &c, err, sizeof err) != -1)
            fail_msg("case %zu parsed: %s", i, cases[i].csv);
        assert_contains(err, cases[i].want);
        assert_null(c.timestamps);
    }
    kd_owned_candles c;
    char err[512];
    const char *csv = "timestamps,open,high,low,close\n1,1,1,1,1\n2,1,1,1,1\n3,1,1,1,1\n";
    assert_int_equal(kd_candles_csv_parse(csv, strlen(csv), 2, 2, &c, err, sizeof err), -1);
    assert_contains(err, "CSV line 4: more than the limit of 2 candles");
}

/* ---- CSV out ------------------------------------------------------------------------ */

static void test_forecast_csv(void **state) {
    (void)state;
    kd_forecast_input in;
    memset(&in, 0, sizeof in);
    kr_forecast_result res;
    memset(&res, 0, sizeof res);
    int64_t ts[2] = {1718709300, 1718709600}; /* 2024-06-18T11:15:00, 11:20 */
    double mean[12], q[24], up[2] = {0.5, 1};
    for (int i = 0; i < 12; i++)
        mean[i] = i + 0.5;
    for (int i = 0; i < 24; i++)
        q[i] = 100 + i;
    mean[3] = NAN;
    res.horizon = 2;
    res.timestamps = ts;
    res.mean = mean;
    res.n_quantiles = 2;
    res.quantiles = q;
    res.quantile_levels[0] = 0.1;
    res.quantile_levels[1] = 0.9;
    res.prob_close_up = up;
    char *text = kd_forecast_csv(&in, &res);
    assert_non_null(text);
    assert_string_equal(
        text, "timestamps,open,high,low,close,volume,amount,open_q0.1,high_q0.1,low_q0.1,"
              "close_q0.1,volume_q0.1,amount_q0.1,open_q0.9,high_q0.9,low_q0.9,close_q0.9,"
              "volume_q0.9,amount_q0.9,prob_close_up\n"
              "2024-06-18T11:15:00,0.5,2.5,4.5,6.5,8.5,10.5,100,102,104,106,108,110,112,114,116,"
              "118,120,122,0.5\n"
              "2024-06-18T11:20:00,1.5,,5.5,7.5,9.5,11.5,101,103,105,107,109,111,113,115,117,119,"
              "121,123,1\n");
    free(text);
}

/* ---- query parameters and strict fields ------------------------------------------------ */

static void test_query_params(void **state) {
    (void)state;
    static const char *const known[] = {"horizon",   "quantiles",         "temperature",
                                        "use_cache", "future_timestamps", NULL};
    json_t *o = json_object();
    char err[512] = "";
    assert_int_equal(kd_query_option(o, "horizon", "24", known, err, sizeof err), 0);
    assert_int_equal(kd_query_option(o, "quantiles", "0.1,0.5,x", known, err, sizeof err), 0);
    assert_int_equal(kd_query_option(o, "temperature", "abc", known, err, sizeof err), 0);
    assert_int_equal(kd_query_option(o, "use_cache", "false", known, err, sizeof err), 0);
    assert_int_equal(kd_query_option(o, "future_timestamps", "2024-06-18T11:15:00,1718709600",
                                     known, err, sizeof err),
                     0);
    assert_true(json_is_integer(json_object_get(o, "horizon")));
    json_t *q = json_object_get(o, "quantiles");
    assert_int_equal(json_array_size(q), 3);
    assert_true(json_is_real(json_array_get(q, 0)) && json_is_string(json_array_get(q, 2)));
    assert_true(json_is_string(json_object_get(o, "temperature")));
    assert_true(json_is_false(json_object_get(o, "use_cache")));
    json_t *ft = json_object_get(o, "future_timestamps");
    assert_true(json_is_string(json_array_get(ft, 0)) && json_is_integer(json_array_get(ft, 1)));
    assert_int_equal(kd_query_option(o, "horizon", "2", known, err, sizeof err), -1);
    assert_contains(err, "\"horizon\": given twice");
    assert_int_equal(kd_query_option(o, "pred_len", "2", known, err, sizeof err), -1);
    assert_contains(err, "unknown query parameter \"pred_len\"; use horizon instead");
    assert_int_equal(kd_query_option(o, "foo", NULL, known, err, sizeof err), -1);
    assert_contains(err, "the query parameters are: horizon, quantiles");
    json_decref(o);
}

/* An integer field takes integers as written: 1e3 and 24.0 are reals, in a JSON body and
 * in the query alike, and the message shows them as reals. */
static void test_integer_written_as_real(void **state) {
    (void)state;
    const char *const *names = kd_evaluate_option_names();
    char err[512] = "";
    static const char *const cases[][3] = {
        {"stride", "1e3", "stride: must be an integer >= 1, got 1000.0"},
        {"first_origin", "2.0", "first_origin: must be an integer >= 0, got 2.0"},
        {"stride", "2.5", "stride: must be an integer >= 1, got 2.5"},
        {"stride", "1e20", "stride: must be an integer >= 1, got 1e+20"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the query's form: a CSV body's fields */
        json_t *o = json_object();
        kd_owned_candles c = {0};
        kd_evaluate_input in;
        assert_int_equal(kd_query_option(o, "lookback", "8", names, err, sizeof err), 0);
        assert_int_equal(kd_query_option(o, "horizon", "2", names, err, sizeof err), 0);
        assert_int_equal(kd_query_option(o, cases[i][0], cases[i][1], names, err, sizeof err), 0);
        assert_int_equal(kd_evaluate_request_with_candles(o, &c, NULL, &in, err, sizeof err), -1);
        assert_string_equal(err, cases[i][2]);
        json_decref(o);
        /* the JSON body's form */
        char text[512];
        snprintf(text, sizeof text,
                 "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1, 2], "
                 "\"low\": [1, 2], \"close\": [1, 2]}, \"lookback\": 8, \"horizon\": 2, "
                 "\"%s\": %s}",
                 cases[i][0], cases[i][1]);
        json_t *body = kd_body_parse(text, strlen(text), NULL);
        assert_non_null(body);
        assert_int_equal(kd_evaluate_request_parse(body, NULL, &in, err, sizeof err), -1);
        assert_string_equal(err, cases[i][2]);
        json_decref(body);
    }
}

static void test_strict_forecast_fields(void **state) {
    (void)state;
    static const char *const names[] = {"sample_count", "samples",           "T",
                                        "temperature",  "x_timestamp",       "candles.timestamps",
                                        "y_timestamp",  "future_timestamps", "pred_len",
                                        "horizon"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i += 2) {
        char text[256], err[512] = "";
        snprintf(text, sizeof text,
                 "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1, 2], "
                 "\"low\": [1, 2], \"close\": [1, 2]}, \"horizon\": 1, \"%s\": 1}",
                 names[i]);
        json_t *body = json_loads(text, 0, NULL);
        kd_forecast_input in;
        assert_int_equal(kd_forecast_request_parse(body, 0, &in, err, sizeof err), -1);
        char want[128];
        snprintf(want, sizeof want, "unknown field \"%s\"; use %s instead", names[i], names[i + 1]);
        assert_contains(err, want);
        json_decref(body);
    }
}

/* Bodies read with their candles from the text answer as one jansson tree does. */
static const char *const diff_bodies[] = {
    /* accepted, columnar and rows, Unix seconds and ISO strings with zones */
    "{\"candles\": {\"timestamps\": [1, 2, 3], \"open\": [1, 2, 3], \"high\": [2, 3, 4], "
    "\"low\": [0.5, 1.5, 2.5], \"close\": [1.5, 2.5, 3.5]}, \"horizon\": 2, \"lookback\": 2}",
    "{\"candles\": {\"timestamps\": [\"2024-01-01T00:00:00+08:00\", \"2024-01-01 00:05Z\"], "
    "\"open\": [1e2, -0], \"high\": [2, 3], \"low\": [0, 1], \"close\": [1, 2], \"volume\": [5, "
    "6], \"amount\": [7, 8]}, \"horizon\": 1}",
    "{\"horizon\": 1, \"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 2, \"low\": 0, "
    "\"close\": 1}, {\"timestamps\": 2.5, \"open\": 1, \"high\": 2, \"low\": 0, \"close\": 1, "
    "\"volume\": null}]}",
    "{\"candles\": {\"timestamps\": [\"2024-01-01\", \"2024-01-02\"], \"open\": [1, 2], "
    "\"high\": [1, 2], \"low\": [1, 2], \"close\": [1, 2]}, \"series\": [{\"candles\": "
    "[{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}, {\"timestamp\": "
    "2, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}]}, 3], \"horizon\": 1}",
    /* refused: each of the candle parser's messages, in its order */
    "{\"candles\": {\"timestamps\": [1, 2], \"opn\": [1, 2]}, \"horizon\": 1}",
    "{\"candles\": {\"open\": [1, 2]}, \"horizon\": 1}",
    "{\"candles\": {\"timestamps\": null, \"open\": [1, 2]}, \"horizon\": 1}",
    "{\"candles\": {\"timestamps\": \"2024\"}, \"horizon\": 1}",
    "{\"candles\": {\"timestamps\": [1], \"open\": [1], \"high\": [1], \"low\": [1], \"close\": "
    "[1]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": {\"a\": 1}, \"high\": [1], \"low\": [1], "
    "\"close\": [1]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1], \"low\": [1], "
    "\"close\": [1]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, 2], "
    "\"close\": [1, 2], \"amount\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [2, 1], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, 2], "
    "\"close\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [1, \"2024-13-01\"], \"open\": [1, 2], \"high\": [1, 2], "
    "\"low\": [1, 2], \"close\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [1, [2]], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, "
    "2], \"close\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [1, 1e300], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, "
    "2], \"close\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, \"2\"], \"high\": [1, 2], \"low\": [1, "
    "2], \"close\": [1, 1e39]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, 2], "
    "\"close\": [1, null]}}",
    "{\"candles\": [], \"horizon\": 1}",
    "{\"candles\": [1, 2], \"horizon\": 1}",
    "{\"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1}, 2]}",
    "{\"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}, 2]}",
    "{\"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}, "
    "{\"timestamp\": 2, \"timestamps\": 2, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}]}",
    "{\"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}, "
    "{\"timestamp\": 2, \"open\": [1], \"high\": 1, \"low\": 1, \"close\": 1, \"vol\": 1}]}",
    "{\"candles\": [{\"timestamp\": 1, \"open\": 1, \"high\": 1, \"low\": 1, \"close\": 1}, "
    "{\"timestamp\": \"x\", \"open\": {}, \"high\": 1, \"low\": 1, \"close\": 1}]}",
    "{\"candles\": 5, \"horizon\": 1}",
    "{\"candles\": {\"timestamps\": [1, 2], \"open\": [1, 2], \"high\": [1, 2], \"low\": [1, 2], "
    "\"close\": [1, 2]}, \"horizon\": 1.5, \"pred_len\": 2}",
    /* refused as JSON: jansson's message, wherever the fault is */
    "{\"candles\": {\"timestamps\": [1, 2,], \"open\": [1, 2]}}",
    "{\"candles\": {\"timestamps\": [1, 2], \"timestamps\": [1, 2]}}",
    "{\"candles\": [{\"timestamp\": 1, \"timestamp\": 2}]}",
    "{\"candles\": {\"timestamps\": [\"\\u0000\"]}}",
    "{\"candles\": {\"timestamps\": [\"\\ud800\"]}}",
    "{\"candles\": {\"timestamps\": [99999999999999999999]}}",
    "{\"candles\": {\"timestamps\": [1e999]}}",
    "{\"candles\": {\"timestamps\": [01]}}",
    "{\"candles\": {\"timestamps\": [1]}} x",
    "{\"candles\": {\"timestamps\": [1]}, \"candles\": 2}",
    "{\"candles\": {\"t\\u0069mestamps\": [1], \"timestamps\": [1]}}",
    "{\"candles\": [\"\xc3\x28\"]}",
    "[1, 2]",
    "",
    "{\"candles\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
};

static void test_body_candles_from_text(void **state) {
    (void)state;
    char why[1200];
    for (size_t i = 0; i < sizeof diff_bodies / sizeof diff_bodies[0]; i++) {
        if (kd_body_diff(diff_bodies[i], strlen(diff_bodies[i]), why, sizeof why) < 0)
            fail_msg("body %zu: the two readings differ: %s", i, why);
    }
    /* the fast path is taken: the candles stay text, here and in each series */
    json_t *b = kd_body_parse(diff_bodies[3], strlen(diff_bodies[3]), NULL);
    const char *text;
    size_t len;
    assert_non_null(b);
    assert_true(kd_body_text_of(json_object_get(b, "candles"), &text, &len));
    assert_int_equal(text[0], '{');
    assert_int_equal(text[len - 1], '}');
    const json_t *series = json_object_get(b, "series");
    assert_true(
        kd_body_text_of(json_object_get(json_array_get(series, 0), "candles"), &text, &len));
    assert_true(json_is_integer(json_array_get(series, 1)));
    json_decref(b);
}

/* The reader takes what jansson takes, strings and numbers decoded the same way. */
static void test_json_reader(void **state) {
    (void)state;
    static const char s[] = " \"a\\u00e9\\ud83d\\ude00\\n\" -12.5e1 [1, {\"k\": [true]}] ";
    kd_jreader r;
    char buf[32];
    size_t len;
    double x;
    bool is_int;
    kd_jr_init(&r, s, sizeof s - 1);
    assert_int_equal(kd_jr_string(&r, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 8);
    assert_string_equal(buf, "a\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_int_equal(kd_jr_number(&r, &x, &is_int), 0);
    assert_true(x == -125.0 && !is_int);
    assert_int_equal(kd_jr_skip(&r), 0);
    assert_true(kd_jr_at_end(&r));
    /* a cut string says its whole length */
    kd_jr_init(&r, "\"abcdef\"", 8);
    assert_int_equal(kd_jr_string(&r, buf, 4, &len), 0);
    assert_int_equal(len, 6);
    assert_string_equal(buf, "abc");
    static const char *const refused[] = {"01",
                                          "1.",
                                          "-",
                                          "\"\\x\"",
                                          "\"\t\"",
                                          "[1,]",
                                          "{\"a\"1}",
                                          "tru",
                                          "\"\\ud800\"",
                                          "\"\xed\xa0\x80\"",
                                          "\"\xc0\x80\"",
                                          "1e999",
                                          "{\"a\": 1, \"a\": 2}"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        kd_jr_init(&r, refused[i], strlen(refused[i]));
        if (kd_jr_skip(&r) == 0 && kd_jr_at_end(&r)) fail_msg("took %s", refused[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float32_shortest),
        cmocka_unit_test(test_double_labels),
        cmocka_unit_test(test_json_out),
        cmocka_unit_test(test_csv_basic),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_forecast_csv),
        cmocka_unit_test(test_query_params),
        cmocka_unit_test(test_strict_forecast_fields),
        cmocka_unit_test(test_body_candles_from_text),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_integer_written_as_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
