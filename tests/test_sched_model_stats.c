/* test_sched_model_stats.c — what each model's rows took in the step scheduler
 * (kr_sched_model_stats_get, _forget): two models' generations in one scheduler, each model's rows
 * equal to the rows a scheduler of its jobs alone ran (counted there by the core's own
 * totals), its steps those that ran its rows (counted step by step here), its time within
 * the run's; a scheduler that ran nothing lists no model. */
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
#include <time.h>

enum { NM = 2, NG = 3, N_TOK = 64, N_NEW = 10 };

static kr_model *models[NM];

static int setup(void **state) {
    (void)state;
    for (int m = 0; m < NM; m++)
        if (!(models[m] = tu_load_tiny(512))) return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int m = 0; m < NM; m++)
        kr_model_free(models[m]);
    return 0;
}

typedef struct {
    int32_t tok1[N_TOK], tok2[N_TOK], out1[NM][NG][N_NEW], out2[NM][NG][N_NEW];
    kr_stamp st[N_TOK];
    kr_pool *pool[NM];
    kr_cache *gc[NM][NG];
    kr_generate_request gr[NM][NG];
    int ended;
} jobs;

static void jobs_done(void *tag, const kr_error *err, void *ctx) {
    (void)tag;
    if (err->code) fail_msg("a generation failed: %s", err->msg);
    ((jobs *)ctx)->ended++;
}

static void jobs_init(jobs *J) {
    memset(J, 0, sizeof *J);
    kr_error err;
    for (int i = 0; i < N_TOK; i++) {
        J->tok1[i] = (i * 37) % 1024;
        J->tok2[i] = (i * 91) % 1024;
        J->st[i] = (kr_stamp){
            .minute = 5 * (i % 12), .hour = 9 + i / 12, .weekday = 1, .day = 3, .month = 6};
    }
    for (int m = 0; m < NM; m++) {
        assert_non_null(J->pool[m] = kr_pool_create(models[m], (size_t)16 << 20, &err));
        for (int k = 0; k < NG; k++) {
            assert_non_null(J->gc[m][k] = kr_cache_create(J->pool[m], 0, &err));
            J->gr[m][k] = (kr_generate_request){.s1 = J->tok1 + k,
                                                .s2 = J->tok2 + k,
                                                .stamps = J->st + k,
                                                .n_append = 20 + 5 * k + m,
                                                .new_stamps = J->st + 50,
                                                .n_new = N_NEW - k,
                                                .sampling = {.temperature = 1.0, .top_p = 0.9},
                                                .seed = (uint64_t)(3 + k)};
        }
    }
}

static void jobs_free(jobs *J) {
    for (int m = 0; m < NM; m++) {
        for (int k = 0; k < NG; k++)
            kr_cache_free(J->gc[m][k]);
        kr_pool_free(J->pool[m]);
    }
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* What a run of the jobs of models [m0, m1) came to. */
typedef struct {
    kr_sched_model_stats ms[NM];
    int n_models;
    kr_sched_stats total;
    unsigned long long steps_with_rows; /* counted here, step by step */
    double wall_ms;
} run;

static void jobs_run(jobs *J, int m0, int m1, run *out) {
    kr_error err;
    kr_sched_config cfg = {.step_tokens = 9, .max_rows = 16, .done = jobs_done, .ctx = J};
    kr_sched *s = kr_sched_create(NULL, NULL, &cfg, &err);
    assert_non_null(s);
    memset(out, 0, sizeof *out);
    assert_int_equal(kr_sched_model_stats_get(s, out->ms, NM), 0); /* nothing ran yet */
    for (int m = m0; m < m1; m++)
        for (int k = 0; k < NG; k++)
            assert_int_equal(kr_sched_add_generate(s, J->gc[m][k], &J->gr[m][k], J->out1[m][k],
                                                   J->out2[m][k], NULL, &err),
                             0);
    const double t0 = now_ms();
    int held, steps = 0;
    do {
        held = kr_sched_step(s);
        kr_sched_stats st;
        kr_sched_stats_get(s, &st);
        out->steps_with_rows += st.rows_last_step > 0;
        assert_true(++steps < 100000);
    } while (held > 0);
    out->wall_ms = now_ms() - t0;
    kr_sched_stats_get(s, &out->total);
    out->n_models = kr_sched_model_stats_get(s, out->ms, NM);
    kr_sched_free(s);
    assert_int_equal(J->ended, (m1 - m0) * NG);
}

static const kr_sched_model_stats *of(const run *r, const kr_model *m) {
    for (int i = 0; i < r->n_models; i++)
        if (r->ms[i].m == m) return &r->ms[i];
    fail_msg("model %p has no figures", (const void *)m);
    return NULL;
}

static void test_rows_steps_and_time_by_model(void **state) {
    (void)state;
    run alone[NM], both;
    for (int m = 0; m < NM; m++) {
        jobs J;
        jobs_init(&J);
        jobs_run(&J, m, m + 1, &alone[m]);
        jobs_free(&J);
        /* one model: its figures are the scheduler's */
        assert_int_equal(alone[m].n_models, 1);
        const kr_sched_model_stats *a = of(&alone[m], models[m]);
        assert_true(a->rows == alone[m].total.rows);
        assert_true(a->steps == alone[m].steps_with_rows);
        assert_true(a->ms > 0 && a->ms <= alone[m].wall_ms);
    }
    jobs J;
    jobs_init(&J);
    jobs_run(&J, 0, NM, &both);
    jobs_free(&J);
    assert_int_equal(both.n_models, NM);
    assert_ptr_equal(both.ms[0].m, models[0]); /* in the order each first ran */
    unsigned long long rows = 0, max_steps = 0;
    double ms = 0;
    for (int m = 0; m < NM; m++) {
        const kr_sched_model_stats *b = of(&both, models[m]);
        /* the same jobs run the same rows beside another model as alone */
        assert_true(b->rows == alone[m].total.rows);
        assert_true(b->steps <= both.steps_with_rows);
        assert_true(b->ms > 0);
        rows += b->rows;
        ms += b->ms;
        if (b->steps > max_steps) max_steps = b->steps;
    }
    assert_true(rows == both.total.rows);
    assert_true(ms <= both.wall_ms);
    /* the steps that ran rows ran one model's at least; some ran both (the sum exceeds) */
    assert_true(max_steps <= both.steps_with_rows);
    assert_true(of(&both, models[0])->steps + of(&both, models[1])->steps >= both.steps_with_rows);
    /* out gets at most max entries; the count is of them all */
    kr_sched_model_stats one;
    jobs_init(&J);
    kr_error err;
    kr_sched_config cfg = {.step_tokens = 9, .max_rows = 16, .done = jobs_done, .ctx = &J};
    kr_sched *s = kr_sched_create(NULL, NULL, &cfg, &err);
    for (int m = 0; m < NM; m++)
        assert_int_equal(kr_sched_add_generate(s, J.gc[m][0], &J.gr[m][0], J.out1[m][0],
                                               J.out2[m][0], NULL, &err),
                         0);
    while (kr_sched_step(s) > 0)
        ;
    assert_int_equal(kr_sched_model_stats_get(s, &one, 1), NM); /* how many, one copied */
    assert_ptr_equal(one.m, models[0]);
    /* a freed model's figures forgotten: the others' kept as they were, and the same
     * address running again starts from zero */
    kr_sched_model_stats before[NM], after[NM];
    assert_int_equal(kr_sched_model_stats_get(s, before, NM), NM);
    kr_sched_model_stats_forget(s, models[0]);
    assert_int_equal(kr_sched_model_stats_get(s, after, NM), NM - 1);
    assert_ptr_equal(after[0].m, models[1]);
    assert_true(after[0].rows == before[1].rows && after[0].steps == before[1].steps);
    kr_sched_model_stats_forget(s, models[0]); /* not there: nothing */
    assert_int_equal(kr_sched_model_stats_get(s, after, NM), NM - 1);
    kr_sched_stats t0, t1;
    kr_sched_stats_get(s, &t0);
    assert_int_equal(
        kr_sched_add_generate(s, J.gc[0][1], &J.gr[0][1], J.out1[0][1], J.out2[0][1], NULL, &err),
        0);
    while (kr_sched_step(s) > 0)
        ;
    assert_int_equal(kr_sched_model_stats_get(s, after, NM), NM);
    assert_ptr_equal(after[1].m, models[0]);
    kr_sched_stats_get(s, &t1);
    assert_true(after[1].rows == t1.rows - t0.rows); /* this job's rows alone: from zero */
    kr_sched_free(s);
    jobs_free(&J);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_steps_and_time_by_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
