/* clock.c — the one monotonic clock of core/ (kr_now_ms, base.h). */
#include "base.h"

#include <time.h>

double kr_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
