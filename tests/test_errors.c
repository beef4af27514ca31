/* test_errors.c — the server's one table from core error codes to answers
 * (server/runtime/base/errors/errors.h): every code from success (0) to the last
 * (KR_E_COUNT - 1) has its HTTP status, error code string and refusal reason, and a code
 * outside the enum gets KR_E_FAILED's answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "errors.h"

/* What each code must answer; adding a code to kr_error_code without a row here fails. */
static const struct {
    int code;
    int status;
    const char *name;
    kd_refusal refusal;
} expected[] = {
    {KR_OK, 200, "ok", KD_NOT_REFUSED},
    {KR_E_FAILED, 422, "unprocessable", KD_NOT_REFUSED},
    {KR_E_POOL_EXHAUSTED, 503, "pool_exhausted", KD_REFUSED_BUSY},
    {KR_E_CAPACITY, 422, "context_overflow", KD_REFUSED_TOO_LARGE},
    {KR_E_INVALID, 400, "invalid_request", KD_REFUSED_INVALID},
    {KR_E_TOO_LARGE, 422, "too_large", KD_REFUSED_TOO_LARGE},
    {KR_E_NO_MEMORY, 500, "internal", KD_NOT_REFUSED},
    {KR_E_CANCELLED, 499, "client_closed", KD_NOT_REFUSED},
    {KR_E_DEADLINE, 504, "deadline_exceeded", KD_NOT_REFUSED},
};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

/* Every code of the enum, in order, has its expected answer. */
static void test_every_code(void **state) {
    (void)state;
    assert_int_equal(N_EXPECTED, KD_LAST_ERROR_CODE + 1);
    for (int code = 0; code <= KD_LAST_ERROR_CODE; code++) {
        assert_int_equal(expected[code].code, code);
        const kd_error_answer *a = kd_error_answer_of(code);
        assert_non_null(a);
        assert_int_equal(a->status, expected[code].status);
        assert_string_equal(a->code, expected[code].name);
        assert_int_equal(a->refusal, expected[code].refusal);
        assert_non_null(a->lead);
        assert_non_null(a->tail);
        /* a failure says what failed or why: the work's name or the core's message */
        if (code != 0) assert_true(a->with_what || a->with_message);
    }
}

/* The messages, worded as the server has always worded them. */
static void test_messages(void **state) {
    (void)state;
    static const struct {
        int code;
        const char *want;
    } cases[] = {
        {KR_E_INVALID, "horizon: must be at least 1"},
        {KR_E_TOO_LARGE, "horizon: must be at least 1"},
        {KR_E_FAILED, "forecast: horizon: must be at least 1"},
        {KR_E_CAPACITY, "forecast: horizon: must be at least 1"},
        {KR_E_NO_MEMORY, "forecast: horizon: must be at least 1"},
        {KR_E_POOL_EXHAUSTED, "forecast: the KV cache pool is in use by requests in flight; "
                              "retry: horizon: must be at least 1"},
        {KR_E_CANCELLED, "forecast: the client closed the connection"},
        {KR_E_DEADLINE, "forecast: horizon: must be at least 1 (timeout_ms or request-timeout)"},
    };
    char out[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(kd_error_message(kd_error_answer_of(cases[i].code), "forecast",
                                             "horizon: must be at least 1", out, sizeof out),
                            cases[i].want);
    /* a core message that names the same thing is not prefixed twice */
    assert_string_equal(kd_error_message(kd_error_answer_of(KR_E_DEADLINE), "forecast",
                                         "forecast: the deadline passed", out, sizeof out),
                        "forecast: the deadline passed (timeout_ms or request-timeout)");
    assert_string_equal(kd_error_message(kd_error_answer_of(KR_E_DEADLINE), "forecast",
                                         "forecasts: x", out, sizeof out),
                        "forecast: forecasts: x (timeout_ms or request-timeout)");
    /* cut to the buffer, never past it */
    char small[8];
    kd_error_message(kd_error_answer_of(KR_E_DEADLINE), "forecast", "x", small, sizeof small);
    assert_string_equal(small, "forecas");
}

/* A code the table does not know answers as KR_E_FAILED does, never NULL. */
static void test_unknown_codes(void **state) {
    (void)state;
    const kd_error_answer *failed = kd_error_answer_of(KR_E_FAILED);
    assert_ptr_equal(kd_error_answer_of(-1), failed);
    assert_ptr_equal(kd_error_answer_of(KD_LAST_ERROR_CODE + 1), failed);
    assert_ptr_equal(kd_error_answer_of(1 << 20), failed);
}

/* The list of every code an answer can carry (kd_error_kinds, what /openapi.json lists) has
 * each failing core code with its status, once, and every kind a status and a meaning. */
static void test_kinds_list_the_core_codes(void **state) {
    (void)state;
    for (int code = KR_E_FAILED; code <= KD_LAST_ERROR_CODE; code++) {
        const kd_error_answer *a = kd_error_answer_of(code);
        size_t found = 0;
        for (size_t i = 0; i < kd_error_kind_count; i++)
            if (strcmp(kd_error_kinds[i].code, a->code) == 0) {
                assert_int_equal(kd_error_kinds[i].status, a->status);
                found++;
            }
        assert_int_equal(found, 1);
    }
    for (size_t i = 0; i < kd_error_kind_count; i++) {
        assert_true(kd_error_kinds[i].status >= 400 && kd_error_kinds[i].status < 600);
        assert_true(strlen(kd_error_kinds[i].meaning) > 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(kd_error_kinds[i].code, kd_error_kinds[j].code);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_unknown_codes),
        cmocka_unit_test(test_kinds_list_the_core_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
