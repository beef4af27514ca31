/* bench.c — how fast kronosd forecasts, measured in one run so that the ratios hold on a
 * shared, noisy machine.
 *
 *   kronos-bench --model DIR [--csv FILE] [--lookback N]  [--reps N] [--full] [--decode-only]
 *
 * Reports: ms per forecast, uncached reference vs KV-cached, horizons 112 (the window never
 * slides at max_context 512) and 120 (it slides for 8 steps), 1 and 30 sample paths;
 * batched decode GFLOP/s against OpenBLAS sgemm measured now; single-path ms per token
 * against the bytes of weights read per token. The reference at 30 paths takes many
 * minutes (its paths run one after another); it is measured only with --full, and
 * otherwise shown as 30 × its one-path time.
 */
#include "kronos.h"
#include "timefmt.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int n;
    int64_t *wall;
    double *col[KR_D_IN];
} series;

static double now_ms(void) {
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
    s->wall = malloc((size_t)cap * sizeof *s->wall);
    for (int c = 0; c < KR_D_IN; c++)
        s->col[c] = malloc((size_t)cap * sizeof(double));
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
    fclose(f);
    return -1;
}

/* ms of one forecast (the best of reps), lookback L from row 0 of the series. */
static double forecast_ms(const kr_model *m, const series *s, int L, int P, int samples,
                          bool use_cache, int reps, kr_forecast_result *keep) {
    kr_forecast_request r;
    kr_forecast_request_init(&r);
    r.n_context = L;
    r.timestamps = s->wall;
    for (int c = 0; c < KR_D_IN; c++)
        r.columns[c] = s->col[c];
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
        if (kr_forecast(m, NULL, &r, &res, &err)) {
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

/* GFLOP/s of sgemm C[M][N] = A[M][K] B[N][K]^T, the shape of a linear layer. */
static double sgemm_gflops(int M, int N, int K) {
    float *a = malloc((size_t)M * K * sizeof(float)), *b = malloc((size_t)N * K * sizeof(float));
    float *c = malloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        b[i] = (float)(i % 5) * 0.1f;
    double flops = 2.0 * M * N * K, spent = 0;
    int iters = 0;
    double t0 = now_ms();
    while ((spent = now_ms() - t0) < 400 || iters < 3) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        iters++;
    }
    free(a);
    free(b);
    free(c);
    return flops * iters / (spent * 1e6);
}

/* FLOPs of one decode step for one path at `keys` cached positions: every weight matrix
 * once (2 flops a weight), and attention over the keys. */
static double step_flops(const kr_predictor_config *c, int keys) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double per_layer = 4 * d * d + 3 * d * ff;
    double weights = c->n_layers * per_layer + 2 * d * d /* fusion */ + d * v1 +
                     4 * d * d /* dependency layer */ + d * v2;
    double attn = c->n_layers * 4.0 * keys * d + 4.0 * keys * d;
    return 2 * weights + attn;
}

static double weight_bytes(const kr_predictor_config *c) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double weights =
        c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d + d * v1 + 4 * d * d + d * v2;
    return 4 * weights;
}

/* Time per step of decoding S paths on caches holding `prefix` positions. */
static double decode_step_ms(const kr_model *m, const series *s, int prefix, int S, int steps) {
    kr_error err;
    kr_pool *pool = kr_pool_create(m, kr_pool_bytes_for(m, prefix + steps + 32) * (S + 1), &err);
    kr_cache *base = pool ? kr_cache_create(pool, 0, &err) : NULL;
    if (!base) {
        fprintf(stderr, "decode bench: %s\n", err.msg);
        exit(1);
    }
    int n = prefix + steps;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    kr_stamp *st = malloc((size_t)n * sizeof *st);
    for (int i = 0; i < n; i++) {
        s1[i] = (i * 37) % 1024;
        s2[i] = (i * 91) % 1024;
        st[i] = kr_stamp_from_wall(s->wall[i]);
    }
    if (kr_cache_append(&base, 1, s1, s2, st, prefix, NULL, &err)) exit(1);
    kr_cache **paths = malloc((size_t)S * sizeof *paths);
    for (int p = 0; p < S; p++)
        paths[p] = kr_cache_fork(base, &err);
    int v = 1 << kr_model_predictor_config(m)->s1_bits;
    float *l1 = malloc((size_t)S * v * sizeof(float)), *l2 = malloc((size_t)S * v * sizeof(float));
    int32_t *a = malloc((size_t)S * sizeof *a), *b = malloc((size_t)S * sizeof *b);
    kr_stamp *sts = malloc((size_t)S * sizeof *sts);
    double t0 = now_ms();
    for (int k = 0; k < steps; k++) {
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
    }
    double per_step = (now_ms() - t0) / steps;
    for (int p = 0; p < S; p++)
        kr_cache_free(paths[p]);
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
    return per_step;
}

int main(int argc, char **argv) {
    const char *model = NULL, *csv = "tests/data/kline_5min.csv";
    int L = 400, reps = 2;
    bool full = false, decode_only = false, cached_only = false;
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
        else {
            fprintf(stderr,
                    "usage: kronos-bench --model DIR [--csv FILE] [--lookback N] [--reps N] "
                    "[--full] [--decode-only] [--cached-only]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "kronos-bench: --model DIR is required (make one with kronos-mkmodel)\n");
        return 2;
    }
    char tok[1024], pred[1024];
    snprintf(tok, sizeof tok, "%s/tokenizer", model);
    snprintf(pred, sizeof pred, "%s/predictor", model);
    kr_model_paths paths = {tok, pred, 512};
    kr_error err;
    kr_model *m = kr_model_load(&paths, &err);
    if (!m) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    series s;
    if (read_csv(csv, &s) || s.n < L + 120) {
        fprintf(stderr, "kronos-bench: %s: need %d rows\n", csv, L + 120);
        return 1;
    }
    const kr_predictor_config *c = kr_model_predictor_config(m);
    printf("model: d_model %d, %d layers, %d heads, ff %d; %zu parameters; max_context 512\n",
           c->d_model, c->n_layers, c->n_heads, c->ff_dim, kr_model_param_count(m));
    printf("data: %s, lookback %d, best of %d runs (cached)\n\n", csv, L, reps);

    printf(
        "| horizon | paths | reference ms | cached ms | speed-up | cached / recomputed steps |\n");
    printf("|---|---|---|---|---|---|\n");
    int horizons[2] = {112, 120}, samples[2] = {1, 30};
    double ref1[2] = {0}, cached1[2] = {0}, cached30[2] = {0};
    for (int h = 0; h < 2 && !decode_only; h++)
        for (int k = 0; k < 2; k++) {
            int P = horizons[h], S = samples[k];
            kr_forecast_result res;
            double cached = forecast_ms(m, &s, L, P, S, true, reps, &res);
            double ref;
            const char *note = "";
            if (cached_only) {
                ref = NAN;
            } else if (S == 1 || full) {
                ref = forecast_ms(m, &s, L, P, S, false, 1, NULL);
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
        printf("\n30 paths cost %.2f× one path (horizon 112), %.2f× (horizon 120)\n",
               cached30[0] / cached1[0], cached30[1] / cached1[1]);

    int d = c->d_model;
    /* the machine's sgemm with OpenBLAS's own threads, one per CPU (the core itself runs
     * BLAS single-threaded and parallelises with its own pool) */
    openblas_set_num_threads(openblas_get_num_procs());
    double peak = sgemm_gflops(1024, 1024, 1024);
    double shape30 = sgemm_gflops(30, c->ff_dim, d);
    openblas_set_num_threads(1);
    double step30 = decode_step_ms(m, &s, L, 30, 16);
    double step1 = decode_step_ms(m, &s, L, 1, 16);
    double f30 = 30 * step_flops(c, L + 8), f1 = step_flops(c, L + 8);
    printf("\nOpenBLAS sgemm: %.1f GFLOP/s at 1024×1024×1024, %.1f GFLOP/s at 30×%d×%d\n", peak,
           shape30, c->ff_dim, d);
    printf("batched decode, 30 paths: %.1f ms a step, %.1f GFLOP/s = %.0f%% of sgemm peak\n",
           step30, f30 / (step30 * 1e6), 100 * f30 / (step30 * 1e6) / peak);
    double bytes = weight_bytes(c);
    printf("single path: %.2f ms a token, %.1f GFLOP/s; %.1f MB of weights a token = %.1f GB/s\n",
           step1, f1 / (step1 * 1e6), bytes / 1e6, bytes / (step1 * 1e6));
    kr_model_free(m);
    for (int k = 0; k < KR_D_IN; k++)
        free(s.col[k]);
    free(s.wall);
    return 0;
}
