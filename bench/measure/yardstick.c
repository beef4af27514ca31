/* yardstick.c — OpenBLAS's sgemm as the bench's yardstick (yardstick.h). */
#include "yardstick.h"
#include "blas_core.h"
#include "machine.h"
#include "work.h"

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

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
    double t0 = kb_wall_ms();
    while (kb_wall_ms() - t0 < 600 || iters < 5) { /* the fastest call: the peak */
        double t1 = kb_wall_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = kb_wall_ms() - t1;
        if (dt < best) best = dt;
        iters++;
    }
    free(a);
    free(b);
    free(c);
    return flops / (best * 1e6);
}

double kb_yardstick_here(void) {
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

double kb_yardstick(void) {
    const char *env_core = kb_blas_core(), *better = kb_blas_better_core_here();
    const char *set = getenv("OPENBLAS_CORETYPE");
    double here = kb_yardstick_here();
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

/* ---- OpenBLAS on a decode step's own products -------------------------------------------- */

/* The weight matrices a decode step multiplies, [out][in] each, in the step's order: per
 * layer q|k|v, o, w1|w3, w2; then the embedding fusion, the s1 head, the dependency layer's
 * k, v, o and the s2 head (kb_weight_bytes' matrices, one by one). Returns their count. */
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

double kb_step_products_ms(int rows, int layers, int d, int ff, int v1, int v2) {
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
        double t0 = kb_wall_ms();
        for (int pass = 0; pass < 4 || kb_wall_ms() - t0 < 600; pass++) {
            double t1 = kb_wall_ms();
            for (int i = 0; i < n; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, shape[i][0], shape[i][1],
                            1.0f, x, shape[i][1], w[i], shape[i][1], 0.0f, y, shape[i][0]);
            double dt = kb_wall_ms() - t1;
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

void kb_step_products_line(const kr_predictor_config *c, int rows, double kronosd_ms) {
    int layers = c->n_layers, d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits,
        v2 = 1 << c->s2_bits, shape[STEP_SHAPES_MAX][2];
    int n = step_shapes(layers, d, ff, v1, v2, shape);
    double flops = 0;
    for (int i = 0; i < n; i++)
        flops += 2.0 * rows * shape[i][0] * shape[i][1];
    const char *cores[2], *best_core = kb_blas_core();
    double best = kb_step_products_ms(rows, layers, d, ff, v1, v2);
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
           rows, n, kb_weight_bytes(c, KR_PREC_F32) / 1e6, best, best_core, flops / (best * 1e6),
           rows, kronosd_ms);
}
