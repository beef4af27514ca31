/* numfmt.c — shortest round-trip decimals for float32 and double. */
#include "numfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* %g writes 80 with one digit as 8e+01: an integral value below 1e17 is written plain
 * when that is shorter. */
static int plain_if_shorter(double x, int len, char *buf, size_t n) {
    char plain[KD_NUM_MAX];
    if (fabs(x) >= 1e17 || x != trunc(x)) return len;
    const int k = snprintf(plain, sizeof plain, "%.0f", x);
    if (k >= len) return len;
    snprintf(buf, n, "%s", plain);
    return k;
}

int kd_fmt_double(double x, char *buf, size_t n) {
    int len = 0;
    for (int p = 1; p <= 17; p++) {
        len = snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return plain_if_shorter(x, len, buf, n);
}

int kd_fmt_float32(double x, char *buf, size_t n) {
    const float f = (float)x;
    if (!isfinite(f) || (f == 0.0f && x != 0.0)) return kd_fmt_double(x, buf, n);
    int len = 0;
    for (int p = 1; p <= 9; p++) {
        len = snprintf(buf, n, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return plain_if_shorter((double)f, len, buf, n);
}
