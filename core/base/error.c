/* error.c — failures with a code and a message (kr_fail, kr_fail_code) and the caller's
 * cancel check (kr_check_cancel), used by every floor. */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>

static void set(kr_error *err, kr_error_code code, const char *fmt, va_list ap) {
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    err->code = code;
}

int kr_fail(kr_error *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        set(err, KR_E_FAILED, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int kr_fail_code(kr_error *err, kr_error_code code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        set(err, code, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int kr_check_cancel(const kr_cancel *c, const char *what, kr_error *err) {
    int code = c->check ? c->check(c->ctx) : 0;
    if (!code) return 0;
    if (code == KR_E_DEADLINE)
        return kr_fail_code(err, KR_E_DEADLINE, "%s: the deadline passed", what);
    return kr_fail_code(err, KR_E_CANCELLED, "%s: cancelled by the caller", what);
}
