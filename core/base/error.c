/* error.c — failures with a code and a message (kr_fail_code; kr_fail is its macro) and
 * the caller's cancel check (kr_check_cancel), used by every floor. */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>

int kr_fail_code(kr_error *err, kr_error_code code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
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
