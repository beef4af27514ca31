/* numfmt.c — shortest round-trip decimals for float32 and double. */
#include "numfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int kd_fmt_double(double x, char *buf, size_t n) {
    int len = 0;
    for (int p = 1; p <= 17; p++) {
        len = snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return len;
}

int kd_fmt_float32(double x, char *buf, size_t n) {
    const float f = (float)x;
    if (!isfinite(f) || (f == 0.0f && x != 0.0)) return kd_fmt_double(x, buf, n);
    int len = 0;
    for (int p = 1; p <= 9; p++) {
        len = snprintf(buf, n, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return len;
}
