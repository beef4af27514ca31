#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "evaluate_impl.h" /* kr_evaluation_add, for the hand-made cases */
#include "matmul.h"        /* kr_simd_set */
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
    enum { L = 90, P = 6 };
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
    assert_int_equal(res->usage.kv, kr_model_kv(m));
}

void tu_same_paths(const kr_forecast_result *a, const kr_forecast_result *b) {
    assert_int_equal(a->samples, b->samples);
    assert_memory_equal(a->paths, b->paths,
                        (size_t)a->samples * KR_D_IN * a->horizon * sizeof(double));
}

int tu_mkmodels(char (*dirs)[64], const char *const *flags, int n, int seed) {
    const char *tool = getenv("KR_MKMODEL");
    if (!tool) {
        fprintf(stderr, "KR_MKMODEL is not set\n");
        return -1;
    }
    for (int f = 0; f < n; f++) {
        snprintf(dirs[f], 64, "/tmp/kr-test-model-XXXXXX");
        if (!mkdtemp(dirs[f])) return -1;
        char cmd[512];
        /* tokenizer heads of 32 and predictor heads of 32: the AVX-512 head paths */
        snprintf(cmd, sizeof cmd,
                 "%s --out %s --preset tiny --d-model 128 --tok-d-model 64 --seed %d --dtype %s "
                 ">/dev/null",
                 tool, dirs[f], seed, flags[f]);
        if (system(cmd) != 0) {
            fprintf(stderr, "failed: %s\n", cmd);
            return -1;
        }
    }
    return 0;
}

int tu_rmdirs(char (*dirs)[64], int n) {
    for (int f = 0; f < n; f++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dirs[f]);
        if (system(cmd) != 0) return -1;
    }
    return 0;
}

kr_model *tu_load_dir(const char *dir, kr_precision weights, kr_precision kv) {
    char tok[128], pred[128];
    snprintf(tok, sizeof tok, "%s/tokenizer", dir);
    snprintf(pred, sizeof pred, "%s/predictor", dir);
    kr_model_paths p = {.tokenizer_dir = tok,
                        .predictor_dir = pred,
                        .max_context = 512,
                        .weights = weights,
                        .kv = kv};
    kr_error err = {0};
    kr_model *m = kr_model_load(&p, &err);
    if (!m) fprintf(stderr, "%s as %s: %s\n", dir, kr_precision_name(weights), err.msg);
    return m;
}

void tu_fork_logits(const kr_model *m, int n_tok, int tail, int paths, float *out) {
    enum { V = TU_VOCAB };
    int32_t *t1 = malloc(sizeof(int32_t) * (n_tok + 1)),
            *t2 = malloc(sizeof(int32_t) * (n_tok + 1));
    kr_stamp *st = malloc(sizeof(kr_stamp) * (n_tok + 1));
    float *one1 = malloc(sizeof(float) * V), *one2 = malloc(sizeof(float) * V);
    assert_true(t1 && t2 && st && one1 && one2);
    tu_tokens(t1, t2, st, n_tok + 1, 37, 91);
    kr_error err;
    kr_pool *pool = kr_pool_create(m, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_cache *c = kr_cache_create(pool, 0, &err), *t = kr_cache_create(pool, 0, &err);
    assert_non_null(c);
    assert_non_null(t);
    assert_int_equal(kr_cache_append(&c, 1, t1, t2, st, n_tok, out, &err), 0);
    if (tail < n_tok)
        assert_int_equal(kr_cache_append(&t, 1, t1, t2, st, n_tok - tail, NULL, &err), 0);
    for (int i = n_tok - tail; i < n_tok; i++)
        assert_int_equal(kr_cache_append(&t, 1, t1 + i, t2 + i, st + i, 1, out + V, &err), 0);
    assert_memory_equal(out, out + V, V * sizeof(float));
    kr_cache **f = malloc(sizeof(kr_cache *) * paths);
    int32_t *a = malloc(sizeof(int32_t) * paths), *b = malloc(sizeof(int32_t) * paths);
    int32_t *chosen = malloc(sizeof(int32_t) * paths);
    kr_stamp *fs = malloc(sizeof(kr_stamp) * paths);
    assert_true(f && a && b && chosen && fs);
    for (int p = 0; p < paths; p++) {
        assert_non_null(f[p] = kr_cache_fork(c, &err));
        a[p] = (int32_t)(100 + 17 * p);
        b[p] = (int32_t)(900 - 31 * p);
        chosen[p] = (int32_t)(7 * p);
        fs[p] = st[n_tok];
    }
    float *s1 = out + 2 * V, *s2 = s1 + (size_t)paths * V;
    assert_int_equal(kr_cache_append(f, paths, a, b, fs, 1, s1, &err), 0);
    assert_int_equal(kr_cache_s2_logits(f, paths, chosen, s2, &err), 0);
    for (int p = 0; p < paths; p++) { /* each alone, forked again from the prefix */
        kr_cache *g = kr_cache_fork(c, &err);
        assert_non_null(g);
        assert_int_equal(kr_cache_append(&g, 1, &a[p], &b[p], fs, 1, one1, &err), 0);
        assert_int_equal(kr_cache_s2_logits(&g, 1, &chosen[p], one2, &err), 0);
        assert_memory_equal(one1, s1 + (size_t)p * V, V * sizeof(float));
        assert_memory_equal(one2, s2 + (size_t)p * V, V * sizeof(float));
        kr_cache_free(g);
    }
    for (int p = 0; p < paths; p++)
        kr_cache_free(f[p]);
    kr_cache_free(c);
    kr_cache_free(t);
    kr_pool_free(pool);
    free(t1), free(t2), free(st), free(one1), free(one2);
    free(f), free(a), free(b), free(chosen), free(fs);
}

int tu_levels_agree(const kr_model *m, const kr_model *same_as, int n_tok, int tail, int paths,
                    float *first) {
    size_t n = TU_LOGITS_FLOATS(paths);
    float *b = malloc(sizeof(float) * n), *a = same_as ? malloc(sizeof(float) * n) : NULL;
    assert_true(b && (a || !same_as));
    kr_forecast_result first_fc = {0};
    int levels = 0;
    for (int s = KR_SIMD_GENERIC; s <= KR_SIMD_AMX; s++) {
        if (kr_simd_set((kr_simd)s) != 0) continue;
        tu_fork_logits(m, n_tok, tail, paths, b);
        if (same_as) {
            tu_fork_logits(same_as, n_tok, tail, paths, a);
            assert_memory_equal(a, b, sizeof(float) * n);
        }
        kr_forecast_result cached, plain;
        tu_walk_forecast(m, true, &cached);
        tu_walk_forecast(m, false, &plain);
        tu_same_paths(&cached, &plain);
        kr_forecast_result_free(&plain);
        if (levels++ == 0) {
            memcpy(first, b, sizeof(float) * n);
            first_fc = cached;
        } else {
            assert_memory_equal(first, b, sizeof(float) * n);
            tu_same_paths(&first_fc, &cached);
            kr_forecast_result_free(&cached);
        }
    }
    kr_simd_set(kr_simd_level()); /* back to the best */
    kr_forecast_result_free(&first_fc);
    free(a), free(b);
    return levels;
}

double tu_moved(const float *ref, const float *a, int n, double *scale) {
    double worst = 0;
    *scale = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)ref[i] - a[i]));
        *scale = fmax(*scale, fabs((double)ref[i]));
    }
    return worst;
}

float tu_lcg(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

int tu_linear_every_level(const kr_linear *l, const float *x, int T, const float *ref) {
    int out = l->out, in = l->in, levels = 0;
    float *y = malloc(sizeof(float) * T * out), *one = malloc(sizeof(float) * out);
    assert_true(y && one);
    for (int s = KR_SIMD_GENERIC; s <= KR_SIMD_AMX; s++) {
        if (kr_simd_set((kr_simd)s) != 0) continue;
        levels++;
        memset(y, 0, sizeof(float) * T * out);
        kr_linear_forward(y, x, T, l);
        assert_memory_equal(y, ref, sizeof(float) * T * out);
        for (int r = 0; r < T; r += T / 3 + 1) {
            kr_linear_forward(one, x + (size_t)r * in, 1, l);
            assert_memory_equal(one, ref + (size_t)r * out, sizeof(float) * out);
        }
        for (int i = 0; i < T * out; i++)
            y[i] = (float)i;
        kr_linear_forward_add(y, x, T, l);
        for (int i = 0; i < T * out; i++)
            assert_true(y[i] == (float)i + ref[i]);
        if (out % 32 == 0) {
            float *half = malloc(sizeof(float) * T * out / 2);
            assert_non_null(half);
            float *parts[2] = {y, half};
            assert_int_equal(kr_linear_forward_parts(parts, 2, x, T, l), 0);
            for (int r = 0; r < T; r++)
                for (int o = 0; o < out; o++)
                    assert_true(parts[o / (out / 2)][(size_t)r * (out / 2) + o % (out / 2)] ==
                                ref[(size_t)r * out + o]);
            free(half);
        }
    }
    kr_simd_set(kr_simd_level());
    assert_true(levels >= 1);
    free(y), free(one);
    return levels;
}

void tu_level_log_start(tu_level_log *log, bool record) {
    log->record = record;
    log->at = 0;
    if (record) log->len = 0;
}

void tu_level_log_check(tu_level_log *log, const float *x, size_t n) {
    if (log->record) {
        float *grown = realloc(log->x, (log->len + n) * sizeof(float));
        assert_non_null(grown);
        log->x = grown;
        memcpy(log->x + log->len, x, n * sizeof(float));
        log->len += n;
    } else {
        assert_true(log->at + n <= log->len);
        assert_memory_equal(log->x + log->at, x, n * sizeof(float));
    }
    log->at += n;
}

void tu_level_log_done(const tu_level_log *log) {
    assert_true(log->at == log->len);
}

void tu_level_log_free(tu_level_log *log) {
    free(log->x);
    *log = (tu_level_log){0};
}

void tu_expect_invalid(int rc, const kr_error *err, const char *field) {
    assert_int_equal(rc, -1);
    assert_int_equal(err->code, KR_E_INVALID);
    if (strncmp(err->msg, field, strlen(field)) != 0)
        fail_msg("expected a message naming %s, got: %s", field, err->msg);
}

void tu_hand8_init(tu_hand8 *h, bool open_is_close) {
    static const double close[8] = {100, 100, 100, 125, 100, 100, 125, 125};
    for (int i = 0; i < 8; i++) {
        h->ts[i] = 60 * i;
        h->close[i] = close[i];
        h->ones[i] = 1;
    }
    h->open_is_close = open_is_close;
}

kr_candles tu_hand8_candles(const tu_hand8 *h, int n) {
    double *open = (double *)(h->open_is_close ? h->close : h->ones);
    double *one = (double *)h->ones, *close = (double *)h->close;
    return (kr_candles){n, h->ts, {open, one, one, close, NULL, NULL}};
}

void tu_hand8_request(const tu_hand8 *h, kr_evaluate_request *r) {
    kr_evaluate_request_init(r);
    r->candles = tu_hand8_candles(h, 8);
    r->lookback = 2;
    r->horizon = 1;
    r->stride = 1;
    r->samples = 1;
    r->n_quantiles = 3;
    r->quantiles[0] = 0.1;
    r->quantiles[1] = 0.5;
    r->quantiles[2] = 0.9;
    r->calibration_warmup = 2;
    r->model_id = "tiny";
}

void tu_hand8_origin(const tu_hand8 *h, int k, tu_hand8_forecast *f) {
    const double last = h->close[k + 1];
    memset(f, 0, sizeof *f);
    f->mean[KR_CLOSE] = f->paths[KR_CLOSE] = last;
    if (h->open_is_close) f->paths[KR_OPEN] = last;
    for (int q = 0; q < 3; q++) {
        f->q[q * KR_D_IN + KR_CLOSE] = last;
        if (h->open_is_close) f->q[q * KR_D_IN + KR_OPEN] = last;
    }
    f->res = (kr_forecast_result){.horizon = 1,
                                  .samples = 1,
                                  .n_quantiles = 3,
                                  .mean = f->mean,
                                  .paths = f->paths,
                                  .quantiles = f->q,
                                  .prob_close_up = f->up};
}

void tu_hand8_run(const kr_model *m, const tu_hand8 *h, const kr_evaluate_request *r,
                  kr_evaluation *ev) {
    kr_evaluate_plan plan;
    kr_error err = {0};
    if (kr_evaluate_plan_make(m, r, &plan, &err) || kr_evaluation_init(r, &plan, ev, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(ev->origins, 6);
    for (int k = 0; k < 6; k++) {
        tu_hand8_forecast f;
        tu_hand8_origin(h, k, &f);
        if (kr_evaluation_add(ev, r, k, &f.res, &err)) fail_msg("%s", err.msg);
    }
    if (kr_evaluation_finish(ev, r, &err)) fail_msg("%s", err.msg);
}

json_t *tu_first_case(tu_case *tc) {
    json_t *g = tu_load_golden();
    assert_non_null(g);
    assert_int_equal(tu_case_load(json_array_get(json_object_get(g, "cases"), 0), tc), 0);
    return g;
}

double tu_max_rel_floats(const float *a, const float *b, int n) {
    double mx = 0, worst = 0;
    for (int i = 0; i < n; i++)
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
    for (int i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / mx;
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

void tu_hand8_fit(const kr_model *m, const tu_hand8 *h, kr_evaluate_request *r,
                  kr_calibration *obj) {
    r->calibration_mode = KR_CALIB_ROLLING;
    kr_evaluation fit;
    tu_hand8_run(m, h, r, &fit);
    kr_error err = {0};
    assert_int_equal(kr_calibration_copy(obj, &fit.calibrated->fitted, &err), 0);
    kr_evaluation_free(&fit);
    r->calibration_mode = KR_CALIB_GIVEN;
    r->calibration = obj;
}

void tu_hand8_calibrate(const tu_hand8 *h, const kr_calibration *obj, int k, kr_calibrated *out) {
    tu_hand8_forecast f;
    tu_hand8_origin(h, k, &f);
    kr_forecast_request fr;
    kr_forecast_request_init(&fr);
    fr.context = tu_hand8_candles(h, k + 2);
    kr_error err = {0};
    assert_int_equal(kr_calibrate_forecast(obj, &fr, &f.res, out, &err), 0);
}
