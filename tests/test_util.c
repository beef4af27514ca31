#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kr_model *tu_load_tiny(int max_context) {
    return tu_load_tiny_as(max_context, KR_PREC_F32);
}

kr_model *tu_load_tiny_as(int max_context, kr_precision weights) {
    kr_model_paths p = {.tokenizer_dir = KR_TEST_DATA "/tiny/tokenizer",
                        .predictor_dir = KR_TEST_DATA "/tiny/predictor",
                        .max_context = max_context,
                        .weights = weights};
    kr_error err = {0};
    kr_model *m = kr_model_load(&p, &err);
    if (!m) fprintf(stderr, "load: %s\n", err.msg);
    return m;
}

json_t *tu_load_golden(void) {
    json_error_t e;
    json_t *g = json_load_file(KR_TEST_DATA "/tiny/golden.json", 0, &e);
    if (!g) fprintf(stderr, "golden.json: %s\n", e.text);
    return g;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t tu_wall(const char *iso) {
    int y, mo, d, h, mi, s;
    if (sscanf(iso, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6) return INT64_MIN;
    return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

static int64_t *walls(json_t *arr) {
    size_t n = json_array_size(arr);
    int64_t *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return NULL;
    for (size_t i = 0; i < n; i++)
        w[i] = tu_wall(json_string_value(json_array_get(arr, i)));
    return w;
}

int tu_case_load(json_t *c, tu_case *tc) {
    memset(tc, 0, sizeof *tc);
    json_t *in = json_object_get(c, "input");
    tc->name = json_string_value(json_object_get(c, "name"));
    kr_forecast_request_init(&tc->req);
    json_t *ts = json_object_get(in, "timestamps");
    int L = (int)json_array_size(ts);
    tc->timestamps = walls(ts);
    tc->future = walls(json_object_get(c, "future_timestamps"));
    for (int k = 0; k < KR_D_IN; k++) {
        json_t *col = json_object_get(in, kr_column_names[k]);
        tc->cols[k] = malloc((size_t)L * sizeof(double));
        if (!tc->cols[k]) return -1;
        for (int i = 0; i < L; i++)
            tc->cols[k][i] = json_number_value(json_array_get(col, (size_t)i));
        tc->req.context.columns[k] = tc->cols[k];
    }
    if (!tc->timestamps || !tc->future) return -1;
    tc->req.context.n = L;
    tc->req.context.timestamps = tc->timestamps;
    tc->req.horizon = (int)json_array_size(json_object_get(c, "future_timestamps"));
    tc->req.future_timestamps = tc->future;
    tc->req.max_context = (int)json_integer_value(json_object_get(c, "max_context"));
    tc->req.sampling = (kr_sampling){.temperature = 1.0, .top_k = 1, .top_p = 1.0};
    tc->req.samples = 1;
    return 0;
}

void tu_case_free(tu_case *tc) {
    free(tc->timestamps);
    free(tc->future);
    for (int k = 0; k < KR_D_IN; k++)
        free(tc->cols[k]);
}

static double rel(double a, double b, double floor) {
    double den = fabs(b) > floor ? fabs(b) : floor;
    return fabs(a - b) / den;
}

static double max_abs(json_t *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double v = fabs(json_number_value(json_array_get(b, (size_t)i)));
        if (v > m) m = v;
    }
    return m;
}

double tu_max_rel_vector(const float *a, json_t *b, int n) {
    if ((int)json_array_size(b) != n) return INFINITY;
    double floor = max_abs(b, n), worst = 0;
    for (int i = 0; i < n; i++) {
        double r = rel(a[i], json_number_value(json_array_get(b, (size_t)i)), floor);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

double tu_max_rel_doubles(const double *a, json_t *b, int n) {
    if ((int)json_array_size(b) != n) return INFINITY;
    double floor = 1e-3 * max_abs(b, n), worst = 0;
    for (int i = 0; i < n; i++) {
        double r = rel(a[i], json_number_value(json_array_get(b, (size_t)i)), floor);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

double tu_max_rel_matrix(const float *a, json_t *b, int rows, int cols) {
    if ((int)json_array_size(b) != rows) return INFINITY;
    double mx = 0, worst = 0;
    for (int i = 0; i < rows; i++) {
        double m = max_abs(json_array_get(b, (size_t)i), cols);
        if (m > mx) mx = m;
    }
    for (int i = 0; i < rows; i++) {
        json_t *row = json_array_get(b, (size_t)i);
        if ((int)json_array_size(row) != cols) return INFINITY;
        for (int k = 0; k < cols; k++) {
            double r = rel(a[i * cols + k], json_number_value(json_array_get(row, (size_t)k)), mx);
            if (!(r <= worst)) worst = r;
        }
    }
    return worst;
}

void tu_random_candles(uint32_t seed, int n, int64_t *ts, double *const cols[KR_D_IN]) {
    uint32_t state = seed;
#define LCG() (state = state * 1664525u + 1013904223u, (state >> 8) * (1.0 / 16777216.0))
    double close = 100.0;
    for (int i = 0; i < n; i++) {
        const double open = close;
        close = open * (1.0 + (LCG() - 0.5) * 0.02);
        ts[i] = 1700000000 + 300 * (int64_t)i;
        cols[KR_OPEN][i] = open;
        cols[KR_HIGH][i] = fmax(open, close) * (1.0 + LCG() * 0.005);
        cols[KR_LOW][i] = fmin(open, close) * (1.0 - LCG() * 0.005);
        cols[KR_CLOSE][i] = close;
        cols[KR_VOLUME][i] = 1000.0 + 500.0 * LCG();
        cols[KR_AMOUNT][i] = cols[KR_VOLUME][i] * close;
    }
#undef LCG
}

void tu_tokens(int32_t *s1, int32_t *s2, kr_stamp *st, int n, int m1, int m2) {
    for (int i = 0; i < n; i++) {
        s1[i] = (int32_t)(i * m1 % 1024);
        s2[i] = (int32_t)(i * m2 % 1024);
        st[i] = kr_stamp_from_wall(1700000000 + 300 * (int64_t)i);
    }
}

void tu_same_result(const kr_forecast_result *a, const kr_forecast_result *b) {
    int P = a->horizon, S = a->samples;
    assert_int_equal(P, b->horizon);
    assert_int_equal(S, b->samples);
    assert_int_equal(a->n_quantiles, b->n_quantiles);
    assert_memory_equal(a->timestamps, b->timestamps, (size_t)P * sizeof(int64_t));
    assert_memory_equal(a->mean, b->mean, (size_t)KR_D_IN * P * sizeof(double));
    assert_memory_equal(a->prob_close_up, b->prob_close_up, (size_t)P * sizeof(double));
    if (a->n_quantiles)
        assert_memory_equal(a->quantiles, b->quantiles,
                            (size_t)a->n_quantiles * KR_D_IN * P * sizeof(double));
    assert_true(!a->paths == !b->paths);
    if (a->paths) assert_memory_equal(a->paths, b->paths, (size_t)S * KR_D_IN * P * sizeof(double));
    assert_memory_equal(a->norm_mean, b->norm_mean, sizeof a->norm_mean);
    assert_memory_equal(a->norm_std, b->norm_std, sizeof a->norm_std);
}

void tu_walk_forecast(const kr_model *m, bool use_cache, kr_forecast_result *res) {
    enum { L = 90, P = 12 };
    int64_t ts[L];
    static double cols[KR_D_IN][L];
    double *cp[KR_D_IN];
    for (int c = 0; c < KR_D_IN; c++)
        cp[c] = cols[c];
    tu_random_candles(3, L, ts, cp);
    kr_forecast_request r = {
        .context = {.n = L, .timestamps = ts},
        .horizon = P,
        .samples = 4,
        .sampling = {.temperature = 1.0, .top_k = 0, .top_p = 0.9},
        .seed = 7,
        .use_cache = use_cache,
        .return_paths = true,
    };
    for (int c = 0; c < KR_D_IN; c++)
        r.context.columns[c] = cols[c];
    kr_error err;
    assert_int_equal(kr_forecast(m, NULL, &r, res, &err), 0);
    assert_int_equal(res->usage.weights, kr_model_weights(m));
}

void tu_same_paths(const kr_forecast_result *a, const kr_forecast_result *b) {
    assert_int_equal(a->samples, b->samples);
    assert_memory_equal(a->paths, b->paths,
                        (size_t)a->samples * KR_D_IN * a->horizon * sizeof(double));
}
