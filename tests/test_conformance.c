/* test_conformance.c — the upstream fixtures (tests/data/tiny/golden.json) reproduced by the
 * core: context tokens exactly, logits, reconstruction and greedy forecasts to 1e-4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "forecast_impl.h" /* kr_normalise */
#include "kronos.h"
#include "test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kr_model *model;
static json_t *golden;

static int setup(void **state) {
    (void)state;
    model = tu_load_tiny(512);
    golden = tu_load_golden();
    return model && golden ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    json_decref(golden);
    return 0;
}

static void test_context_tokens(void **state) {
    (void)state;
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(golden, "cases"), ci, c) {
        tu_case tc;
        assert_int_equal(tu_case_load(c, &tc), 0);
        json_t *inter = json_object_get(c, "intermediate");
        /* normalisation */
        float *raw = malloc((size_t)tc.req.context.n * 6 * sizeof(float));
        float *xn = malloc((size_t)tc.req.context.n * 6 * sizeof(float));
        int32_t *s1 = malloc((size_t)tc.req.context.n * sizeof(int32_t));
        int32_t *s2 = malloc((size_t)tc.req.context.n * sizeof(int32_t));
        float *rec = malloc((size_t)tc.req.context.n * 6 * sizeof(float));
        assert_non_null(raw);
        assert_non_null(xn);
        assert_non_null(s1);
        assert_non_null(s2);
        assert_non_null(rec);
        for (int i = 0; i < tc.req.context.n; i++)
            for (int k = 0; k < 6; k++)
                raw[i * 6 + k] = (float)tc.req.context.columns[k][i];
        float mean[6], denom[6];
        assert_int_equal(kr_normalise(raw, tc.req.context.n, xn, mean, denom, NULL), 0);
        double worst =
            tu_max_rel_matrix(xn, json_object_get(inter, "normalized_input"), tc.req.context.n, 6);
        assert_true(worst == 0.0); /* numpy's float32 arithmetic, reproduced exactly */
        kr_error err = {0};
        assert_int_equal(kr_tokenizer_encode(model, xn, tc.req.context.n, s1, s2, &err), 0);
        json_t *g1 = json_object_get(inter, "context_s1"),
               *g2 = json_object_get(inter, "context_s2");
        for (int i = 0; i < tc.req.context.n; i++) {
            assert_int_equal(s1[i], json_integer_value(json_array_get(g1, (size_t)i)));
            assert_int_equal(s2[i], json_integer_value(json_array_get(g2, (size_t)i)));
        }
        assert_int_equal(kr_tokenizer_decode(model, s1, s2, tc.req.context.n, rec, &err), 0);
        worst = tu_max_rel_matrix(rec, json_object_get(inter, "tokenizer_reconstruction"),
                                  tc.req.context.n, 6);
        printf("# %s: tokens match, reconstruction max rel diff %.2e\n", tc.name, worst);
        assert_true(worst < 1e-4);
        free(raw);
        free(xn);
        free(s1);
        free(s2);
        free(rec);
        tu_case_free(&tc);
    }
}

static void test_first_step_logits(void **state) {
    (void)state;
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(golden, "cases"), ci, c) {
        tu_case tc;
        assert_int_equal(tu_case_load(c, &tc), 0);
        json_t *inter = json_object_get(c, "intermediate");
        int L = tc.req.context.n, mc = tc.req.max_context, w = L < mc ? L : mc, d = 64;
        int32_t *s1 = malloc((size_t)L * sizeof(int32_t)),
                *s2 = malloc((size_t)L * sizeof(int32_t));
        kr_stamp *st = malloc((size_t)L * sizeof(kr_stamp));
        float *ctx = malloc((size_t)w * d * sizeof(float));
        float l1[1024], l2[1024];
        assert_true(s1 && s2 && st && ctx);
        json_t *g1 = json_object_get(inter, "context_s1"),
               *g2 = json_object_get(inter, "context_s2");
        for (int i = 0; i < L; i++) {
            s1[i] = (int32_t)json_integer_value(json_array_get(g1, (size_t)i));
            s2[i] = (int32_t)json_integer_value(json_array_get(g2, (size_t)i));
            st[i] = kr_stamp_from_wall(tc.req.context.timestamps[i]);
        }
        kr_error err = {0};
        int o = L - w;
        assert_int_equal(kr_predictor_window(model, s1 + o, s2 + o, st + o, w, l1, ctx, &err), 0);
        double r1 = tu_max_rel_vector(l1, json_object_get(inter, "first_step_s1_logits"), 1024);
        int best = 0;
        for (int i = 1; i < 1024; i++)
            if (l1[i] > l1[best]) best = i;
        assert_int_equal(best, json_integer_value(json_object_get(inter, "first_step_greedy_s1")));
        assert_int_equal(kr_predictor_s2_logits(model, ctx, w, best, l2, &err), 0);
        double r2 = tu_max_rel_vector(
            l2, json_object_get(inter, "first_step_s2_logits_given_greedy_s1"), 1024);
        printf("# %s: s1 logits max rel diff %.2e, s2 logits %.2e\n", tc.name, r1, r2);
        assert_true(r1 < 1e-4);
        assert_true(r2 < 1e-4);
        free(s1);
        free(s2);
        free(st);
        free(ctx);
        tu_case_free(&tc);
    }
}

static void run_forecasts(bool use_cache) {
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(golden, "cases"), ci, c) {
        tu_case tc;
        assert_int_equal(tu_case_load(c, &tc), 0);
        tc.req.use_cache = use_cache;
        kr_forecast_result res;
        kr_error err = {0};
        int rc = kr_forecast(model, NULL, &tc.req, &res, &err);
        if (rc) fprintf(stderr, "%s: %s\n", tc.name, err.msg);
        assert_int_equal(rc, 0);
        double worst = 0;
        for (int k = 0; k < 6; k++) {
            json_t *exp = json_object_get(json_object_get(c, "expected"), kr_column_names[k]);
            double r =
                tu_max_rel_doubles(res.mean + (size_t)k * tc.req.horizon, exp, tc.req.horizon);
            if (r > worst) worst = r;
        }
        printf("# %s (%s): forecast max rel diff %.2e, %.1f ms, %d cached / %d recomputed steps\n",
               tc.name, use_cache ? "cached" : "reference", worst, res.usage.elapsed_ms,
               res.usage.cached_steps, res.usage.recomputed_steps);
        assert_true(worst < 1e-4);
        for (int i = 0; i < tc.req.horizon; i++)
            assert_true(res.timestamps[i] == tc.req.future_timestamps[i]);
        kr_forecast_result_free(&res);
        tu_case_free(&tc);
    }
}

static void test_greedy_forecast_reference(void **state) {
    (void)state;
    run_forecasts(false);
}

static void test_greedy_forecast_cached(void **state) {
    (void)state;
    run_forecasts(true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_tokens),
        cmocka_unit_test(test_first_step_logits),
        cmocka_unit_test(test_greedy_forecast_reference),
        cmocka_unit_test(test_greedy_forecast_cached),
    };
    return cmocka_run_group_tests_name("conformance", tests, setup, teardown);
}
