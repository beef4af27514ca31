/* bench_train.h — kronos-bench --train-step (bench_train.c). */
#ifndef KB_BENCH_TRAIN_H
#define KB_BENCH_TRAIN_H

#include "kronos.h"

#include <stdint.h>

typedef struct {
    kr_candles series;
    int batch, lookback, predict, reps;
    double yardstick; /* GFLOP/s */
} kb_train_args;

/* Times a->reps training steps of the predictor in predictor_dir (m's tokenizer encodes the
 * batches) and prints the median and the products' GFLOP/s; 0, or 1 on failure. */
int kb_train_step(const kr_model *m, const char *predictor_dir, const kb_train_args *a);

#endif
