/* bench_models.c — kronos-bench --models-overhead: the step scheduler's cost of running a
 * mixed load over several loaded models at once against the same work one model at a time.
 *
 * The model folder is loaded N times (N distinct models of the same shape, each with its own
 * weights and pool); job i of the load runs on model i % N. A repetition times each model's
 * share alone in a scheduler, one after another, then all the jobs in one scheduler: the
 * same rows on the same weights, so the difference is what mixing models in the steps costs.
 * It also times all the jobs on one model (one set of weights: what batching every row
 * together gains, which several models cannot have). Repetitions alternate the runs so that
 * a shared machine's load hits each alike; medians are printed with the load average. */
#include "bench_models.h"
#include "bench_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MODELS 8

typedef struct {
    int n_models, reps, forecasts, generations, lookback, horizon, samples, gen_append, gen_new;
    const char *dir;
} opts;

/* One run's jobs: their inputs (shared, read-only) and outputs. */
typedef struct {
    int64_t *ts;
    double *cols[KR_D_IN];
    int32_t *s1, *s2;
    kr_stamp *stamps;
    int ended, failed;
    unsigned long long passes, rows; /* of the last run: model passes (a model's steps), rows */
} inputs;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void done(void *tag, const kr_error *err, void *ctx) {
    (void)tag;
    inputs *in = ctx;
    in->ended++;
    if (err->code) {
        in->failed++;
        fprintf(stderr, "kronos-bench: a job failed: %s\n", err->msg);
    }
}

static int make_inputs(inputs *in, const opts *o) {
    const int n = o->lookback, nt = o->gen_append + o->gen_new;
    in->ts = malloc((size_t)n * sizeof *in->ts);
    for (int c = 0; c < KR_D_IN; c++)
        in->cols[c] = malloc((size_t)n * sizeof *in->cols[c]);
    in->s1 = malloc((size_t)nt * sizeof *in->s1);
    in->s2 = malloc((size_t)nt * sizeof *in->s2);
    in->stamps = malloc((size_t)nt * sizeof *in->stamps);
    if (!in->ts || !in->s1 || !in->s2 || !in->stamps) return -1;
    for (int c = 0; c < KR_D_IN; c++)
        if (!in->cols[c]) return -1;
    double close = 100;
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < n; i++) { /* a random walk of 5-minute bars */
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        const double step = ((double)(r % 2001) - 1000) / 1e5;
        const double open = close;
        close = open * (1 + step);
        in->ts[i] = 1718700000 + 300 * (int64_t)i;
        in->cols[KR_OPEN][i] = open;
        in->cols[KR_HIGH][i] = fmax(open, close) * 1.001;
        in->cols[KR_LOW][i] = fmin(open, close) * 0.999;
        in->cols[KR_CLOSE][i] = close;
        in->cols[KR_VOLUME][i] = 1000 + (double)(r % 500);
        in->cols[KR_AMOUNT][i] = in->cols[KR_VOLUME][i] * close;
    }
    for (int i = 0; i < nt; i++) {
        in->s1[i] = (i * 37) % 1024;
        in->s2[i] = (i * 91) % 1024;
        in->stamps[i] = (kr_stamp){
            .minute = 5 * (i % 12), .hour = (9 + i / 12) % 24, .weekday = 1, .day = 3, .month = 6};
    }
    return 0;
}

static void free_inputs(inputs *in) {
    free(in->ts);
    for (int c = 0; c < KR_D_IN; c++)
        free(in->cols[c]);
    free(in->s1);
    free(in->s2);
    free(in->stamps);
}

/* The jobs of the load, job i on model i % spread (only: those of model only alone; -1:
 * all), run to their end in one scheduler: the seconds, or -1. */
static double run(kr_model **m, kr_pool **pools, int spread, int only, const opts *o, inputs *in) {
    const int nf = o->forecasts, ng = o->generations;
    kr_forecast_request *q = calloc((size_t)nf, sizeof *q);
    kr_forecast_result *res = calloc((size_t)nf, sizeof *res);
    kr_cache **caches = calloc((size_t)ng, sizeof *caches);
    kr_generate_request *g = calloc((size_t)ng, sizeof *g);
    int32_t *out = calloc((size_t)ng * 2 * o->gen_new, sizeof *out);
    kr_error err = {0};
    kr_sched_config cfg = kr_sched_config_default();
    cfg.done = done;
    cfg.ctx = in;
    kr_sched *s = q && res && caches && g && out ? kr_sched_create(NULL, NULL, &cfg, &err) : NULL;
    double secs = -1;
    in->ended = in->failed = 0;
    if (!s) goto out;
    const kr_candles ctx = {
        .n = o->lookback,
        .timestamps = in->ts,
        .columns = {in->cols[0], in->cols[1], in->cols[2], in->cols[3], in->cols[4], in->cols[5]}};
    const double t0 = now_s();
    /* forecasts and generations interleaved, each on its model */
    int added = 0;
    for (int i = 0, f = 0, k = 0; f < nf || k < ng; i++) {
        const int mi = i % spread;
        const bool forecast = (i % 2 == 0 && f < nf) || k >= ng;
        if (only >= 0 && mi != only) { /* another model's job: not in this run */
            f += forecast, k += !forecast;
            continue;
        }
        added++;
        if (forecast) {
            q[f] = (kr_forecast_request){.context = ctx,
                                         .horizon = o->horizon,
                                         .samples = o->samples,
                                         .sampling = {.temperature = 1, .top_p = 0.9},
                                         .seed = (uint64_t)(11 + f),
                                         .use_cache = true};
            if (kr_sched_add_forecast_on(s, m[mi], pools[mi], &q[f], &res[f], NULL, &err)) break;
            f++;
        } else {
            if (!(caches[k] = kr_cache_create(pools[mi], 0, &err))) break;
            g[k] = (kr_generate_request){.s1 = in->s1,
                                         .s2 = in->s2,
                                         .stamps = in->stamps,
                                         .n_append = o->gen_append,
                                         .new_stamps = in->stamps + o->gen_append,
                                         .n_new = o->gen_new,
                                         .sampling = {.temperature = 1, .top_p = 0.9},
                                         .seed = (uint64_t)(7 + k)};
            int32_t *o1 = out + (size_t)k * 2 * o->gen_new;
            if (kr_sched_add_generate(s, caches[k], &g[k], o1, o1 + o->gen_new, NULL, &err)) break;
            k++;
        }
    }
    if (err.code) fprintf(stderr, "kronos-bench: adding a job: %s\n", err.msg);
    while (kr_sched_step(s) > 0)
        ;
    if (!err.code && in->failed == 0 && in->ended == added) secs = now_s() - t0;
    kr_sched_model_stats ms[MAX_MODELS];
    const int nm = kr_sched_model_stats_get(s, ms, MAX_MODELS);
    in->passes = in->rows = 0;
    for (int i = 0; i < nm && i < MAX_MODELS; i++)
        in->passes += ms[i].steps, in->rows += ms[i].rows;
out:
    kr_sched_free(s);
    for (int f = 0; res && f < nf; f++)
        kr_forecast_result_free(&res[f]);
    for (int k = 0; caches && k < ng; k++)
        kr_cache_free(caches[k]);
    free(q), free(res), free(caches), free(g), free(out);
    return secs;
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.n_models = 3,
                .reps = 7,
                .forecasts = 6,
                .generations = 6,
                .lookback = 256,
                .horizon = 24,
                .samples = 8,
                .gen_append = 64,
                .gen_new = 32};
    struct {
        const char *flag;
        int *v, min, max;
    } ints[] = {
        {"--models", &o->n_models, 2, MAX_MODELS}, {"--reps", &o->reps, 1, 1000},
        {"--forecasts", &o->forecasts, 0, 1000},   {"--generations", &o->generations, 0, 1000},
        {"--lookback", &o->lookback, 2, 100000},   {"--horizon", &o->horizon, 1, 4096},
        {"--samples", &o->samples, 1, 1000}};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            o->dir = argv[++i];
            continue;
        }
        size_t k = 0;
        while (k < sizeof ints / sizeof ints[0] && strcmp(argv[i], ints[k].flag) != 0)
            k++;
        if (k == sizeof ints / sizeof ints[0] || i + 1 >= argc) {
            fprintf(stderr, "kronos-bench: --models-overhead: unknown or incomplete '%s'\n",
                    argv[i]);
            return -1;
        }
        char *end;
        const long v = strtol(argv[++i], &end, 10);
        if (*end || v < ints[k].min || v > ints[k].max) {
            fprintf(stderr, "kronos-bench: %s: expected an integer in %d..%d, got '%s'\n",
                    ints[k].flag, ints[k].min, ints[k].max, argv[i]);
            return -1;
        }
        *ints[k].v = (int)v;
    }
    if (!o->dir) {
        fprintf(stderr, "kronos-bench: --models-overhead needs --model DIR\n");
        return -1;
    }
    if (o->forecasts + o->generations == 0) {
        fprintf(stderr, "kronos-bench: --forecasts and --generations are both 0: no load\n");
        return -1;
    }
    return 0;
}

int kb_models_overhead(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: kronos-bench --models-overhead --model DIR [--models N] [--reps N] "
                        "[--forecasts N] [--generations N] [--lookback N] [--horizon N] "
                        "[--samples N]\n");
        return 2;
    }
    char tok[4096], pred[4096];
    snprintf(tok, sizeof tok, "%s/tokenizer", o.dir);
    snprintf(pred, sizeof pred, "%s/predictor", o.dir);
    kr_model *m[MAX_MODELS] = {0};
    kr_pool *pools[MAX_MODELS] = {0};
    inputs in = {0};
    double *one = calloc((size_t)o.reps, sizeof *one), *many = calloc((size_t)o.reps, sizeof *many),
           *merged = calloc((size_t)o.reps, sizeof *merged);
    int rc = 1;
    kr_error err = {0};
    const kr_model_paths p = {.tokenizer_dir = tok, .predictor_dir = pred};
    if (!one || !many || !merged || make_inputs(&in, &o) < 0) {
        fprintf(stderr, "kronos-bench: out of memory\n");
        goto out;
    }
    for (int i = 0; i < o.n_models; i++)
        if (!(m[i] = kr_model_load(&p, &err)) ||
            !(pools[i] = kr_pool_create(m[i], (size_t)512 << 20, &err))) {
            fprintf(stderr, "kronos-bench: model %d: %s\n", i, err.msg);
            goto out;
        }
    printf("models-overhead: %d forecasts (lookback %d, horizon %d, %d samples) and %d "
           "generations (%d appended, %d new), interleaved; %d models of %s, each with its pool\n",
           o.forecasts, o.lookback, o.horizon, o.samples, o.generations, o.gen_append, o.gen_new,
           o.n_models, o.dir);
    /* warm-up: every model's pages touched, the threads started */
    if (run(m, pools, o.n_models, -1, &o, &in) < 0) goto out;
    for (int r = 0; r < o.reps; r++) {
        /* the same jobs: each model's share alone, one after another, then all together */
        one[r] = 0;
        unsigned long long passes = 0, rows = 0;
        for (int k = 0; k < o.n_models; k++) {
            const double t = run(m, pools, o.n_models, k, &o, &in);
            if (t < 0) goto out;
            one[r] += t;
            passes += in.passes, rows += in.rows;
        }
        if ((many[r] = run(m, pools, o.n_models, -1, &o, &in)) < 0) goto out;
        const unsigned long long many_passes = in.passes, many_rows = in.rows;
        if ((merged[r] = run(m, pools, 1, -1, &o, &in)) < 0) goto out;
        printf("rep %d: each model alone in turn %.3f s (%llu passes, %llu rows), %d models "
               "together %.3f s (%llu, %llu), all the jobs on one model %.3f s (%llu, %llu)\n",
               r + 1, one[r], passes, rows, o.n_models, many[r], many_passes, many_rows, merged[r],
               in.passes, in.rows);
    }
    const double a = kb_median(one, o.reps), b = kb_median(many, o.reps),
                 c = kb_median(merged, o.reps);
    double load[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f || fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = NAN;
    if (f) fclose(f);
    printf("median: each model alone in turn %.3f s, %d models in one scheduler %.3f s: %+.1f "
           "%%; all the jobs on one model %.3f s (load average %.2f %.2f %.2f)\n",
           a, o.n_models, b, 100 * (b / a - 1), c, load[0], load[1], load[2]);
    rc = 0;
out:
    for (int i = 0; i < o.n_models; i++) {
        kr_pool_free(pools[i]);
        kr_model_free(m[i]);
    }
    free_inputs(&in);
    free(one), free(many), free(merged);
    return rc;
}
