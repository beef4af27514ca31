/* errors.c — the table of errors.h: each core error code's answer. */
#include "errors.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Indexed by the code; row KR_OK is success. */
static const kd_error_answer answers[KD_LAST_ERROR_CODE + 1] = {
    /* clang-format off */
    [KR_OK]               = {200, "ok",                KD_NOT_REFUSED,       false, "", false, ""},
    [KR_E_FAILED]         = {422, "unprocessable",     KD_NOT_REFUSED,       true,  "", true,  ""},
    [KR_E_POOL_EXHAUSTED] = {503, "pool_exhausted",    KD_REFUSED_BUSY,      true,
                             "the KV cache pool is in use by requests in flight; retry: ", true, ""},
    [KR_E_CAPACITY]       = {422, "context_overflow",  KD_REFUSED_TOO_LARGE, true,  "", true,  ""},
    [KR_E_INVALID]        = {400, "invalid_request",   KD_REFUSED_INVALID,   false, "", true,  ""},
    [KR_E_TOO_LARGE]      = {422, "too_large",         KD_REFUSED_TOO_LARGE, false, "", true,  ""},
    [KR_E_NO_MEMORY]      = {500, "internal",          KD_NOT_REFUSED,       true,  "", true,  ""},
    [KR_E_CANCELLED]      = {499, "client_closed",     KD_NOT_REFUSED,       true,
                             "the client closed the connection", false, ""},
    [KR_E_DEADLINE]       = {504, "deadline_exceeded", KD_NOT_REFUSED,       true,  "", true,
                             " (timeout_ms or request-timeout)"},
    /* clang-format on */
};

const kd_error_answer *kd_error_answer_of(int code) {
    if (code < 0 || code > KD_LAST_ERROR_CODE || !answers[code].code) return &answers[KR_E_FAILED];
    return &answers[code];
}

char *kd_error_message(const kd_error_answer *a, const char *what, const char *msg, char *out,
                       size_t n) {
    /* the core may have named the same thing ("forecast: the deadline passed") */
    const size_t w = strlen(what);
    const bool named = a->with_message && !strncmp(msg, what, w) && !strncmp(msg + w, ": ", 2);
    const bool with_what = a->with_what && !named;
    snprintf(out, n, "%s%s%s%s%s", with_what ? what : "", with_what ? ": " : "", a->lead,
             a->with_message ? msg : "", a->tail);
    return out;
}
