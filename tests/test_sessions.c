/* test_sessions.c — the session table's owners (server/runtime/exec/sessions/sessions.c): another
 * owner's session is an unknown id to acquire, info and delete, its fate told to its owner
 * alone; NULL (the journal's replay) reaches any; quotas count by owner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions.h"

/* A session kind that holds nothing: no pool is needed. */
static void nothing_free(void *state) {
    (void)state;
}
static void nothing_describe(const void *state, kd_session_extra *out) {
    (void)state;
    memset(out, 0, sizeof *out);
}
static const kd_session_kind nothing = {"nothing", nothing_free, nothing_describe};

static kd_sessions *table(int max_per_owner) {
    const kd_sessions_limits lim = {
        .max_sessions = 8, .ttl_seconds = 600, .max_per_owner = max_per_owner, .node_id = "n1"};
    kd_sessions *t = kd_sessions_create(NULL, &lim);
    assert_non_null(t);
    return t;
}

static void new_session(kd_sessions *t, const char *owner, char *id) {
    char msg[256];
    int retry_after;
    assert_int_equal(
        kd_sessions_new_with(t, &nothing, NULL, owner, id, NULL, msg, sizeof msg, &retry_after),
        KD_SESSION_OK);
}

/* id's message with the id replaced by ID, as a client comparing answers would see it. */
static void without_id(const char *msg, const char *id, char *out, size_t n) {
    const char *at = strstr(msg, id);
    if (!at) {
        snprintf(out, n, "%s", msg);
        return;
    }
    snprintf(out, n, "%.*sID%s", (int)(at - msg), msg, at + strlen(id));
}

static void test_other_owner_is_unknown(void **state) {
    (void)state;
    kd_sessions *t = table(0);
    char id[KD_SESSION_ID_LEN + 1], unknown[KD_SESSION_ID_LEN + 1], msg[256], want[256], got[256];
    new_session(t, "key alice", id);
    snprintf(unknown, sizeof unknown, "n1-%032d", 0);
    kd_session_info info;
    kd_session *s = NULL;

    assert_int_equal(kd_sessions_info(t, "key bob", unknown, &info, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    without_id(msg, unknown, want, sizeof want);
    assert_int_equal(kd_sessions_info(t, "key bob", id, &info, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    without_id(msg, id, got, sizeof got);
    assert_string_equal(got, want);
    assert_int_equal(kd_sessions_acquire(t, "key bob", id, &s, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    assert_null(s);
    without_id(msg, id, got, sizeof got);
    assert_string_equal(got, want);
    assert_int_equal(kd_sessions_delete(t, "key bob", id, msg, sizeof msg), KD_SESSION_NOT_FOUND);
    without_id(msg, id, got, sizeof got);
    assert_string_equal(got, want);

    /* busy: still unknown to bob, not 409 */
    assert_int_equal(kd_sessions_acquire(t, "key alice", id, &s, msg, sizeof msg), KD_SESSION_OK);
    assert_int_equal(kd_sessions_acquire(t, "key bob", id, &s, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    assert_int_equal(kd_sessions_acquire(t, NULL, id, &s, msg, sizeof msg), KD_SESSION_BUSY);
    kd_sessions_release(t, s);

    /* the owner and the table itself (NULL) reach it */
    assert_int_equal(kd_sessions_info(t, "key alice", id, &info, msg, sizeof msg), KD_SESSION_OK);
    assert_int_equal(kd_sessions_info(t, NULL, id, &info, msg, sizeof msg), KD_SESSION_OK);
    assert_int_equal(kd_sessions_delete(t, "key alice", id, msg, sizeof msg), KD_SESSION_OK);

    /* deleted: alice is told, bob gets the unknown id's message */
    assert_int_equal(kd_sessions_info(t, "key alice", id, &info, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    assert_non_null(strstr(msg, "was deleted"));
    assert_int_equal(kd_sessions_info(t, "key bob", id, &info, msg, sizeof msg),
                     KD_SESSION_NOT_FOUND);
    without_id(msg, id, got, sizeof got);
    assert_string_equal(got, want);
    kd_sessions_free(t);
}

static void test_quota_by_owner(void **state) {
    (void)state;
    kd_sessions *t = table(1);
    char id[KD_SESSION_ID_LEN + 1], msg[256];
    int retry_after;
    new_session(t, "key alice", id);
    assert_int_equal(kd_sessions_new_with(t, &nothing, NULL, "key alice", id, NULL, msg, sizeof msg,
                                          &retry_after),
                     KD_SESSION_OWNER_LIMIT);
    assert_non_null(strstr(msg, "key alice"));
    new_session(t, "key bob", id);
    assert_int_equal(kd_sessions_count_of(t, "key alice"), 1);
    assert_int_equal(kd_sessions_count_of(t, "key bob"), 1);
    assert_int_equal(kd_sessions_count_of(t, "key carol"), 0);
    kd_sessions_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_owner_is_unknown),
        cmocka_unit_test(test_quota_by_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
