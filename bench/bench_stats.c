/* bench_stats.c — the order statistics the benchmark programs report (bench_stats.h). */
#include "bench_stats.h"

#include <stdlib.h>

int kb_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kb_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, kb_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
