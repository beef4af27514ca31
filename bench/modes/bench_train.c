/* bench_train.c — kronos-bench --train-step: the seconds of one fine-tuning step as
 * upstream's train_predictor.py takes it (the batch's tokenizer encode, forward, loss,
 * backward, clipping at 3.0, AdamW), teacher-forced, on windows drawn with a fixed seed; the
 * median of the timed steps after one untimed, and the step's products in GFLOP/s against the
 * sgemm yardstick.
 *
 * FLOPs counted: the linear layers' products, 2 · rows · in · out each, once in the forward
 * and twice in the backward (the input's and the weights' gradients; the embedding's fusion
 * input gradient, the s2 head's query gradient and the frozen parts' included as run).
 * Attention's terms and the row-wise steps are not counted.
 *
 * Peak memory: the process's VmHWM (/proc/self/status) before the first step (the models
 * loaded) and after the last, so the step's own share is their difference. */
#include "bench_train.h"
#include "bench_stats.h"

#include "kronos_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* the process's peak resident set in MiB (VmHWM), or -1 where /proc has none */
static double peak_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

/* GFLOP of a step's products (the header's count) for rows R */
static double step_gflop(const kr_predictor_config *c, double R) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double per_row = 2 * d * d + c->n_layers * (4 * d * d + 3 * d * ff) + 4 * d * d + d * v1 +
                     d * v2; /* fusion, blocks, the dependency layer, both heads */
    return 3 * 2 * R * per_row / 1e9;
}

int kb_train_step(const kr_model *m, const char *predictor_dir, const kb_train_args *a) {
    kr_error err = {0};
    kr_train_model *t = kr_train_load(predictor_dir, &err);
    int W = a->lookback + a->predict + 1, B = a->batch, rc = 1;
    if (!t) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    int32_t *s1 = malloc((size_t)B * W * sizeof(int32_t)), *s2 = malloc((size_t)B * W * 4);
    kr_stamp *st = malloc((size_t)B * W * sizeof *st);
    int *starts = malloc((size_t)B * sizeof(int));
    double *times = malloc((size_t)(a->reps + 1) * sizeof(double));
    if (!s1 || !s2 || !st || !starts || !times || a->series.n < W) {
        fprintf(stderr, "kronos-bench: --train-step: out of memory, or fewer than %d rows\n", W);
        goto out;
    }
    kr_adamw o = {4e-5, 0.9, 0.95, 1e-8, 0.1};
    uint32_t rng = 1;
    double loaded = peak_mib();
    for (int step = 0; step <= a->reps; step++) {
        for (int b = 0; b < B; b++) {
            rng = rng * 1664525u + 1013904223u;
            starts[b] = (int)((rng >> 8) % (uint32_t)(a->series.n - W + 1));
        }
        double t0 = seconds(), norm;
        kr_train_losses l;
        kr_train_batch batch = {B, W - 1, s1, s2, st, KR_S2_TEACHER, NULL, 1};
        if (kr_train_windows(m, &a->series, starts, B, a->lookback, a->predict, NULL, s1, s2, st,
                             &err) ||
            kr_train_gradients(t, &batch, &l, &err)) {
            fprintf(stderr, "kronos-bench: --train-step: %s\n", err.msg);
            goto out;
        }
        kr_train_clip(t, 3.0, &norm);
        kr_train_adamw(t, &o);
        times[step] = seconds() - t0;
        printf("step %d: %.3f s, loss %.4f%s\n", step, times[step], l.loss,
               step ? "" : " (untimed: first touch)");
    }
    const double med = kb_median(times + 1, a->reps); /* step 0 untimed */
    double gf = step_gflop(kr_train_config(t), (double)B * (W - 1));
    printf("\ntraining step, batch %d × (%d + %d) candles, %d threads, kernels %s:\n"
           "  %.3f s a step (median of %d), %.0f tokens/s\n"
           "  products: %.1f GFLOP a step, %.1f GFLOP/s = %.0f%% of the sgemm yardstick "
           "(%.1f GFLOP/s)\n"
           "    (counted: each linear layer's 2·rows·in·out once forward, twice backward; "
           "attention and row-wise steps not counted)\n",
           B, a->lookback, a->predict, kr_threads(), kr_simd_name(kr_simd_level()), med, a->reps,
           B * (W - 1) / med, gf, gf / med, 100 * gf / med / a->yardstick, a->yardstick);
    double peak = peak_mib();
    if (peak >= 0)
        printf("  peak memory (VmHWM): %.0f MiB, of which the step's %.0f MiB (%.0f MiB with "
               "the models loaded, before the first step)\n",
               peak, peak - loaded, loaded);
    rc = 0;
out:
    free(s1);
    free(s2);
    free(st);
    free(starts);
    free(times);
    kr_train_free(t);
    return rc;
}
