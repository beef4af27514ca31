/* bench.c — how fast kronosd forecasts, measured in one run so that the ratios hold on a
 * shared, noisy machine.
 *
 *   kronos-bench --model DIR [--csv FILE] [--lookback N]  [--reps N] [--full] [--decode-only]
 *                [--cached-only] [--phases-cpu] [--only PHASE] [--weights f32|bf16|int8]
 *                [--kv f32|bf16]
 *   kronos-bench --model DIR --agreement [--agreement-dump DIR] [--csv FILE] [--lookback N]
 *                [--eval-seeds N] [--eval-origins N] [--eval-samples N] [--eval-modes M,...]
 *                [--eval-only]
 *   kronos-bench --model DIR --train-step [--batch 16] [--lookback 90] [--predict 10] [--reps 5]
 *
 * Reports the machine (CPU model, the OpenBLAS core, kronosd's own kernel level), then ms per
 * forecast, uncached reference vs KV-cached, horizons 112 (the window never slides at
 * max_context 512) and 120 (it slides for 8 steps), 1 and 30 sample paths; then each phase
 * (prefill, cached decode step at 1 and 30 paths, and at 30 paths MID_HORIZON tokens into the
 * horizon, sliding-window recompute step, tokenizer decode) with its time and GFLOP/s as a
 * fraction of OpenBLAS's sgemm 1024³ measured in the same run (before and after the phases,
 * the better of the two) and, with float32 weights, its ceiling (the fraction it reaches with
 * its FLOPs at that yardstick and its products and its attention each no faster than their
 * bytes at the read bandwidth measured below: roofline.c), OpenBLAS on a 30-path step's
 * own products (weights from memory, at 30 rows) beside that step, and single-path decode against
 * weight bytes ÷ memory bandwidth in three rounds, each between two reads of memory (the median
 * round, and the same with the KV cache's bytes added); and a parity check, the
 * KV-cached forecast against the reference path, to the bit (the bench exits 1 if they differ). The
 * reference at 30 paths takes many minutes (its paths run one after another); it is measured only
 * with --full, and otherwise shown as 30 × its one-path time. --only PHASE (prefill, step1, step30,
 * step30mid, recompute1, recompute30, tokenizer) times one phase over --reps rounds and nothing
 * else: a profiler's loop.
 *
 * Steady state: every phase first runs once untimed, and cached forecasts share one KV pool,
 * so that the timed calls find their KV blocks and per-thread scratch already touched, as a
 * server's long-lived pool and threads are after their first requests (a fresh pool's pages
 * are faulted in and zeroed by the kernel on first write).
 *
 * The sgemm yardstick runs on the best core OpenBLAS has for this CPU at the vector width of
 * kronosd's kernels (AVX-512: SkylakeX and Cooperlake; AVX2, as with KRONOS_SIMD=avx2:
 * Haswell and Zen; the portable kernels: the CPU's widest), the fastest of them measured
 * here: OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so the bench runs itself
 * again as a child with the variable set to each core (`kronos-bench --sgemm-yardstick`,
 * which prints "CORE GFLOPS"; `--sgemm-step ROWS LAYERS D FF V1 V2` prints "CORE MS" for
 * a step's products), prints every figure and says when the environment's core is
 * below the CPU's best; the table's percentages use the fastest.
 */
#include "agreement.h"
#include "bench_train.h"
#include "bench_models.h"
#include "bench_stats.h"
#include "blas_core.h"
#include "roofline.h"
#include "kronos.h"
#include "timefmt.h"

#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int n;
    int64_t *wall;
    double *col[KR_D_IN];
} series;

static void series_free(series *s) {
    for (int c = 0; c < KR_D_IN; c++)
        free(s->col[c]);
    free(s->wall);
    memset(s, 0, sizeof *s);
}

/* --phases-cpu times with the process's CPU time (all its threads, the kernel's page faults
 * included): what a neighbour's load disturbs least, with KRONOS_THREADS=1 one core's work. */
static clockid_t phase_clock = CLOCK_MONOTONIC;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(phase_clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int read_csv(const char *path, series *s) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    char line[512];
    int cap = 4096;
    memset(s, 0, sizeof *s);
    bool held = (s->wall = malloc((size_t)cap * sizeof *s->wall)) != NULL;
    for (int c = 0; c < KR_D_IN; c++)
        held &= (s->col[c] = malloc((size_t)cap * sizeof(double))) != NULL;
    if (!held) {
        fprintf(stderr, "%s: out of memory for %d rows\n", path, cap);
        series_free(s);
        fclose(f);
        return -1;
    }
    if (!fgets(line, sizeof line, f)) goto bad; /* header */
    while (fgets(line, sizeof line, f) && s->n < cap) {
        char *ts = strtok(line, ",");
        char err[128];
        if (!ts || kd_parse_timestamp(ts, &s->wall[s->n], NULL, NULL, err, sizeof err)) goto bad;
        for (int c = 0; c < KR_D_IN; c++) {
            char *v = strtok(NULL, ",\n");
            if (!v) goto bad;
            s->col[c][s->n] = strtod(v, NULL);
        }
        s->n++;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "%s: line %d is not timestamps,open,high,low,close,volume,amount\n", path,
            s->n + 2);
    series_free(s);
    fclose(f);
    return -1;
}

/* ms of one forecast (the best of reps), lookback L from row 0 of the series, its KV caches
 * in `pool` (kept across forecasts, as a server's: the first call touches its pages). */
static double forecast_ms(const kr_model *m, kr_pool *pool, const series *s, int L, int P,
                          int samples, bool use_cache, int reps, kr_forecast_result *keep) {
    kr_forecast_request r;
    kr_forecast_request_init(&r);
    r.context.n = L;
    r.context.timestamps = s->wall;
    for (int c = 0; c < KR_D_IN; c++)
        r.context.columns[c] = s->col[c];
    r.horizon = P;
    r.future_timestamps = s->wall + L;
    r.samples = samples;
    r.seed = 1;
    r.use_cache = use_cache;
    double best = INFINITY;
    for (int k = 0; k < reps; k++) {
        kr_forecast_result res;
        kr_error err;
        double t0 = now_ms();
        if (kr_forecast(m, use_cache ? pool : NULL, &r, &res, &err)) {
            fprintf(stderr, "forecast: %s\n", err.msg);
            exit(1);
        }
        double t = now_ms() - t0;
        if (t < best) best = t;
        if (keep && k == 0)
            *keep = res;
        else
            kr_forecast_result_free(&res);
    }
    return best;
}

/* GFLOP/s of sgemm C[M][N] = A[M][K] B[N][K]^T, the shape of a linear layer: its fastest
 * call over 0.6 s (the peak, as far as a shared machine lets it show). */
static double sgemm_gflops(int M, int N, int K) {
    float *a = malloc((size_t)M * K * sizeof(float)), *b = malloc((size_t)N * K * sizeof(float));
    float *c = malloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        b[i] = (float)(i % 5) * 0.1f;
    double flops = 2.0 * M * N * K, best = INFINITY;
    int iters = 0;
    double t0 = now_ms();
    while (now_ms() - t0 < 600 || iters < 5) { /* the fastest call: the peak */
        double t1 = now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = now_ms() - t1;
        if (dt < best) best = dt;
        iters++;
    }
    free(a);
    free(b);
    free(c);
    return flops / (best * 1e6);
}

/* The yardstick on the core OpenBLAS loaded: sgemm 1024³ with OpenBLAS's own threads, one
 * per CPU (kronosd's kernels parallelise with their own pool and do not use OpenBLAS). */
static double yardstick_here(void) {
    openblas_set_num_threads(openblas_get_num_procs());
    double gf = sgemm_gflops(1024, 1024, 1024);
    openblas_set_num_threads(1);
    return gf;
}

/* A figure measured by this program run again with OPENBLAS_CORETYPE=core and `args` (its
 * argv, NULL-terminated): the core the child loaded (into got, which may differ when OpenBLAS
 * ignores the variable) and the number it printed after it, or NAN when the child could not
 * run. */
static double measured_on(const char *core, char *const args[], char *got, size_t n) {
    int fd[2];
    snprintf(got, n, "?");
    if (pipe(fd)) return NAN;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return NAN;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(fd[1]);
    char line[256] = "";
    FILE *f = fdopen(fd[0], "r");
    if (!f || !fgets(line, sizeof line, f)) line[0] = 0;
    if (f)
        fclose(f);
    else
        close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    char name[64];
    double gf;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || sscanf(line, "%63s %lf", name, &gf) != 2)
        return NAN;
    snprintf(got, n, "%s", name);
    return gf;
}

/* The yardstick for the table: sgemm on the loaded core, then on every OpenBLAS core of the
 * vector width kronosd's kernels run at (each in a child, unless it is the loaded one), all
 * printed; the fastest is the yardstick, whatever OPENBLAS_CORETYPE the environment holds
 * (and the bench says so when the environment's core is below the CPU's widest). */
static double yardstick(void) {
    const char *env_core = kb_blas_core(), *better = kb_blas_better_core_here();
    const char *set = getenv("OPENBLAS_CORETYPE");
    double here = yardstick_here();
    printf("\nOpenBLAS sgemm 1024×1024×1024: %.1f GFLOP/s on the %s core (%s%s)%s\n", here,
           env_core, set ? "OPENBLAS_CORETYPE=" : "OPENBLAS_CORETYPE unset", set ? set : "",
           better ? ", lower than this CPU's best" : "");
    const char *cores[2];
    int n = kb_blas_yardstick_cores_here((int)kr_simd_level(), cores);
    double best = n ? 0 : here;
    const char *best_core = env_core;
    for (int i = 0; i < n; i++) {
        char got[64];
        double gf;
        if (strcasecmp(cores[i], env_core) == 0) {
            gf = here;
            snprintf(got, sizeof got, "%s", env_core);
        } else {
            char *args[] = {"kronos-bench", "--sgemm-yardstick", NULL};
            gf = measured_on(cores[i], args, got, sizeof got);
            if (isnan(gf)) {
                printf("OpenBLAS sgemm 1024×1024×1024 on the %s core: could not be measured\n",
                       cores[i]);
                continue;
            }
            printf("OpenBLAS sgemm 1024×1024×1024: %.1f GFLOP/s on the %s core "
                   "(OPENBLAS_CORETYPE=%s, in a child)\n",
                   gf, got, cores[i]);
        }
        if (gf > best) {
            best = gf;
            best_core = cores[i];
        }
    }
    if (best <= 0) best = here; /* no child could run: the loaded core, said above */
    printf("yardstick: %.1f GFLOP/s, the %s core (the best OpenBLAS has for %s kernels here)\n",
           best, best_core, kr_simd_name(kr_simd_level()));
    return best;
}

/* A phase's FLOPs, and those of them that attention computes (its ceiling counts their
 * bytes apart from the products'). */
typedef struct {
    double all, attn;
} flop_count;

static flop_count flops_plus(flop_count a, flop_count b) {
    return (flop_count){a.all + b.all, a.attn + b.attn};
}

static flop_count flops_times(double k, flop_count a) {
    return (flop_count){k * a.all, k * a.attn};
}

/* FLOPs of the predictor for one token whose attention sees `keys` positions: every weight
 * matrix of the trunk once (2 flops a weight), attention over the keys, and, when `heads`,
 * the s1 head, the dependency layer and the s2 head (computed once a step, at the last row).
 * The dependency layer's query projection is not counted: its output for each s1 token is a
 * table computed at load, a step looks it up. */
static flop_count token_flops(const kr_predictor_config *c, int keys, bool heads) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double trunk = c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d /* fusion */;
    double head = d * v1 + 3 * d * d /* dependency layer: k, v, o */ + d * v2;
    double attn = c->n_layers * 4.0 * keys * d + (heads ? 4.0 * keys * d : 0);
    return (flop_count){2 * (trunk + (heads ? head : 0)) + attn, attn};
}

/* FLOPs of one decode step for one path at `keys` cached positions. */
static flop_count step_flops(const kr_predictor_config *c, int keys) {
    return token_flops(c, keys, true);
}

/* FLOPs of appending positions [p0, p0 + n) to a cache, the heads run once at the end. */
static flop_count append_flops(const kr_predictor_config *c, int p0, int n) {
    flop_count f = {0, 0};
    for (int p = p0; p < p0 + n; p++)
        f = flops_plus(f, token_flops(c, p + 1, false));
    flop_count last = token_flops(c, p0 + n, true), bare = token_flops(c, p0 + n, false);
    return flops_plus(f, (flop_count){last.all - bare.all, last.attn - bare.attn});
}

/* FLOPs of the tokenizer's decoder over n tokens (its blocks and its two linear layers). */
static flop_count detok_flops(const kr_tokenizer_config *c, int n) {
    double d = c->d_model, ff = c->ff_dim, blocks = c->n_dec_layers - 1;
    double per =
        2 * (blocks * (4 * d * d + 3 * d * ff) + (c->s1_bits + c->s2_bits) * d + d * c->d_in);
    double attn = blocks * 4.0 * d * (double)n * (n + 1) / 2;
    return (flop_count){n * per + attn, attn};
}

/* Bytes of the tokenizer decoder's float32 weights (detok_flops' matrices) and of the keys
 * and values its blocks' attention reads over n tokens. */
static double detok_weight_bytes(const kr_tokenizer_config *c) {
    double d = c->d_model, ff = c->ff_dim, blocks = c->n_dec_layers - 1;
    return 4 * (blocks * (4 * d * d + 3 * d * ff) + (c->s1_bits + c->s2_bits) * d + d * c->d_in);
}
static double detok_kv_bytes(const kr_tokenizer_config *c, int n) {
    return 4.0 * (c->n_dec_layers - 1) * 2.0 * n * c->d_model;
}

/* Bytes of the weights a decode step streams in weights mode w: the trunk, the fusion, the
 * s1 head, the dependency layer's k, v and o, the s2 head (not dep_q: a step looks its output
 * up). BF16 is two bytes a weight; int8 a byte and a float scale a block of 32 for the trunk,
 * the fusion and the dependency layer, its heads float32 as the loader packs them. */
static double weight_bytes(const kr_predictor_config *c, kr_precision w) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double inner = c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d + 3 * d * d;
    double edges = d * v1 + d * v2;
    if (w == KR_PREC_BF16) return 2 * (inner + edges);
    if (w == KR_PREC_INT8) return inner * (1 + 4.0 / 32) + 4 * edges;
    return 4 * (inner + edges);
}

/* ---- OpenBLAS on a decode step's own products -------------------------------------------- */

/* The weight matrices a decode step multiplies, [out][in] each, in the step's order: per
 * layer q|k|v, o, w1|w3, w2; then the embedding fusion, the s1 head, the dependency layer's
 * k, v, o and the s2 head (weight_bytes' matrices, one by one). Returns their count. */
#define STEP_SHAPES_MAX 256
static int step_shapes(int layers, int d, int ff, int v1, int v2, int shape[][2]) {
    int n = 0;
    for (int l = 0; l < layers && n + 8 <= STEP_SHAPES_MAX; l++) {
        shape[n][0] = 3 * d, shape[n++][1] = d;
        shape[n][0] = d, shape[n++][1] = d;
        shape[n][0] = 2 * ff, shape[n++][1] = d;
        shape[n][0] = d, shape[n++][1] = ff;
    }
    const int tail[6][2] = {{d, 2 * d}, {v1, d}, {d, d}, {d, d}, {d, d}, {v2, d}};
    for (int i = 0; i < 6 && n < STEP_SHAPES_MAX; i++)
        shape[n][0] = tail[i][0], shape[n++][1] = tail[i][1];
    return n;
}

/* ms of OpenBLAS's sgemm over every product of a decode step of `rows` paths, each weight
 * matrix its own (so that, as in a step, the weights come from memory): the fastest of at
 * least 4 passes and 0.6 s, OpenBLAS's threads one per CPU. NAN when out of memory. */
static double step_products_ms(int rows, int layers, int d, int ff, int v1, int v2) {
    int shape[STEP_SHAPES_MAX][2], n = step_shapes(layers, d, ff, v1, v2, shape), widest = 0;
    float *w[STEP_SHAPES_MAX] = {NULL};
    bool ok = true;
    for (int i = 0; i < n; i++) {
        size_t m = (size_t)shape[i][0] * shape[i][1];
        ok = ok && (w[i] = malloc(m * sizeof(float)));
        for (size_t k = 0; ok && k < m; k++)
            w[i][k] = (float)(k % 13) * 0.01f;
        if (shape[i][0] > widest) widest = shape[i][0];
        if (shape[i][1] > widest) widest = shape[i][1];
    }
    float *x = malloc((size_t)rows * widest * sizeof(float));
    float *y = malloc((size_t)rows * widest * sizeof(float));
    double best = NAN;
    if (ok && x && y) {
        for (size_t k = 0; k < (size_t)rows * widest; k++)
            x[k] = (float)(k % 7) * 0.1f;
        openblas_set_num_threads(openblas_get_num_procs());
        best = INFINITY;
        double t0 = now_ms();
        for (int pass = 0; pass < 4 || now_ms() - t0 < 600; pass++) {
            double t1 = now_ms();
            for (int i = 0; i < n; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, shape[i][0], shape[i][1],
                            1.0f, x, shape[i][1], w[i], shape[i][1], 0.0f, y, shape[i][0]);
            double dt = now_ms() - t1;
            if (dt < best) best = dt;
        }
        openblas_set_num_threads(1);
    }
    for (int i = 0; i < n; i++)
        free(w[i]);
    free(x);
    free(y);
    return best;
}

/* OpenBLAS on a `rows`-path step's products, on the loaded core and on every core of the
 * yardstick (each in a child): the fastest, printed beside kronosd's whole step. */
static void step_products_line(const kr_predictor_config *c, int rows, double kronosd_ms) {
    int layers = c->n_layers, d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits,
        v2 = 1 << c->s2_bits, shape[STEP_SHAPES_MAX][2];
    int n = step_shapes(layers, d, ff, v1, v2, shape);
    double flops = 0;
    for (int i = 0; i < n; i++)
        flops += 2.0 * rows * shape[i][0] * shape[i][1];
    const char *cores[2], *best_core = kb_blas_core();
    double best = step_products_ms(rows, layers, d, ff, v1, v2);
    int k = kb_blas_yardstick_cores_here((int)kr_simd_level(), cores);
    for (int i = 0; i < k; i++) {
        if (strcasecmp(cores[i], kb_blas_core()) == 0) continue;
        char a[6][16], got[64];
        snprintf(a[0], sizeof a[0], "%d", rows);
        snprintf(a[1], sizeof a[1], "%d", layers);
        snprintf(a[2], sizeof a[2], "%d", d);
        snprintf(a[3], sizeof a[3], "%d", ff);
        snprintf(a[4], sizeof a[4], "%d", v1);
        snprintf(a[5], sizeof a[5], "%d", v2);
        char *args[] = {"kronos-bench", "--sgemm-step", a[0], a[1], a[2], a[3], a[4], a[5], NULL};
        double ms = measured_on(cores[i], args, got, sizeof got);
        if (ms < best || isnan(best)) best = ms, best_core = cores[i];
    }
    printf("OpenBLAS on a %d-path step's own products alone (%d products of the model's shapes, "
           "%.1f MB of weights, each matrix its own as in a step): %.2f ms on the %s core, "
           "%.1f GFLOP/s; kronosd's whole %d-path step: %.2f ms\n",
           rows, n, weight_bytes(c, KR_PREC_F32) / 1e6, best, best_core, flops / (best * 1e6), rows,
           kronosd_ms);
}

/* Bytes of KV cache a decode step at `keys` cached positions reads: the keys and values of
 * every position in every layer and in the dependency layer. */
static double kv_bytes(const kr_predictor_config *c, int keys) {
    return 4.0 * (c->n_layers + 1) * 2.0 * keys * c->d_model;
}

#define SINGLE_ROUNDS 3 /* single-path step rounds, each between two reads of memory */
_Static_assert(SINGLE_ROUNDS == 3, "median3 and the single-path line print three rounds");
static double median3(const double x[3]) {
    double a = x[0], b = x[1], c = x[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* ---- the machine ------------------------------------------------------------------------- */

/* "model name (family F, model M)" of /proc/cpuinfo's first CPU, or "unknown CPU" (a
 * virtual machine may name only the vendor; the family and model still tell the core). */
static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], name[256] = "", family[32] = "?", model[32] = "?";
    while (fgets(line, sizeof line, f) && line[0] != '\n') { /* the first CPU's block */
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1 + (colon[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (strncmp(line, "model name", 10) == 0)
            snprintf(name, sizeof name, "%s", v);
        else if (strncmp(line, "cpu family", 10) == 0)
            snprintf(family, sizeof family, "%s", v);
        else if (strncmp(line, "model\t", 6) == 0)
            snprintf(model, sizeof model, "%s", v);
    }
    fclose(f);
    if (name[0]) snprintf(out, n, "%s (family %s, model %s)", name, family, model);
}

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} read_part;

/* The fastest plain read this CPU does, so that the floor is one: built for each vector
 * width, and each line asked for 4 KiB ahead, past the page edge where the hardware's
 * stream prefetch stops (on an Intel Xeon, family 6 model 207, a 104 MB buffer read from
 * L3: 28-42 GB/s without, 45-58 with; from memory the same 24 GB/s either way). */
#if defined(__x86_64__) && defined(__GNUC__)
#define READ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define READ_CLONES
#endif
#define READ_AHEAD 512 /* words: 4 KiB */
READ_CLONES static void *read_loop(void *arg) {
    read_part *r = arg;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= r->n; i += 8) {
        if (i + READ_AHEAD < r->n) __builtin_prefetch(r->p + i + READ_AHEAD);
        for (int k = 0; k < 8; k++)
            a[k] += r->p[i + k];
    }
    for (int k = 0; k < 8; k++)
        r->sum += a[k];
    return NULL;
}

/* GB/s of reading a buffer of `bytes` with `threads` threads, the best of 5 passes back to
 * back. A single-path decode step reads the same weights and KV cache every token, so the
 * floor reads a buffer of that size the same way: from memory where it is larger than the
 * last-level cache, from that cache where it fits (an Intel Xeon's 260 MB L3 holds
 * Kronos-small's weights, read about twice as fast as memory: a buffer larger than that L3
 * would put the floor below what the step itself does). */
static double read_bandwidth(int threads, size_t bytes) {
    size_t words = bytes / 8;
    uint64_t *buf = malloc(words * 8);
    if (!buf) return NAN;
    for (size_t i = 0; i < words; i++)
        buf[i] = i;
    if (threads > 16) threads = 16;
    double best = INFINITY;
    uint64_t keep = 0;
    for (int pass = 0; pass < 5; pass++) {
        read_part part[16];
        pthread_t t[16];
        double t0 = now_ms();
        for (int i = 0; i < threads; i++) {
            part[i] = (read_part){buf + words / threads * i, words / threads, 0};
            if (i > 0 && pthread_create(&t[i], NULL, read_loop, &part[i])) exit(1);
        }
        read_loop(&part[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(t[i], NULL);
        double dt = now_ms() - t0;
        for (int i = 0; i < threads; i++)
            keep += part[i].sum;
        if (dt < best) best = dt;
    }
    free(buf);
    if (keep == 42) puts(""); /* the sums are used */
    return words * 8 / (best * 1e6);
}

/* Tokens into a forecast's horizon where the bench times a 30-path step as well: near the middle
 * of a 112-token horizon, where each path attends over about as many keys of its own as it does
 * on average over the whole horizon (at the start it has none, and attention reads only the
 * shared prefix once for all paths). */
#define MID_HORIZON 48
#define TIMED_STEPS 16 /* steps a decode round times (their median position: TIMED_STEPS / 2) */

/* Whether a lookback of L, MID_HORIZON more tokens and the timed steps fit the context window
 * mc (past it the window slides: no cached step to time). */
static bool mid_horizon_fits(int L, int mc) {
    return L + MID_HORIZON + TIMED_STEPS <= mc;
}

/* Time per step of decoding S paths on caches holding `prefix` positions, each path `skip`
 * tokens into its horizon (its own keys past the shared prefix: skip, and one more each
 * step): the median of TIMED_STEPS steps in each of `rounds` timed rounds, at least 4 (robust
 * to a shared machine's hiccups).
 * Each round forks the paths from one prefilled cache and frees them after, on one pool;
 * an untimed round first touches the pool blocks the steps write, so the timed rounds run
 * on warm blocks the way a server's long-lived pool does after its first requests. */
static double decode_step_ms(const kr_model *m, const series *s, int prefix, int S, int skip,
                             int rounds) {
    kr_error err;
    int steps = TIMED_STEPS, n = prefix + skip + steps;
    kr_pool *pool = kr_pool_create(m, kr_pool_bytes_for(m, n + 32) * (S + 1), &err);
    kr_cache *base = pool ? kr_cache_create(pool, 0, &err) : NULL;
    if (!base) {
        fprintf(stderr, "decode bench: %s\n", err.msg);
        exit(1);
    }
    if (rounds < 4) rounds = 4;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    kr_stamp *st = malloc((size_t)n * sizeof *st);
    kr_cache **paths = malloc((size_t)S * sizeof *paths);
    int v = 1 << kr_model_predictor_config(m)->s1_bits;
    float *l1 = malloc((size_t)S * v * sizeof(float)), *l2 = malloc((size_t)S * v * sizeof(float));
    int32_t *a = malloc((size_t)S * sizeof *a), *b = malloc((size_t)S * sizeof *b);
    kr_stamp *sts = malloc((size_t)S * sizeof *sts);
    double *times = malloc((size_t)steps * rounds * sizeof *times);
    if (!s1 || !s2 || !st || !paths || !l1 || !l2 || !a || !b || !sts || !times) {
        fprintf(stderr, "decode bench: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        s1[i] = (i * 37) % 1024;
        s2[i] = (i * 91) % 1024;
        st[i] = kr_stamp_from_wall(s->wall[i]);
    }
    if (kr_cache_append(&base, 1, s1, s2, st, prefix, NULL, &err)) {
        fprintf(stderr, "decode bench: %s\n", err.msg);
        exit(1);
    }
    int n_times = 0;
    for (int r = -1; r < rounds; r++) { /* round -1: the untimed warm-up */
        for (int p = 0; p < S; p++)
            if (!(paths[p] = kr_cache_fork(base, &err))) {
                fprintf(stderr, "decode bench: %s\n", err.msg);
                exit(1);
            }
        for (int k = 0; k < skip + steps; k++) {
            double t0 = now_ms();
            for (int p = 0; p < S; p++) {
                a[p] = s1[prefix + k];
                b[p] = s2[prefix + k];
                sts[p] = st[prefix + k];
            }
            if (kr_cache_append(paths, S, a, b, sts, 1, l1, &err) ||
                kr_cache_s2_logits(paths, S, a, l2, &err)) {
                fprintf(stderr, "decode bench: %s\n", err.msg);
                exit(1);
            }
            if (r >= 0 && k >= skip) times[n_times++] = now_ms() - t0;
        }
        for (int p = 0; p < S; p++)
            kr_cache_free(paths[p]);
    }
    qsort(times, (size_t)n_times, sizeof *times, kb_cmp_double);
    double per_step = times[n_times / 2];
    kr_cache_free(base);
    kr_pool_free(pool);
    free(paths);
    free(s1);
    free(s2);
    free(st);
    free(l1);
    free(l2);
    free(a);
    free(b);
    free(sts);
    free(times);
    return per_step;
}

/* The two timed parts of filling a window: `prefix` context tokens into one cache (what
 * every path then forks), then each of S paths appending its own g tokens in one batch and
 * drawing its s2 logits. prefill_ms and own_ms get their times: the best of at least reps
 * rounds and 0.3 s of them (as with the yardstick, the fastest is what the machine does when
 * the neighbours let it), after an untimed round that first touches the pool blocks and the
 * threads' scratch (the steady state of a server, warm after its first requests). */
static void window_ms(const kr_model *m, const series *s, int prefix, int g, int S, int reps,
                      double *prefill_ms, double *own_ms) {
    kr_error err;
    int n = prefix + g;
    kr_pool *pool = kr_pool_create(m, kr_pool_bytes_for(m, n + 32) * (S + 1), &err);
    int v = 1 << kr_model_predictor_config(m)->s1_bits;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    kr_stamp *st = malloc((size_t)n * sizeof *st);
    kr_cache **paths = malloc((size_t)S * sizeof *paths);
    float *l1 = malloc((size_t)S * v * sizeof(float)), *l2 = malloc((size_t)S * v * sizeof(float));
    int32_t *last = malloc((size_t)S * sizeof *last);
    if (!pool || !s1 || !s2 || !st || !paths || !l1 || !l2 || !last) {
        fprintf(stderr, "window bench: %s\n", pool ? "out of memory" : err.msg);
        exit(1);
    }
    for (int i = 0; i < n; i++) { /* the context; each path's own tokens follow it */
        s1[i] = (i * 37) % 1024;
        s2[i] = (i * 91) % 1024;
        st[i] = kr_stamp_from_wall(s->wall[i]);
    }
    int32_t *g1 = malloc((size_t)S * (g > 0 ? g : 1) * sizeof *g1),
            *g2 = malloc((size_t)S * (g > 0 ? g : 1) * sizeof *g2);
    kr_stamp *gs = malloc((size_t)S * (g > 0 ? g : 1) * sizeof *gs);
    if (!g1 || !g2 || !gs) exit(1);
    for (int p = 0; p < S; p++)
        for (int t = 0; t < g; t++) {
            g1[(size_t)p * g + t] = (prefix + t + 7 * p) * 37 % 1024;
            g2[(size_t)p * g + t] = (prefix + t + 3 * p) * 91 % 1024;
            gs[(size_t)p * g + t] = st[prefix + t];
        }
    *prefill_ms = *own_ms = INFINITY;
    double start = wall_ms();
    for (int k = -1; k < reps || wall_ms() - start < 300; k++) { /* k = -1: the warm-up */
        kr_cache *base = kr_cache_create(pool, 0, &err);
        if (!base) exit(1);
        double t0 = now_ms();
        if (kr_cache_append(&base, 1, s1, s2, st, prefix, l1, &err)) {
            fprintf(stderr, "window bench: %s\n", err.msg);
            exit(1);
        }
        double t1 = now_ms();
        for (int p = 0; p < S; p++)
            if (!(paths[p] = kr_cache_fork(base, &err))) exit(1);
        for (int p = 0; p < S && g > 0; p++)
            last[p] = g1[(size_t)p * g + g - 1];
        double t2 = now_ms();
        if (g > 0 && (kr_cache_append(paths, S, g1, g2, gs, g, l1, &err) ||
                      kr_cache_s2_logits(paths, S, last, l2, &err))) {
            fprintf(stderr, "window bench: %s\n", err.msg);
            exit(1);
        }
        double t3 = now_ms();
        if (k >= 0 && t1 - t0 < *prefill_ms) *prefill_ms = t1 - t0;
        if (k >= 0 && t3 - t2 < *own_ms) *own_ms = t3 - t2;
        for (int p = 0; p < S; p++)
            kr_cache_free(paths[p]);
        kr_cache_free(base);
    }
    kr_pool_free(pool);
    free(s1);
    free(s2);
    free(st);
    free(paths);
    free(l1);
    free(l2);
    free(last);
    free(g1);
    free(g2);
    free(gs);
}

/* ms of decoding n token pairs to candles with the tokenizer: the best of at least reps
 * calls and 0.3 s of them (a call takes about 10 ms: as with the yardstick, the fastest call
 * is what the machine does when the neighbours let it), after an untimed call that first
 * touches the thread's scratch. */
static double detok_ms(const kr_model *m, int n, int reps) {
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    float *out = malloc((size_t)n * KR_D_IN * sizeof(float));
    if (!s1 || !s2 || !out) exit(1);
    for (int i = 0; i < n; i++) {
        s1[i] = (i * 37) % 1024;
        s2[i] = (i * 91) % 1024;
    }
    double best = INFINITY, start = wall_ms();
    for (int k = -1; k < reps || wall_ms() - start < 300; k++) { /* k = -1: the warm-up */
        kr_error err;
        double t0 = now_ms();
        if (kr_tokenizer_decode(m, s1, s2, n, out, &err)) {
            fprintf(stderr, "tokenizer bench: %s\n", err.msg);
            exit(1);
        }
        double t = now_ms() - t0;
        if (k >= 0 && t < best) best = t;
    }
    free(s1);
    free(s2);
    free(out);
    return best;
}

/* The bench's parity check: one path, horizon 12 from lookback max_context - 6 (the window
 * slides for the last 6 steps), KV-cached against the plain reference path. The same tokens
 * give the same candles to the bit; returns the number of numbers that differ. */
static int parity_check(const kr_model *m, const series *s, int mc) {
    int L = mc - 6, P = 12, n_diff = 0;
    kr_forecast_result a, b;
    kr_forecast_request r;
    kr_forecast_request_init(&r);
    r.context.n = L;
    r.context.timestamps = s->wall;
    for (int c = 0; c < KR_D_IN; c++)
        r.context.columns[c] = s->col[c];
    r.horizon = P;
    r.future_timestamps = s->wall + L;
    r.seed = 3;
    kr_error err;
    r.use_cache = true;
    if (kr_forecast(m, NULL, &r, &a, &err)) {
        fprintf(stderr, "parity: %s\n", err.msg);
        exit(1);
    }
    r.use_cache = false;
    if (kr_forecast(m, NULL, &r, &b, &err)) {
        fprintf(stderr, "parity: %s\n", err.msg);
        exit(1);
    }
    for (int i = 0; i < KR_D_IN * P; i++)
        n_diff += memcmp(&a.mean[i], &b.mean[i], sizeof(double)) != 0;
    kr_forecast_result_free(&a);
    kr_forecast_result_free(&b);
    return n_diff;
}

/* A phase's work for its ceiling: its FLOPs, the weights its products read and the keys and
 * values its attention reads. */
static kb_phase_work work(flop_count f, double weights, double kv) {
    return (kb_phase_work){f.all, f.attn, weights, kv};
}

/* One row of the phase table: its share of the yardstick `peak`, and its ceiling at peak and
 * bandwidth bw (NAN: not shown). */
static void phase(const char *name, double ms, kb_phase_work w, double peak, double bw) {
    double gf = w.flops / (ms * 1e6);
    printf("| %s | %.2f | %.2f | %.1f | %.0f%% |", name, ms, w.flops / 1e9, gf, 100 * gf / peak);
    double ceiling = kb_phase_ceiling(w, peak, bw);
    if (isnan(ceiling))
        printf(" – |\n");
    else
        printf(" %.0f%% |\n", 100 * ceiling);
}

int main(int argc, char **argv) {
    const char *model = NULL, *csv = "tests/data/kline_5min.csv";
    int L = -1, reps = -1; /* defaults after the flags: 400 and 2, a training step's 90 and 5 */
    bool full = false, decode_only = false, cached_only = false, phases_cpu = false;
    const char *only = NULL;
    kr_precision weights = KR_PREC_F32, kv_mode = KR_PREC_F32;
    bool agreement = false;
    const char *agreement_dump = NULL;
    kb_eval_opts eval = {.seeds = 4, .origins = 0, .samples = 32};
    bool eval_only = false;
    bool train_step = false; /* bench_train.c */
    int batch = 16, predict = 10;
    openblas_set_num_threads(1); /* OpenBLAS's threads run only for the yardstick */
    if (argc >= 2 && !strcmp(argv[1], "--models-overhead")) return kb_models_overhead(argc, argv);
    if (argc == 2 && !strcmp(argv[1], "--sgemm-yardstick")) { /* a child of measured_on */
        double gf = yardstick_here();
        printf("%s %.3f\n", kb_blas_core(), gf);
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "--sgemm-step")) { /* a child of step_products_line */
        double ms = step_products_ms(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                                     atoi(argv[6]), atoi(argv[7]));
        printf("%s %.4f\n", kb_blas_core(), ms);
        return isnan(ms) ? 1 : 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv = argv[++i];
        else if (!strcmp(argv[i], "--lookback") && i + 1 < argc)
            L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--full"))
            full = true;
        else if (!strcmp(argv[i], "--decode-only"))
            decode_only = true;
        else if (!strcmp(argv[i], "--cached-only"))
            cached_only = true;
        else if (!strcmp(argv[i], "--phases-cpu"))
            phases_cpu = decode_only = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i], decode_only = true;
        else if (!strcmp(argv[i], "--agreement"))
            agreement = true;
        else if (!strcmp(argv[i], "--agreement-dump") && i + 1 < argc)
            agreement = true, agreement_dump = argv[++i];
        else if (!strcmp(argv[i], "--eval-seeds") && i + 1 < argc)
            eval.seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-origins") && i + 1 < argc)
            eval.origins = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-samples") && i + 1 < argc)
            eval.samples = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-modes") && i + 1 < argc)
            eval.modes = argv[++i];
        else if (!strcmp(argv[i], "--eval-only"))
            agreement = eval_only = true;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            kr_error err = {0};
            if (kr_kv_precision_parse(argv[++i], "--kv", &kv_mode, &err)) {
                fprintf(stderr, "kronos-bench: %s\n", err.msg);
                return 2;
            }
        } else if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
            kr_error err = {0};
            if (kr_precision_parse(argv[++i], "--weights", &weights, &err)) {
                fprintf(stderr, "kronos-bench: %s\n", err.msg);
                return 2;
            }
        } else if (!strcmp(argv[i], "--train-step"))
            train_step = true;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--predict") && i + 1 < argc)
            predict = atoi(argv[++i]);
        else {
            fprintf(
                stderr,
                "usage: kronos-bench --model DIR [--csv FILE] [--lookback N] [--reps N] "
                "[--full] [--decode-only] [--cached-only] [--phases-cpu] [--only PHASE] "
                "[--weights f32|bf16|int8] [--kv f32|bf16]\n"
                "       kronos-bench --model DIR --agreement [--agreement-dump DIR] [--csv FILE] "
                "[--lookback N] [--eval-seeds N] [--eval-origins N] [--eval-samples N] "
                "[--eval-modes M,...] [--eval-only]\n"
                "       kronos-bench --model DIR --train-step [--batch N] [--lookback N] "
                "[--predict N] [--reps N]\n"
                "       kronos-bench --models-overhead --model DIR [--models N] [--reps N] ...\n");
            return 2;
        }
    }
    if (L < 0) L = train_step ? 90 : 400;
    if (reps < 0) reps = train_step ? 5 : 2;
    if (!model) {
        fprintf(stderr, "kronos-bench: --model DIR is required (make one with kronos-mkmodel)\n");
        return 2;
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    if (agreement) { /* each reduced mode against float32: no timing */
        series a;
        printf("machine: %s, kronosd kernels %s\n", cpu, kr_simd_name(kr_simd_level()));
        if (read_csv(csv, &a)) return 1;
        int rc = eval_only ? 0 : kb_agreement(model, a.wall, a.col, a.n, L, agreement_dump);
        if (rc == 0 && eval.seeds > 0) /* --eval-seeds 0: the teacher-forced table alone */
            rc = kb_agreement_eval(model, a.wall, a.col, a.n, &eval, agreement_dump);
        series_free(&a);
        return rc;
    }
    printf("machine: %s, %d threads; OpenBLAS core %s; kronosd kernels %s (bf16 products %s, "
           "int8 %s); weights %s, kv %s\n",
           cpu, kr_threads(), kb_blas_core(), kr_simd_name(kr_simd_level()),
           kr_bf16_product_name(kr_simd_level()), kr_q8_product_name(kr_simd_level()),
           kr_precision_name(weights), kr_precision_name(kv_mode));
    char tok[1024], pred[1024];
    snprintf(tok, sizeof tok, "%s/tokenizer", model);
    snprintf(pred, sizeof pred, "%s/predictor", model);
    kr_model_paths paths = {.tokenizer_dir = tok,
                            .predictor_dir = pred,
                            .max_context = 512,
                            .weights = weights,
                            .kv = kv_mode};
    kr_error err;
    kr_model *m = kr_model_load(&paths, &err);
    if (!m) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    series s;
    if (read_csv(csv, &s)) return 1;
    if (s.n < L + 120) {
        fprintf(stderr, "kronos-bench: %s: need %d rows\n", csv, L + 120);
        series_free(&s);
        return 1;
    }
    if (train_step) {
        if (batch < 1 || predict < 0 || L < 1 || reps < 1) {
            fprintf(stderr, "kronos-bench: --train-step needs batch, lookback, reps >= 1\n");
            return 2;
        }
        kb_train_args ta = {
            {s.n, s.wall, {s.col[0], s.col[1], s.col[2], s.col[3], s.col[4], s.col[5]}},
            batch,
            L,
            predict,
            reps,
            yardstick()};
        const int rc = kb_train_step(m, pred, &ta);
        kr_model_free(m);
        series_free(&s);
        return rc;
    }
    const kr_predictor_config *c = kr_model_predictor_config(m);
    printf("model: d_model %d, %d layers, %d heads, ff %d; %zu parameters; max_context 512\n",
           c->d_model, c->n_layers, c->n_heads, c->ff_dim, kr_model_param_count(m));
    printf("data: %s, lookback %d, best of %d runs (cached)\n\n", csv, L, reps);

    if (!decode_only)
        printf("| horizon | paths | reference ms | cached ms | speed-up | cached / recomputed "
               "steps |\n|---|---|---|---|---|---|\n");
    int horizons[2] = {112, 120}, samples[2] = {1, 30};
    /* one pool for every cached forecast, as a server keeps one: 32 windows of max_context */
    kr_pool *fc_pool = decode_only ? NULL : kr_pool_create(m, kr_pool_bytes_for(m, 512) * 32, &err);
    if (!decode_only && !fc_pool) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    double ref1[2] = {0}, cached1[2] = {0}, cached30[2] = {0};
    for (int h = 0; h < 2 && !decode_only; h++)
        for (int k = 0; k < 2; k++) {
            int P = horizons[h], S = samples[k];
            kr_forecast_result res;
            double cached = forecast_ms(m, fc_pool, &s, L, P, S, true, reps, &res);
            double ref;
            const char *note = "";
            if (cached_only) {
                ref = NAN;
            } else if (S == 1 || full) {
                ref = forecast_ms(m, NULL, &s, L, P, S, false, 1, NULL);
            } else {
                ref = ref1[h] * S;
                note = " (30 × 1 path)";
            }
            if (S == 1) {
                ref1[h] = ref;
                cached1[h] = cached;
            } else {
                cached30[h] = cached;
            }
            printf("| %d | %d | %.0f%s | %.0f | %.1f× | %d / %d |\n", P, S, ref, note, cached,
                   ref / cached, res.usage.cached_steps, res.usage.recomputed_steps);
            fflush(stdout);
            kr_forecast_result_free(&res);
        }
    if (!decode_only)
        printf("\n30 paths cost %.2f× one path (horizon 112), %.2f× (horizon 120); cached "
               "forecasts share one KV pool (as a server's), the first call touching its pages\n",
               cached30[0] / cached1[0], cached30[1] / cached1[1]);
    kr_pool_free(fc_pool);

    const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
    int mc = 512, P = 120, g = P - 4; /* a recompute step past the slide: window of mc */
    if (only) {                       /* one phase, `reps` times (for a profiler), its time alone */
        if (phases_cpu) phase_clock = CLOCK_PROCESS_CPUTIME_ID;
        double ms = NAN, a_ms, b_ms;
        if (!strcmp(only, "prefill")) {
            window_ms(m, &s, L, 0, 1, reps, &ms, &a_ms);
        } else if (!strcmp(only, "step1") || !strcmp(only, "step30")) {
            ms = decode_step_ms(m, &s, L, only[4] == '1' ? 1 : 30, 0, reps);
        } else if (!strcmp(only, "step30mid")) {
            if (!mid_horizon_fits(L, mc)) {
                fprintf(stderr,
                        "kronos-bench: --only step30mid: lookback %d + %d + %d steps is past the "
                        "context window of %d\n",
                        L, MID_HORIZON, TIMED_STEPS, mc);
                return 2;
            }
            ms = decode_step_ms(m, &s, L, 30, MID_HORIZON, reps);
        } else if (!strcmp(only, "recompute1") || !strcmp(only, "recompute30")) {
            window_ms(m, &s, mc - g, g, only[9] == '1' ? 1 : 30, reps, &a_ms, &b_ms);
            ms = a_ms + b_ms;
        } else if (!strcmp(only, "tokenizer")) {
            ms = detok_ms(m, L + P, reps);
        } else {
            fprintf(stderr,
                    "kronos-bench: --only %s: not prefill, step1, step30, step30mid, "
                    "recompute1, recompute30 or tokenizer\n",
                    only);
            return 2;
        }
        printf("%s: %.3f ms (%s time, best of %d; steps: the median)\n", only, ms,
               phases_cpu ? "CPU" : "wall", reps);
        kr_model_free(m);
        series_free(&s);
        return 0;
    }

    /* the yardstick before and after the phases, the best of the two per core (a shared
     * machine's neighbours depress one or the other) */
    double peak = phases_cpu ? NAN : yardstick();
    double bw = NAN;
    if (phases_cpu) {
        phase_clock = CLOCK_PROCESS_CPUTIME_ID;
        printf("phases in CPU time of the whole process (--phases-cpu), no yardstick\n");
    }

    double pre_ms, own1_ms, own30_ms, rpre_ms;
    window_ms(m, &s, L, 0, 1, reps, &pre_ms, &own1_ms);
    window_ms(m, &s, mc - g, g, 1, reps, &rpre_ms, &own1_ms);
    window_ms(m, &s, mc - g, g, 30, reps, &rpre_ms, &own30_ms);
    /* the single-path step in SINGLE_ROUNDS rounds between reads of memory (each the best of
     * 5 passes): a round's floor divides by the better of the reads beside it, the nearest in
     * time a shared machine's bandwidth can be had (its neighbours move it by a third from
     * one minute to the next); the table takes the rounds' median step */
    int mid = TIMED_STEPS / 2; /* the timed steps' median position past their start */
    double bytes = weight_bytes(c, kr_model_weights(m)),
           kv = kv_bytes(c, L + mid) / (kr_model_kv(m) == KR_PREC_BF16 ? 2 : 1);
    double step1 = NAN, read[SINGLE_ROUNDS + 1], round_ms[SINGLE_ROUNDS];
    double ratio[SINGLE_ROUNDS], ratio_kv[SINGLE_ROUNDS];
    if (phases_cpu) {
        step1 = decode_step_ms(m, &s, L, 1, 0, reps);
    } else {
        size_t reads = (size_t)(bytes + kv); /* what a step reads: weights and KV cache */
        double memory = read_bandwidth(kr_threads(), (size_t)256 << 20);
        read[0] = read_bandwidth(kr_threads(), reads);
        for (int k = 0; k < SINGLE_ROUNDS; k++) {
            round_ms[k] = decode_step_ms(m, &s, L, 1, 0, reps);
            read[k + 1] = read_bandwidth(kr_threads(), reads);
            double near = read[k] > read[k + 1] ? read[k] : read[k + 1];
            ratio[k] = round_ms[k] / (bytes / (near * 1e6));
            ratio_kv[k] = round_ms[k] / (reads / (near * 1e6));
            if (!(near <= bw)) bw = near;
        }
        printf("read of %.1f MB, a step's weights and KV (%d threads), around %d single-path "
               "rounds:",
               reads / 1e6, kr_threads(), SINGLE_ROUNDS);
        for (int k = 0; k <= SINGLE_ROUNDS; k++)
            printf(" %.1f", read[k]);
        printf(" GB/s; the horizon's floor uses %.1f (a 256 MiB buffer: %.1f GB/s)\n", bw, memory);
        step1 = median3(round_ms);
    }
    double step30 = decode_step_ms(m, &s, L, 30, 0, reps);
    double step30mid =
        mid_horizon_fits(L, mc) ? decode_step_ms(m, &s, L, 30, MID_HORIZON, reps) : NAN;
    double det_ms = detok_ms(m, L + P, reps);
    if (!phases_cpu) {
        printf("again after the phases:\n");
        double again = yardstick();
        if (again > peak) peak = again;
        printf("the table's yardstick: %.1f GFLOP/s (the better of the two)\n", peak);
    }
    /* the ceilings: float32's products against the float32 yardstick (a reduced mode's
     * products are not held to it), each part's bytes at the bandwidth of the single-path
     * rounds; a cache's bytes each read once: the shared prefix once for all paths */
    double cbw = kr_model_weights(m) == KR_PREC_F32 ? bw : NAN;
    double kv_elt = kr_model_kv(m) == KR_PREC_BF16 ? 0.5 : 1.0;
#define KV(n) (kv_elt * kv_bytes(c, (n)))
    flop_count f_own = append_flops(c, mc - g, g), f_pre = append_flops(c, 0, mc - g);
    char name[96];
    printf("\n| phase | ms | GFLOP | GFLOP/s | of sgemm peak | ceiling |\n"
           "|---|---|---|---|---|---|\n");
    phase("prefill, lookback (1 cache)", pre_ms, work(append_flops(c, 0, L), bytes, KV(L)), peak,
          cbw);
    phase("cached decode step, 1 path", step1, work(step_flops(c, L + mid), bytes, KV(L + mid)),
          peak, NAN);
    phase("cached decode step, 30 paths", step30,
          work(flops_times(30, step_flops(c, L + mid)), bytes, KV(L) + 30 * KV(mid)), peak, cbw);
    snprintf(name, sizeof name, "cached decode step, 30 paths, %d tokens in", MID_HORIZON);
    if (!isnan(step30mid))
        phase(name, step30mid,
              work(flops_times(30, step_flops(c, L + MID_HORIZON + mid)), bytes,
                   KV(L) + 30 * KV(MID_HORIZON + mid)),
              peak, cbw);
    /* a recompute's products run twice: over the prefix, then over the paths' own rows */
    snprintf(name, sizeof name, "sliding recompute step, 1 path (%d + %d)", mc - g, g);
    phase(name, rpre_ms + own1_ms, work(flops_plus(f_pre, f_own), 2 * bytes, KV(mc)), peak, cbw);
    snprintf(name, sizeof name, "sliding recompute step, 30 paths (%d + 30 × %d)", mc - g, g);
    phase(name, rpre_ms + own30_ms,
          work(flops_plus(f_pre, flops_times(30, f_own)), 2 * bytes, KV(mc - g) + 30 * KV(g)), peak,
          cbw);
#undef KV
    snprintf(name, sizeof name, "tokenizer decode, %d tokens", L + P);
    phase(name, det_ms,
          work(detok_flops(tc, L + P), detok_weight_bytes(tc), detok_kv_bytes(tc, L + P)), peak,
          cbw);
    if (!isnan(cbw))
        printf("(ceiling: the share of the yardstick a phase reaches with its FLOPs at the "
               "yardstick, its products no faster than their weights and its attention than its "
               "keys and values at %.1f GB/s, one after the other; the single-path step is bound "
               "by memory, below)\n",
               cbw);
    /* the yardstick multiplies matrices that stay in the caches; a decode step's products
     * stream their weights from memory at a few rows: OpenBLAS on those, for scale */
    if (!phases_cpu) {
        printf("\n");
        step_products_line(c, 30, step30);
    }

    int diff = parity_check(m, &s, mc);
    printf("\nparity: horizon 12 from lookback %d (the window slides for 6 steps), KV-cached vs "
           "the reference path: %s\n",
           mc - 6, diff ? "DIFFERENT" : "the same forecast, bit for bit");
    if (diff) fprintf(stderr, "kronos-bench: %d numbers differ between the paths\n", diff);

    double floor_tok = bytes / (bw * 1e6);
    if (!phases_cpu) {
        printf("\nsingle-path decode: %.2f ms a token (the median of %d rounds: %.2f, %.2f, "
               "%.2f); %.1f MB of weights a token ÷ each round's bandwidth: %.2f×, %.2f×, "
               "%.2f× its floor, median %.2f×\n",
               step1, SINGLE_ROUNDS, round_ms[0], round_ms[1], round_ms[2], bytes / 1e6, ratio[0],
               ratio[1], ratio[2], median3(ratio));
        printf("  with the KV cache the step reads too (%.1f MB at %d positions): median %.2f× "
               "of (weights + KV) ÷ bandwidth\n",
               kv / 1e6, L + 8, median3(ratio_kv));
    }
    if (!decode_only) {
        double floor112 = 112 * floor_tok + append_flops(c, 0, L).all / (peak * 1e6);
        printf("horizon 112, 1 path: %.0f ms against a floor of %.0f ms (112 tokens' weights ÷ "
               "bandwidth + prefill FLOPs ÷ peak) = %.2f× the floor\n",
               cached1[0], floor112, cached1[0] / floor112);
    }
    kr_model_free(m);
    series_free(&s);
    return diff ? 1 : 0;
}
