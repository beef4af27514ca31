/* bench_models.h — kronos-bench --models-overhead (bench_models.c). */
#ifndef KB_BENCH_MODELS_H
#define KB_BENCH_MODELS_H

#include "kronos.h"

/* The step scheduler's time for a mixed load spread over several copies of one model against
 * the same jobs on one, alternating; argv[1] is --models-overhead. 0, 1 on failure, 2 on a
 * usage error. */
int kb_models_overhead(int argc, char **argv);

#endif
