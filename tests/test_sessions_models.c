/* test_sessions_models.c — sessions bound to models
 * (server/runtime/exec/sessions/sessions_models.c): the binding, eviction within one model's
 * pool (what the scheduler asks when that pool runs dry), and the 404 of a journaled session
 * not restored for want of its model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions.h"

/* A session kind that holds nothing: the pools are compared, never used. */
static void nothing_free(void *state) {
    (void)state;
}
static void nothing_describe(const void *state, kd_session_extra *out) {
    (void)state;
    memset(out, 0, sizeof *out);
}
static const kd_session_kind nothing = {"nothing", nothing_free, nothing_describe};

/* A session of owner "o" bound to model and pool (NULL: unbound), idle; its id in id. */
static void bound_session(kd_sessions *t, const void *model, kr_pool *pool, char *id) {
    char msg[256];
    int retry_after;
    kd_session *s = NULL;
    assert_int_equal(
        kd_sessions_new_with(t, &nothing, NULL, "o", id, &s, msg, sizeof msg, &retry_after),
        KD_SESSION_OK);
    if (model) assert_int_equal(kd_session_bind(s, model, pool), 0);
    assert_ptr_equal(kd_session_model(s), model);
    kd_sessions_release(t, s);
}

static bool held(kd_sessions *t, const char *id, char *msg, size_t n) {
    kd_session_info info;
    return kd_sessions_info(t, NULL, id, &info, msg, n) == KD_SESSION_OK;
}

static void test_evicts_within_a_pool(void **state) {
    (void)state;
    const kd_sessions_limits lim = {.max_sessions = 8, .ttl_seconds = 600, .node_id = "n1"};
    kd_sessions *t = kd_sessions_create(NULL, &lim);
    assert_non_null(t);
    /* two stand-ins for two models' pools: only their addresses count here */
    static int model_a, model_b, pool_a, pool_b;
    char a[KD_SESSION_ID_LEN + 1], b[KD_SESSION_ID_LEN + 1], c[KD_SESSION_ID_LEN + 1], msg[256];
    bound_session(t, &model_a, (kr_pool *)&pool_a, a);
    bound_session(t, &model_b, (kr_pool *)&pool_b, b);
    bound_session(t, NULL, NULL, c); /* the default model's: the table's pool (NULL here) */
    kd_session_info info;
    assert_int_equal(kd_sessions_info(t, NULL, b, &info, msg, sizeof msg), KD_SESSION_OK);
    assert_ptr_equal(info.model, &model_b);
    /* b's pool ran dry: b goes, though a is older (LRU) */
    assert_true(kd_sessions_evict_lru_in(t, (kr_pool *)&pool_b));
    assert_false(held(t, b, msg, sizeof msg));
    assert_non_null(strstr(msg, "evicted"));
    assert_true(held(t, a, msg, sizeof msg) && held(t, c, msg, sizeof msg));
    assert_false(kd_sessions_evict_lru_in(t, (kr_pool *)&pool_b)); /* none left there */
    assert_true(kd_sessions_evict_lru_in(t, NULL));                /* the table's: c */
    assert_false(held(t, c, msg, sizeof msg));
    assert_true(held(t, a, msg, sizeof msg));
    kd_sessions_free(t);
}

static void test_refused_says_why(void **state) {
    (void)state;
    const kd_sessions_limits lim = {.max_sessions = 8, .ttl_seconds = 600, .node_id = "n1"};
    kd_sessions *t = kd_sessions_create(NULL, &lim);
    assert_non_null(t);
    const char *id = "n1-0123456789abcdef0123456789abcdef";
    char msg[256];
    kd_sessions_refused(t, id, "o");
    kd_session_info info;
    assert_int_equal(kd_sessions_info(t, "o", id, &info, msg, sizeof msg), KD_SESSION_NOT_FOUND);
    assert_non_null(strstr(msg, "was not restored"));
    assert_non_null(strstr(msg, "model"));
    /* another owner learns nothing */
    assert_int_equal(kd_sessions_info(t, "p", id, &info, msg, sizeof msg), KD_SESSION_NOT_FOUND);
    assert_null(strstr(msg, "restored at"));
    kd_sessions_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evicts_within_a_pool),
        cmocka_unit_test(test_refused_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
