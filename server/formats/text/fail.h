/* fail.h — the one way the formats report an error: a message into a caller's buffer and
 * -1. The floor of formats/text/: json_fields.c and timefmt.c both use it, and it uses
 * neither. */
#ifndef KD_FAIL_H
#define KD_FAIL_H

#include <stddef.h>

/* Formats a message into err (when err is not NULL and errlen > 0) and returns -1. */
int kd_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
