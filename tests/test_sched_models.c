/* test_sched_models.c — one step scheduler running jobs of two models of different shapes
 * (the tiny fixture and a kronos-mkmodel checkpoint with other widths, depths and
 * vocabularies): every forecast and generation answers the same bytes as in a scheduler of
 * its model alone, and the light-before-heavy rule holds across the models; each model's
 * prefill takes the steps it takes alone; a model built on another's tokenizer answers as if
 * loaded whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NM = 2, NF = 3, NG = 2, NJ = NF + NG, N_TOK = 64 };

static kr_model *models[NM];
static char other_dir[64];

static int setup(void **state) {
    (void)state;
    models[0] = tu_load_tiny(512);
    const char *tool = getenv("KR_MKMODEL");
    if (!models[0] || !tool) {
        fprintf(stderr, "the tiny model or KR_MKMODEL is missing\n");
        return -1;
    }
    snprintf(other_dir, sizeof other_dir, "/tmp/kr-sched-models-XXXXXX");
    if (!mkdtemp(other_dir)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --out %s --preset tiny --d-model 96 --n-layers 3 --n-heads 4 --ff-dim 160 "
             "--tok-d-model 48 --s1-bits 9 --s2-bits 8 --seed 5 >/dev/null",
             tool, other_dir);
    if (system(cmd) != 0) return -1;
    char tok[128], pred[128];
    snprintf(tok, sizeof tok, "%s/tokenizer", other_dir);
    snprintf(pred, sizeof pred, "%s/predictor", other_dir);
    kr_model_paths p = {.tokenizer_dir = tok, .predictor_dir = pred, .max_context = 512};
    kr_error err = {0};
    if (!(models[1] = kr_model_load(&p, &err))) {
        fprintf(stderr, "the other model: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int k = 0; k < NM; k++)
        kr_model_free(models[k]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", other_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every job of both models: NF forecasts and NG generations a model, their answers, and
 * what the scheduler told of them. Tag = model * NJ + job. */
typedef struct {
    tu_case tc[NM][NF];
    kr_forecast_request q[NM][NF];
    kr_forecast_result res[NM][NF];
    int32_t tok1[NM][N_TOK], tok2[NM][N_TOK];
    kr_stamp st[N_TOK];
    kr_pool *pool[NM];
    kr_cache *gc[NM][NG];
    kr_generate_request gr[NM][NG];
    int32_t out1[NM][NG][12], out2[NM][NG][12];
    int ended[NM * NJ], order[NM * NJ], n_ended;
    kr_error errs[NM * NJ];
    int active[NM], mixed_steps;
} jobs;

static void jobs_done(void *tag, const kr_error *err, void *ctx) {
    jobs *J = ctx;
    int k = (int)(intptr_t)tag;
    J->ended[k]++;
    J->errs[k] = *err;
    J->order[J->n_ended++] = k;
    J->active[k / NJ]--;
}

static void jobs_started(void *tag, bool light, void *ctx) {
    (void)light;
    jobs *J = ctx;
    J->active[(int)(intptr_t)tag / NJ]++;
}

static void jobs_init(jobs *J) {
    memset(J, 0, sizeof *J);
    json_t *g = tu_load_golden();
    json_t *cases = json_object_get(g, "cases");
    kr_error err;
    for (int i = 0; i < N_TOK; i++)
        J->st[i] = kr_stamp_from_wall(1700000000 + 300 * (int64_t)i);
    for (int m = 0; m < NM; m++) {
        int v1 = 1 << kr_model_predictor_config(models[m])->s1_bits;
        int v2 = 1 << kr_model_predictor_config(models[m])->s2_bits;
        for (int i = 0; i < N_TOK; i++) {
            J->tok1[m][i] = (int32_t)((i * 37 + m) % v1);
            J->tok2[m][i] = (int32_t)((i * 91 + 3 * m) % v2);
        }
        for (int k = 0; k < NF; k++) {
            assert_int_equal(tu_case_load(json_array_get(cases, (size_t)k), &J->tc[m][k]), 0);
            kr_forecast_request *q = &J->q[m][k];
            *q = J->tc[m][k].req;
            q->samples = 2 + k + m;
            q->seed = (uint64_t)(40 + k);
            q->sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
            q->return_paths = true;
        }
        assert_non_null(J->pool[m] = kr_pool_create(models[m], (size_t)64 << 20, &err));
        for (int k = 0; k < NG; k++) {
            assert_non_null(J->gc[m][k] = kr_cache_create(J->pool[m], 0, &err));
            J->gr[m][k] =
                (kr_generate_request){.s1 = J->tok1[m] + k,
                                      .s2 = J->tok2[m] + k,
                                      .stamps = J->st + k,
                                      .n_append = 30 + k,
                                      .new_stamps = J->st + 40,
                                      .n_new = 12,
                                      .sampling = {.temperature = 0.9, .top_k = 0, .top_p = 0.95},
                                      .seed = (uint64_t)(7 + k)};
        }
    }
    json_decref(g);
}

static void jobs_free(jobs *J) {
    for (int m = 0; m < NM; m++) {
        for (int k = 0; k < NF; k++) {
            kr_forecast_result_free(&J->res[m][k]);
            tu_case_free(&J->tc[m][k]);
        }
        for (int k = 0; k < NG; k++)
            kr_cache_free(J->gc[m][k]);
        kr_pool_free(J->pool[m]);
    }
}

/* Runs the jobs of the models in [m0, m1) in one scheduler (created on no model: every
 * forecast names its own), each model's jobs joining at staggered steps. */
static void jobs_run(jobs *J, int m0, int m1) {
    kr_error err;
    kr_sched_config cfg = {
        .step_tokens = 7, .max_rows = 16, .started = jobs_started, .done = jobs_done, .ctx = J};
    kr_sched *s = kr_sched_create(NULL, NULL, &cfg, &err);
    assert_non_null(s);
    int added = 0, steps = 0;
    for (;;) {
        for (int m = m0; m < m1; m++)
            for (int k = 0; k < NJ; k++) {
                int when = 3 * k + m; /* the same step for a job whichever others run */
                if (steps != when) continue;
                void *tag = (void *)(intptr_t)(m * NJ + k);
                if (k < NF)
                    assert_int_equal(kr_sched_add_forecast_on(s, models[m], J->pool[m], &J->q[m][k],
                                                              &J->res[m][k], tag, &err),
                                     0);
                else
                    assert_int_equal(kr_sched_add_generate(s, J->gc[m][k - NF], &J->gr[m][k - NF],
                                                           J->out1[m][k - NF], J->out2[m][k - NF],
                                                           tag, &err),
                                     0);
                added++;
            }
        int held = kr_sched_step(s);
        steps++;
        if (J->active[0] > 0 && J->active[1] > 0) J->mixed_steps++;
        if (held == 0 && added == (m1 - m0) * NJ) break;
        assert_true(steps < 100000);
    }
    kr_sched_free(s);
    for (int m = m0; m < m1; m++)
        for (int k = 0; k < NJ; k++) {
            assert_int_equal(J->ended[m * NJ + k], 1);
            if (J->errs[m * NJ + k].code)
                fail_msg("model %d job %d: %s", m, k, J->errs[m * NJ + k].msg);
        }
}

static void same_result(const kr_forecast_result *a, const kr_forecast_result *b) {
    int P = a->horizon;
    assert_int_equal(P, b->horizon);
    assert_int_equal(a->samples, b->samples);
    assert_memory_equal(a->mean, b->mean, (size_t)KR_D_IN * P * sizeof(double));
    assert_memory_equal(a->prob_close_up, b->prob_close_up, (size_t)P * sizeof(double));
    assert_memory_equal(a->paths, b->paths, (size_t)a->samples * KR_D_IN * P * sizeof(double));
}

/* Both models' forecasts and generations in one scheduler, then each model's alone in its
 * own: the same bytes, job by job; and the steps did hold both models' jobs at once. The
 * forecasts equal kr_forecast's solo answer too. */
static void test_two_models_as_alone(void **state) {
    (void)state;
    jobs *mixed = malloc(sizeof *mixed), *alone = malloc(sizeof *alone);
    assert_non_null(mixed);
    assert_non_null(alone);
    jobs_init(mixed);
    jobs_run(mixed, 0, NM);
    assert_true(mixed->mixed_steps > 0);
    for (int m = 0; m < NM; m++) {
        jobs_init(alone);
        jobs_run(alone, m, m + 1);
        assert_int_equal(alone->mixed_steps, 0);
        for (int k = 0; k < NF; k++) {
            same_result(&mixed->res[m][k], &alone->res[m][k]);
            kr_forecast_result solo;
            kr_error err;
            assert_int_equal(kr_forecast(models[m], NULL, &mixed->q[m][k], &solo, &err), 0);
            same_result(&mixed->res[m][k], &solo);
            kr_forecast_result_free(&solo);
        }
        for (int k = 0; k < NG; k++) {
            assert_memory_equal(mixed->out1[m][k], alone->out1[m][k], sizeof alone->out1[m][k]);
            assert_memory_equal(mixed->out2[m][k], alone->out2[m][k], sizeof alone->out2[m][k]);
            assert_int_equal(kr_cache_length(mixed->gc[m][k]), kr_cache_length(alone->gc[m][k]));
        }
        jobs_free(alone);
    }
    print_message("# %d steps held both models' jobs\n", mixed->mixed_steps);
    jobs_free(mixed);
    free(mixed);
    free(alone);
}

/* A heavy forecast of one model, then a light generation of the other added a step later:
 * the light one ends first (it fills before the heavy one and the heavy one sits steps out
 * beside it), whichever model is the heavy one's. */
static void test_light_first_across_models(void **state) {
    (void)state;
    for (int heavy = 0; heavy < NM; heavy++) {
        int light = 1 - heavy;
        jobs *J = malloc(sizeof *J);
        assert_non_null(J);
        jobs_init(J);
        kr_forecast_request *q = &J->q[heavy][0];
        q->samples = 16;
        kr_forecast_plan plan;
        kr_error err;
        assert_int_equal(kr_forecast_plan_make(models[heavy], q, &plan, &err), 0);
        kr_generate_request *g = &J->gr[light][0];
        g->n_append = 8;
        g->n_new = 2;
        kr_sched_config cfg = kr_sched_config_default();
        cfg.step_tokens = 16;
        cfg.light_flops = plan.flops / 2; /* the generation is far below, the forecast above */
        cfg.done = jobs_done;
        cfg.started = jobs_started;
        cfg.ctx = J;
        kr_sched *s = kr_sched_create(NULL, NULL, &cfg, &err);
        assert_non_null(s);
        assert_int_equal(kr_sched_add_forecast_on(s, models[heavy], J->pool[heavy], q,
                                                  &J->res[heavy][0], (void *)(intptr_t)(heavy * NJ),
                                                  &err),
                         0);
        kr_sched_step(s);
        assert_int_equal(kr_sched_add_generate(s, J->gc[light][0], g, J->out1[light][0],
                                               J->out2[light][0],
                                               (void *)(intptr_t)(light * NJ + NF), &err),
                         0);
        int steps = 0;
        while (kr_sched_step(s) > 0)
            assert_true(++steps < 100000);
        kr_sched_stats st;
        kr_sched_stats_get(s, &st);
        kr_sched_free(s);
        assert_int_equal(J->n_ended, 2);
        assert_int_equal(J->order[0], light * NJ + NF);
        assert_int_equal(J->errs[heavy * NJ].code, 0);
        assert_int_equal(J->errs[light * NJ + NF].code, 0);
        assert_true(st.sat_out > 0); /* the heavy one of the other model sat steps out */
        jobs_free(J);
        free(J);
    }
}

/* One model's long append beside another model's decoding generations: it takes as many
 * steps as in a scheduler of its own (the step-tokens budget is each model's; mixing
 * models does not make a prefill take more steps), and answers the same tokens. */
static void test_budget_per_model(void **state) {
    (void)state;
    enum { LONG = 300, NEW = 2 };
    int32_t s1[LONG], s2[LONG], out[2][2][NEW];
    kr_stamp st[LONG + NEW];
    for (int i = 0; i < LONG; i++)
        s1[i] = (int32_t)((i * 37) % 1024), s2[i] = (int32_t)((i * 91) % 1024);
    for (int i = 0; i < LONG + NEW; i++)
        st[i] = kr_stamp_from_wall(1700000000 + 300 * (int64_t)i);
    unsigned long long steps[2] = {0};
    for (int mixed = 0; mixed < 2; mixed++) {
        jobs *J = malloc(sizeof *J);
        assert_non_null(J);
        jobs_init(J);
        kr_sched_config cfg = kr_sched_config_default();
        cfg.light_flops = 1; /* no job is light: only the budget plans the steps */
        cfg.light_recent_ms = -1;
        cfg.ctx = J;
        kr_error err;
        kr_sched *s = kr_sched_create(NULL, NULL, &cfg, &err);
        assert_non_null(s);
        for (int k = 0; mixed && k < NG; k++)
            assert_int_equal(kr_sched_add_generate(s, J->gc[1][k], &J->gr[1][k], J->out1[1][k],
                                                   J->out2[1][k], NULL, &err),
                             0);
        if (mixed) kr_sched_step(s); /* the other model's generations decode from here */
        const kr_generate_request g = {.s1 = s1,
                                       .s2 = s2,
                                       .stamps = st,
                                       .n_append = LONG,
                                       .new_stamps = st + LONG,
                                       .n_new = NEW,
                                       .sampling = {.temperature = 1, .top_p = 0.9},
                                       .seed = 3};
        assert_int_equal(
            kr_sched_add_generate(s, J->gc[0][0], &g, out[mixed][0], out[mixed][1], NULL, &err), 0);
        int n = 0;
        while (kr_sched_step(s) > 0)
            assert_true(++n < 100000);
        kr_sched_model_stats ms[NM];
        const int nm = kr_sched_model_stats_get(s, ms, NM);
        for (int i = 0; i < nm; i++)
            if (ms[i].m == models[0]) steps[mixed] = ms[i].steps;
        kr_sched_free(s);
        jobs_free(J);
        free(J);
    }
    assert_true(steps[0] > 0);
    assert_int_equal(steps[1], steps[0]);
    assert_memory_equal(out[0], out[1], sizeof out[0]);
}

/* A model built on another's tokenizer (kr_model_load_sharing) forecasts the same bytes as
 * the same files loaded whole, and counts the tokenizer's parameters as its own. */
static void test_shared_tokenizer(void **state) {
    (void)state;
    kr_model_paths p = {.tokenizer_dir = KR_TEST_DATA "/tiny/tokenizer",
                        .predictor_dir = KR_TEST_DATA "/tiny/predictor",
                        .max_context = 512};
    kr_error err = {0};
    kr_model *shared = kr_model_load_sharing(&p, models[0], &err);
    assert_non_null(shared);
    assert_int_equal(kr_model_param_count(shared), kr_model_param_count(models[0]));
    assert_int_equal(kr_model_tokenizer_param_count(shared),
                     kr_model_tokenizer_param_count(models[0]));
    assert_true(kr_model_tokenizer_param_count(shared) > 0);
    json_t *g = tu_load_golden();
    tu_case tc;
    assert_int_equal(tu_case_load(json_array_get(json_object_get(g, "cases"), 1), &tc), 0);
    kr_forecast_request q = tc.req;
    q.samples = 3;
    q.seed = 17;
    q.sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
    q.return_paths = true;
    kr_forecast_result a, b;
    assert_int_equal(kr_forecast(models[0], NULL, &q, &a, &err), 0);
    assert_int_equal(kr_forecast(shared, NULL, &q, &b, &err), 0);
    same_result(&a, &b);
    kr_forecast_result_free(&a);
    kr_forecast_result_free(&b);
    tu_case_free(&tc);
    json_decref(g);
    kr_model_free(shared); /* before the model whose tokenizer it uses, which stays whole */
    assert_null(kr_model_load_sharing(&p, NULL, &err));
    /* a shared tokenizer keeps its own packing: another weights precision is refused */
    p.weights = KR_PREC_BF16;
    err = (kr_error){0};
    assert_null(kr_model_load_sharing(&p, models[0], &err));
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "weights"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_models_as_alone),
        cmocka_unit_test(test_light_first_across_models),
        cmocka_unit_test(test_shared_tokenizer),
        cmocka_unit_test(test_budget_per_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
