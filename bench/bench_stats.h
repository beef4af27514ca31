/* bench_stats.h — the order statistics the benchmark programs report. */
#ifndef KB_BENCH_STATS_H
#define KB_BENCH_STATS_H

/* qsort's comparison of two doubles, ascending */
int kb_cmp_double(const void *a, const void *b);
/* The median of v[0..n) (n > 0); v is sorted in place. */
double kb_median(double *v, int n);

#endif
