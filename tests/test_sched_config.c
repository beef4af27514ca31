/* test_sched_config.c — the step scheduler's tuning defaults (core/sched/sched_config.c):
 * kr_sched_config_default gives the figures include/kronos_sched.h documents for each knob, a
 * knob left 0 takes that default when the scheduler is created, and a knob set (or set
 * negative where negative means "none" / "never") is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "sched_config.h"

static void expect_same(const kr_sched_config *a, const kr_sched_config *b) {
    assert_int_equal(a->step_tokens, b->step_tokens);
    assert_int_equal(a->max_rows, b->max_rows);
    assert_true(a->light_flops == b->light_flops);
    assert_true(a->light_step_factor == b->light_step_factor);
    assert_true(a->step_fixed_rows == b->step_fixed_rows);
    assert_int_equal(a->sit_out_steps, b->sit_out_steps);
    assert_true(a->sit_out_ms == b->sit_out_ms);
    assert_true(a->light_wait == b->light_wait);
    assert_true(a->light_recent_ms == b->light_recent_ms);
    assert_true(a->started == b->started && a->done == b->done && a->make_room == b->make_room);
    assert_ptr_equal(a->ctx, b->ctx);
}

/* the "0: x" of each knob's comment in kronos_sched.h */
static void test_defaults_as_documented(void **state) {
    (void)state;
    kr_sched_config d = kr_sched_config_default();
    kr_sched_config documented = {.step_tokens = 256,
                                  .max_rows = 512,
                                  .light_flops = 20e9,
                                  .light_step_factor = 1.5,
                                  .sit_out_steps = 8,
                                  .sit_out_ms = 40,
                                  .light_wait = 0.5,
                                  .light_recent_ms = 10000};
    expect_same(&d, &documented);
}

static void test_zero_takes_default(void **state) {
    (void)state;
    kr_sched_config c = {0}, d = kr_sched_config_default();
    sched_config_resolve(&c);
    expect_same(&c, &d);
    /* out of range: a step no longer than without light jobs is no bound */
    c = (kr_sched_config){.light_step_factor = 1, .max_rows = -3, .sit_out_ms = -1};
    sched_config_resolve(&c);
    expect_same(&c, &d);
}

static void done(void *tag, const kr_error *err, void *ctx) {
    (void)tag, (void)err, (void)ctx;
}

static void test_set_knobs_kept(void **state) {
    (void)state;
    int ctx;
    kr_sched_config set = {.step_tokens = 7,
                           .max_rows = 9,
                           .light_flops = 1e6,
                           .light_step_factor = 2.25,
                           .step_fixed_rows = 3.5,
                           .sit_out_steps = -1, /* none sit out */
                           .sit_out_ms = 5,
                           .light_wait = 0.125,
                           .light_recent_ms = -1, /* never */
                           .done = done,
                           .ctx = &ctx};
    kr_sched_config c = set;
    sched_config_resolve(&c);
    expect_same(&c, &set);
    /* an embedder's way: the defaults, then its own changes */
    c = kr_sched_config_default();
    c.max_rows = 9;
    c.done = done;
    kr_sched_config d = kr_sched_config_default(), want = d;
    want.max_rows = 9;
    want.done = done;
    sched_config_resolve(&c);
    expect_same(&c, &want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_as_documented),
        cmocka_unit_test(test_zero_takes_default),
        cmocka_unit_test(test_set_knobs_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
