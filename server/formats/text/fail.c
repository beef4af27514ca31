/* fail.c — kd_fail (fail.h): an error message into the caller's buffer. */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

int kd_fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
