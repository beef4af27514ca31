/* test_scheduler.c — the step scheduler: jobs of every kind joining and leaving its steps
 * each end once with what they get alone; it waits for memory, classes a request by its
 * whole work, encodes a context within the steps, and keeps light requests' steps short
 * beside heavy ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "forecast_impl.h" /* kr_encode_fit */
#include "kronos.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOKENS 104

static kr_model *model;
static int32_t tok1[N_TOKENS], tok2[N_TOKENS];
static kr_stamp stamps[N_TOKENS];

static int setup(void **state) {
    (void)state;
    model = tu_load_tiny(512);
    if (!model) return -1;
    tu_tokens(tok1, tok2, stamps, N_TOKENS, 37, 91);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    return 0;
}

/* ---- jobs joining and leaving -------------------------------------------------------------- */

typedef struct {
    int ended[16];
    kr_error errs[16];
} sched_log;

static void log_done(void *tag, const kr_error *err, void *ctx) {
    sched_log *l = ctx;
    int k = (int)(intptr_t)tag;
    l->ended[k]++;
    l->errs[k] = *err;
}

/* Every one of n forecasts the scheduler ran ended well with its solo answer (each run
 * alone as its own class: class_flops 0); frees the results. */
static void all_as_alone(const sched_log *log, const kr_forecast_request *q,
                         kr_forecast_result *res, int n) {
    kr_forecast_result solo;
    kr_error err;
    for (int k = 0; k < n; k++) {
        if (log->errs[k].code) fail_msg("forecast %d: %s", k, log->errs[k].msg);
        kr_forecast_request alone = q[k];
        alone.class_flops = 0;
        assert_int_equal(kr_forecast(model, NULL, &alone, &solo, &err), 0);
        tu_same_result(&res[k], &solo);
        kr_forecast_result_free(&solo);
        kr_forecast_result_free(&res[k]);
    }
}

/* Forecasts and token generations added at different steps of one scheduler with a small
 * token budget (prefills cut into chunks of 7 rows, shared with other jobs' decode rows):
 * each ends once, with the tokens and numbers it gets alone. */
static void test_scheduler_join_leave(void **state) {
    (void)state;
    json_t *g = tu_load_golden();
    json_t *cases = json_object_get(g, "cases");
    enum { NF = 4, NG = 3 };
    tu_case tc[NF];
    kr_forecast_request q[NF];
    kr_forecast_result res[NF], solo;
    for (int k = 0; k < NF; k++) {
        assert_int_equal(tu_case_load(json_array_get(cases, (size_t)k), &tc[k]), 0);
        q[k] = tc[k].req;
        q[k].samples = 2 + k;
        q[k].seed = (uint64_t)(40 + k);
        q[k].sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
        q[k].return_paths = true;
    }
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)256 << 20, &err);
    assert_non_null(pool);
    /* generations: a prompt of 30 + k tokens, then 12 new ones, on fresh caches */
    kr_cache *gc[NG], *solo_c;
    kr_generate_request gr[NG];
    int32_t out1[NG][12], out2[NG][12], want1[12], want2[12];
    for (int k = 0; k < NG; k++) {
        assert_non_null(gc[k] = kr_cache_create(pool, 0, &err));
        gr[k] = (kr_generate_request){.s1 = tok1 + k,
                                      .s2 = tok2 + k,
                                      .stamps = stamps + k,
                                      .n_append = 30 + k,
                                      .new_stamps = stamps + 40,
                                      .n_new = 12,
                                      .sampling = {.temperature = 0.9, .top_k = 0, .top_p = 0.95},
                                      .seed = (uint64_t)(7 + k)};
    }
    sched_log log = {0};
    kr_sched_config cfg = {.step_tokens = 7, .max_rows = 9, .done = log_done, .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    /* joining: forecast 0 and generation 0 at once, the others a few steps later each */
    int added_f = 0, added_g = 0, steps = 0;
    for (;;) {
        if (added_f < NF && steps >= 3 * added_f) {
            assert_int_equal(kr_sched_add_forecast(s, &q[added_f], &res[added_f],
                                                   (void *)(intptr_t)added_f, &err),
                             0);
            added_f++;
        }
        if (added_g < NG && steps >= 5 * added_g) {
            assert_int_equal(kr_sched_add_generate(s, gc[added_g], &gr[added_g], out1[added_g],
                                                   out2[added_g], (void *)(intptr_t)(NF + added_g),
                                                   &err),
                             0);
            added_g++;
        }
        int held = kr_sched_step(s);
        steps++;
        if (held == 0 && added_f == NF && added_g == NG) break;
        assert_true(steps < 100000);
    }
    kr_sched_free(s);
    for (int k = 0; k < NF; k++) {
        assert_int_equal(log.ended[k], 1);
        assert_int_equal(log.errs[k].code, 0);
        assert_int_equal(kr_forecast(model, NULL, &q[k], &solo, &err), 0);
        tu_same_result(&res[k], &solo);
        kr_forecast_result_free(&solo);
        kr_forecast_result_free(&res[k]);
    }
    for (int k = 0; k < NG; k++) {
        assert_int_equal(log.ended[NF + k], 1);
        assert_int_equal(log.errs[NF + k].code, 0);
        assert_non_null(solo_c = kr_cache_create(pool, 0, &err));
        assert_int_equal(kr_generate(solo_c, &gr[k], want1, want2, &err), 0);
        assert_memory_equal(out1[k], want1, sizeof want1);
        assert_memory_equal(out2[k], want2, sizeof want2);
        assert_int_equal(kr_cache_length(gc[k]), kr_cache_length(solo_c));
        kr_cache_free(solo_c);
        kr_cache_free(gc[k]);
    }
    print_message("# %d forecasts and %d generations over %d steps of 7 prefill rows\n", NF, NG,
                  steps);
    kr_pool_free(pool);
    for (int k = 0; k < NF; k++)
        tu_case_free(&tc[k]);
    json_decref(g);
}

/* Three forecasts in a pool that holds one and a half of them: the pool runs dry mid-step,
 * and the jobs that do not fit wait for the others' memory instead of failing; each ends
 * with its solo answer. */
static void test_scheduler_waits_for_memory(void **state) {
    (void)state;
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    kr_forecast_request q[3];
    kr_forecast_result res[3];
    kr_forecast_plan plan;
    kr_error err;
    for (int k = 0; k < 3; k++) {
        q[k] = tc.req;
        q[k].samples = 6;
        q[k].seed = (uint64_t)(90 + k);
        q[k].sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
    }
    assert_int_equal(kr_forecast_plan_make(model, &q[0], &plan, &err), 0);
    kr_pool *pool = kr_pool_create(model, plan.pool_bytes * 3 / 2, &err);
    assert_non_null(pool);
    sched_log log = {0};
    kr_sched_config cfg = {.step_tokens = 16, .done = log_done, .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    for (int k = 0; k < 3; k++)
        assert_int_equal(kr_sched_add_forecast(s, &q[k], &res[k], (void *)(intptr_t)k, &err), 0);
    int steps = 0;
    while (kr_sched_step(s) > 0)
        assert_true(++steps < 100000);
    kr_sched_free(s);
    all_as_alone(&log, q, res, 3);
    kr_pool_free(pool);
    tu_case_free(&tc);
    json_decref(g);
}

/* A forecast is classed by the request it is part of: alone it is light, as one origin of an
 * evaluation whose planned work is past light_flops it is heavy (the evaluation's origins
 * must not pass for light beside a small request), and its answer is the same either way. */
static void test_scheduler_classes_by_the_whole_request(void **state) {
    (void)state;
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    kr_forecast_plan plan;
    kr_error err;
    assert_int_equal(kr_forecast_plan_make(model, &tc.req, &plan, &err), 0);
    kr_forecast_result res[2];
    for (int part = 0; part < 2; part++) {
        kr_forecast_request q = tc.req;
        q.class_flops = part ? 1000 * plan.flops : 0;
        kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
        assert_non_null(pool);
        sched_log log = {0};
        kr_sched_config cfg = {.light_flops = 2 * plan.flops, .done = log_done, .ctx = &log};
        kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
        assert_non_null(s);
        assert_int_equal(kr_sched_add_forecast(s, &q, &res[part], (void *)(intptr_t)0, &err), 0);
        kr_sched_step(s);
        kr_sched_stats ks;
        kr_sched_stats_get(s, &ks);
        assert_int_equal(ks.light_active, part ? 0 : 1);
        while (kr_sched_step(s) > 0)
            ;
        kr_sched_free(s);
        kr_pool_free(pool);
        if (log.errs[0].code) fail_msg("%s", log.errs[0].msg);
    }
    tu_same_result(&res[0], &res[1]);
    kr_forecast_result_free(&res[0]);
    kr_forecast_result_free(&res[1]);
    tu_case_free(&tc);
    json_decref(g);
}

/* A forecast's context is encoded in the steps, under their token budget (its candles
 * counted at their cost in predictor rows): with a budget smaller than a context's, of four
 * heavy forecasts queued at once one starts, and the light one beside it (a heavy one
 * starts only while those running have less than a step's rows left to fill), no step
 * encodes more than the budget pays for, every context takes several steps, and every
 * answer is its solo one (a context encoded in chunks gives the tokens of encoding it
 * whole). */
static void test_scheduler_encodes_within_the_step(void **state) {
    (void)state;
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    kr_forecast_plan plan;
    kr_error err;
    assert_int_equal(kr_forecast_plan_make(model, &tc.req, &plan, &err), 0);
    enum { HEAVY = 4, BUDGET = 7 };
    assert_true(tc.req.context.n > 2 * BUDGET);
    kr_forecast_request q[HEAVY + 1];
    kr_forecast_result res[HEAVY + 1];
    for (int k = 0; k <= HEAVY; k++) {
        q[k] = tc.req;
        q[k].seed = (uint64_t)(40 + k);
        q[k].class_flops = k < HEAVY ? 1000 * plan.flops : 0; /* the last one light */
    }
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    sched_log log = {0};
    kr_sched_config cfg = {
        .step_tokens = BUDGET, .light_flops = 2 * plan.flops, .done = log_done, .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    for (int k = 0; k <= HEAVY; k++)
        assert_int_equal(kr_sched_add_forecast(s, &q[k], &res[k], (void *)(intptr_t)k, &err), 0);
    kr_sched_stats ks;
    kr_sched_step(s);
    kr_sched_stats_get(s, &ks);
    assert_int_equal(ks.active, 2);
    assert_int_equal(ks.light_active, 1);
    assert_int_equal(ks.waiting, HEAVY - 1);
    /* what the light one's budget and the others' together may encode at most in a step:
     * the cheapest candles, those at the start, for twice the budget and a candle a job more */
    const int most = kr_encode_fit(model, 0, 1 << 20, 2 * BUDGET + HEAVY + 1);
    assert_true(most < tc.req.context.n);
    int encoding_steps = 1, encoded = ks.encoded_last_step;
    assert_true(encoded > 0 && encoded <= most);
    while (kr_sched_step(s) > 0) {
        kr_sched_stats_get(s, &ks);
        assert_true(ks.encoded_last_step <= most);
        encoded += ks.encoded_last_step;
        encoding_steps += ks.encoded_last_step > 0;
    }
    assert_int_equal(encoded, (HEAVY + 1) * tc.req.context.n);
    assert_true(encoding_steps >= (HEAVY + 1) * tc.req.context.n / most);
    kr_sched_free(s);
    all_as_alone(&log, q, res, HEAVY + 1);
    kr_pool_free(pool);
    tu_case_free(&tc);
    json_decref(g);
}

/* One heavy forecast after a light one (half its candles) ran alone, on a scheduler whose
 * step holds a whole context at once and whose fixed cost is 4 rows; light_recent_ms: the
 * light_wait window (negative: never). The most window and encode rows any of the heavy one's steps
 * held, and the light one's cost alone in rows; the heavy one's answer is its solo one. */
static int heavy_after_light(double light_recent_ms, double *alone_rows) {
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    kr_forecast_plan plan;
    kr_error err;
    assert_int_equal(kr_forecast_plan_make(model, &tc.req, &plan, &err), 0);
    kr_forecast_request q[2] = {tc.req, tc.req};
    const int half = tc.req.context.n / 2; /* the light one: the last half of the candles */
    q[0].context.n -= half;
    q[0].context.timestamps += half;
    for (int c = 0; c < KR_D_IN; c++)
        if (q[0].context.columns[c]) q[0].context.columns[c] += half;
    q[1].seed = 77;
    q[1].class_flops = 1000 * plan.flops;
    kr_forecast_result res[2];
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    sched_log log = {0};
    kr_sched_config cfg = {.step_tokens = 8 * tc.req.context.n,
                           .step_fixed_rows = 4,
                           .light_flops = 2 * plan.flops,
                           .light_recent_ms = light_recent_ms,
                           .done = log_done,
                           .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    kr_sched_stats ks;
    assert_int_equal(kr_sched_add_forecast(s, &q[0], &res[0], (void *)(intptr_t)0, &err), 0);
    while (kr_sched_step(s) > 0)
        ;
    kr_sched_stats_get(s, &ks);
    *alone_rows = ks.light_alone_rows;
    assert_int_equal(kr_sched_add_forecast(s, &q[1], &res[1], (void *)(intptr_t)1, &err), 0);
    int most = 0;
    while (kr_sched_step(s) > 0) {
        kr_sched_stats_get(s, &ks);
        assert_int_equal(ks.light_recent, light_recent_ms > 0);
        int rows = ks.prefill_rows_last_step + ks.encode_rows_last_step;
        if (rows > most) most = rows;
    }
    kr_sched_free(s);
    all_as_alone(&log, q, res, 2);
    kr_pool_free(pool);
    tu_case_free(&tc);
    json_decref(g);
    return most;
}

/* While light jobs come, a step without one holds no more than keeps it within light_wait
 * (a half) of what the last light job cost alone (its context encoded and prefilled, then a
 * row a path each step, then its summary, each step with the fixed cost): a light job
 * coming mid-step waits that long at most. Without light_wait the heavy one's first step holds its
 * whole context, encoded and prefilled. */
static void test_scheduler_short_steps_while_light_come(void **state) {
    (void)state;
    double alone, alone_off;
    int most = heavy_after_light(60000, &alone);
    int most_off = heavy_after_light(-1, &alone_off);
    assert_true(alone > 4);
    assert_true(alone == alone_off); /* counted the same, used or not */
    const int bound = (int)(0.5 * alone - 4);
    print_message("# a light job alone: %.0f rows; the heavy one's steps: at most %d rows "
                  "(bound %d), %d without the bound\n",
                  alone, most, bound, most_off);
    assert_true(most <= (bound > 1 ? bound : 1));
    assert_true(most_off > bound);
}

/* A short generation added while a long prefill fills: the step's budget goes to the least
 * left to fill first, so the short one is done within 3 steps (prefill and first draw, then a
 * token a step) while the long one still fills, with the tokens it gets alone. */
/* A generation's tokens equal those of the same request run alone on a fresh cache. */
static void same_as_alone(kr_pool *pool, const kr_generate_request *r, const int32_t *got1,
                          const int32_t *got2, int32_t *w1, int32_t *w2) {
    kr_error err;
    kr_cache *solo = kr_cache_create(pool, 0, &err);
    assert_non_null(solo);
    assert_int_equal(kr_generate(solo, r, w1, w2, &err), 0);
    assert_memory_equal(got1, w1, (size_t)r->n_new * sizeof *w1);
    assert_memory_equal(got2, w2, (size_t)r->n_new * sizeof *w2);
    kr_cache_free(solo);
}

/* A generation sampled at temperature 1, top-p 0.9: n_new pairs after the first n_append
 * of (s1, s2, st), their stamps the ones that follow in st. */
static kr_generate_request sampled_request(const int32_t *s1, const int32_t *s2, const kr_stamp *st,
                                           int n_append, int n_new, uint64_t seed) {
    return (kr_generate_request){.s1 = s1,
                                 .s2 = s2,
                                 .stamps = st,
                                 .n_append = n_append,
                                 .new_stamps = st + n_append,
                                 .n_new = n_new,
                                 .seed = seed,
                                 .sampling = {.temperature = 1.0, .top_k = 0, .top_p = 0.9}};
}

static void test_scheduler_cheapest_fill_first(void **state) {
    (void)state;
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_generate_request lr = sampled_request(tok1, tok2, stamps, 96, 1, 3);
    kr_generate_request sr = sampled_request(tok1, tok2, stamps, 4, 2, 3);
    kr_cache *lc = kr_cache_create(pool, 0, &err), *sc = kr_cache_create(pool, 0, &err);
    assert_non_null(lc);
    assert_non_null(sc);
    int32_t l1[1], l2[1], s1[2], s2[2], w1[2], w2[2];
    sched_log log = {0};
    kr_sched_config cfg = {.step_tokens = 16, .done = log_done, .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    assert_int_equal(kr_sched_add_generate(s, lc, &lr, l1, l2, (void *)(intptr_t)0, &err), 0);
    kr_sched_step(s); /* the long one takes the whole budget */
    assert_int_equal(kr_sched_add_generate(s, sc, &sr, s1, s2, (void *)(intptr_t)1, &err), 0);
    for (int k = 0; k < 3; k++)
        kr_sched_step(s);
    assert_int_equal(log.ended[1], 1); /* 16 rows a step: the long one needs 6 steps */
    assert_int_equal(log.ended[0], 0);
    while (kr_sched_step(s) > 0)
        ;
    kr_sched_free(s);
    assert_int_equal(log.ended[0], 1);
    assert_int_equal(log.errs[0].code, 0);
    assert_int_equal(log.errs[1].code, 0);
    same_as_alone(pool, &sr, s1, s2, w1, w2);
    kr_cache_free(sc);
    kr_cache_free(lc);
    kr_pool_free(pool);
}

/* n token pairs and their 5-minute stamps that a light and a heavy generation share. */
/* A light generation (4 tokens in, 12 out) beside a heavy one (a 300-token prompt): while
 * the light one runs, a step takes only the heavy one's rows that keep it within
 * light_step_factor of its time without them (a step's fixed cost pinned to 8 rows here, so
 * that the bound is exact: at most 2 x (8 + the light rows) rows a step), where before the
 * heavy one took the rest of step_tokens (124 rows) in the light one's first step and an
 * eighth of it (16) in each of its decode steps; the heavy one still advances at every
 * step; both get the tokens they get alone. */
static void light_beside_heavy(int sit_out_steps) {
    enum { HEAVY = 300, N = HEAVY + 16 };
    int32_t *t1 = malloc(N * sizeof *t1), *t2 = malloc(N * sizeof *t2);
    kr_stamp *st = malloc(N * sizeof *st);
    assert_true(t1 && t2 && st);
    tu_tokens(t1, t2, st, N, 53, 29);
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_generate_request hr = sampled_request(t1, t2, st, HEAVY, 1, 5);
    kr_generate_request lr = sampled_request(t1, t2, st, 4, 12, 6);
    kr_cache *hc = kr_cache_create(pool, 0, &err), *lc = kr_cache_create(pool, 0, &err);
    assert_non_null(hc);
    assert_non_null(lc);
    int32_t h1[1], h2[1], l1[12], l2[12], w1[12], w2[12];
    sched_log log = {0};
    /* light: at most 10 MFLOP planned (the light one plans about 3, the heavy one 95) */
    kr_sched_config cfg = {.step_tokens = 128,
                           .light_flops = 10e6,
                           .light_step_factor = 2,
                           .step_fixed_rows = 8,
                           .sit_out_steps = sit_out_steps,
                           .sit_out_ms = 1e9, /* by steps only: the test does not hang on time */
                           .done = log_done,
                           .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    assert_int_equal(kr_sched_add_generate(s, hc, &hr, h1, h2, (void *)(intptr_t)0, &err), 0);
    kr_sched_step(s); /* alone: the whole budget */
    kr_sched_stats ks;
    kr_sched_stats_get(s, &ks);
    assert_int_equal(ks.rows_last_step, 128);
    assert_int_equal(kr_sched_add_generate(s, lc, &lr, l1, l2, (void *)(intptr_t)1, &err), 0);
    int steps = 0, out = 0, out_run = 0;
    while (!log.ended[1]) {
        kr_sched_step(s);
        kr_sched_stats_get(s, &ks);
        /* its prefill (4 rows) with 2 x (8 + 4) - 4 = 12 of the heavy one's, then its decode
         * row with 2 x (8 + 1) - 1 = 9 */
        int light_rows = steps == 0 ? 4 : 1, bound = steps == 0 ? 16 : 10;
        if (!log.ended[0]) {
            assert_true(ks.rows_last_step <= bound);
            if (sit_out_steps > 0 && ks.rows_last_step == light_rows) { /* the heavy one sat out */
                out++;
                assert_true(++out_run <= sit_out_steps);
            } else {
                assert_true(ks.rows_last_step > light_rows); /* the heavy one advances */
                out_run = 0;
            }
        }
        assert_true(++steps <= 13);
    }
    /* sitting out: the heavy one sat out sit_out_steps of every sit_out_steps + 1 steps */
    if (sit_out_steps > 0) {
        assert_true(out >= (steps - 1) * sit_out_steps / (sit_out_steps + 1));
        assert_int_equal(ks.sat_out, (unsigned long long)out);
    }
    while (kr_sched_step(s) > 0)
        assert_true(++steps < 1000);
    kr_sched_free(s);
    assert_int_equal(log.ended[0], 1);
    assert_int_equal(log.errs[0].code, 0);
    assert_int_equal(log.errs[1].code, 0);
    same_as_alone(pool, &lr, l1, l2, w1, w2);
    same_as_alone(pool, &hr, h1, h2, w1, w2);
    kr_cache_free(lc);
    kr_cache_free(hc);
    kr_pool_free(pool);
    free(t1);
    free(t2);
    free(st);
}

/* A heavy job that starts while a light one runs sits steps out at once, as one that had
 * just joined a step: the light one's next step holds its own row alone. */
static void test_scheduler_heavy_starts_sitting_out(void **state) {
    (void)state;
    enum { HEAVY = 300, N = HEAVY + 16 };
    int32_t t1[N], t2[N];
    kr_stamp st[N];
    tu_tokens(t1, t2, st, N, 53, 29);
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_generate_request hr = sampled_request(t1, t2, st, HEAVY, 1, 5);
    kr_generate_request lr = sampled_request(t1, t2, st, 4, 12, 6);
    kr_cache *hc = kr_cache_create(pool, 0, &err), *lc = kr_cache_create(pool, 0, &err);
    assert_true(hc && lc);
    int32_t h1[1], h2[1], l1[12], l2[12], w1[12], w2[12];
    sched_log log = {0};
    kr_sched_config cfg = {.step_tokens = 128,
                           .light_flops = 10e6,
                           .step_fixed_rows = 8,
                           .sit_out_steps = 2,
                           .sit_out_ms = 1e9,
                           .done = log_done,
                           .ctx = &log};
    kr_sched *s = kr_sched_create(model, pool, &cfg, &err);
    assert_non_null(s);
    assert_int_equal(kr_sched_add_generate(s, lc, &lr, l1, l2, (void *)(intptr_t)1, &err), 0);
    kr_sched_step(s); /* the light one's prefill */
    assert_int_equal(kr_sched_add_generate(s, hc, &hr, h1, h2, (void *)(intptr_t)0, &err), 0);
    kr_sched_stats ks;
    for (int k = 0; k < 2; k++) { /* the heavy one started, and sits out two steps */
        kr_sched_step(s);
        kr_sched_stats_get(s, &ks);
        assert_int_equal(ks.active, 2);
        assert_int_equal(ks.rows_last_step, 1);
        assert_int_equal(ks.sat_out, (unsigned long long)k + 1);
    }
    kr_sched_step(s); /* then joins one */
    kr_sched_stats_get(s, &ks);
    assert_true(ks.rows_last_step > 1);
    while (kr_sched_step(s) > 0)
        ;
    kr_sched_free(s);
    assert_int_equal(log.errs[0].code, 0);
    assert_int_equal(log.errs[1].code, 0);
    same_as_alone(pool, &lr, l1, l2, w1, w2);
    same_as_alone(pool, &hr, h1, h2, w1, w2);
    kr_cache_free(lc);
    kr_cache_free(hc);
    kr_pool_free(pool);
}

static void test_scheduler_light_steps_bounded(void **state) {
    (void)state;
    light_beside_heavy(-1); /* none sits out: the heavy one advances at every step */
}

/* The same, the heavy one sitting out 2 steps of every 3 while the light one runs (none of
 * its rows in them: the light one's step costs what it costs alone), where before it
 * joined every step; both still get the tokens they get alone. */
static void test_scheduler_heavy_sits_out(void **state) {
    (void)state;
    light_beside_heavy(2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scheduler_join_leave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_waits_for_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_classes_by_the_whole_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_encodes_within_the_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_short_steps_while_light_come, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_cheapest_fill_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_heavy_starts_sitting_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_light_steps_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_heavy_sits_out, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
