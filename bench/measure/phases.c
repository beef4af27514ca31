/* phases.c — the bench's timed phases (phases.h). */
#include "phases.h"
#include "bench_stats.h"
#include "machine.h"
#include "timefmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void kb_series_free(kb_series *s) {
    for (int c = 0; c < KR_D_IN; c++)
        free(s->col[c]);
    free(s->wall);
    memset(s, 0, sizeof *s);
}

/* --phases-cpu times with the process's CPU time (all its threads, the kernel's page faults
 * included): what a neighbour's load disturbs least, with KRONOS_THREADS=1 one core's work. */
static clockid_t phase_clock = CLOCK_MONOTONIC;

void kb_phases_in_cpu_time(void) {
    phase_clock = CLOCK_PROCESS_CPUTIME_ID;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(phase_clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int kb_read_csv(const char *path, kb_series *s) {
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
        kb_series_free(s);
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
    kb_series_free(s);
    fclose(f);
    return -1;
}

/* A forecast of horizon P from the series' first L candles, its future stamps the next P. */
static kr_forecast_request request_from(const kb_series *s, int L, int P) {
    kr_forecast_request r;
    kr_forecast_request_init(&r);
    r.context.n = L;
    r.context.timestamps = s->wall;
    for (int c = 0; c < KR_D_IN; c++)
        r.context.columns[c] = s->col[c];
    r.horizon = P;
    r.future_timestamps = s->wall + L;
    return r;
}

/* n token pairs spread over the codes (any pair does the same work), with the series' time
 * stamps when st is not NULL. */
static void fill_tokens(const kb_series *s, int n, int32_t *s1, int32_t *s2, kr_stamp *st) {
    for (int i = 0; i < n; i++) {
        s1[i] = (i * 37) % 1024;
        s2[i] = (i * 91) % 1024;
        if (st) st[i] = kr_stamp_from_wall(s->wall[i]);
    }
}

double kb_forecast_ms(const kr_model *m, kr_pool *pool, const kb_series *s, int L, int P,
                      int samples, bool use_cache, int reps, kr_forecast_result *keep) {
    kr_forecast_request r = request_from(s, L, P);
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

bool kb_mid_horizon_fits(int L, int mc) {
    return L + KB_MID_HORIZON + KB_TIMED_STEPS <= mc;
}

double kb_decode_step_ms(const kr_model *m, const kb_series *s, int prefix, int S, int skip,
                         int rounds) {
    kr_error err;
    int steps = KB_TIMED_STEPS, n = prefix + skip + steps;
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
    fill_tokens(s, n, s1, s2, st);
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

void kb_window_ms(const kr_model *m, const kb_series *s, int prefix, int g, int S, int reps,
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
    fill_tokens(s, n, s1, s2, st); /* the context; each path's own tokens follow it */
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
    double start = kb_wall_ms();
    for (int k = -1; k < reps || kb_wall_ms() - start < 300; k++) { /* k = -1: the warm-up */
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

double kb_detok_ms(const kr_model *m, int n, int reps) {
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    float *out = malloc((size_t)n * KR_D_IN * sizeof(float));
    if (!s1 || !s2 || !out) exit(1);
    fill_tokens(NULL, n, s1, s2, NULL);
    double best = INFINITY, start = kb_wall_ms();
    for (int k = -1; k < reps || kb_wall_ms() - start < 300; k++) { /* k = -1: the warm-up */
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

int kb_parity_check(const kr_model *m, const kb_series *s, int mc) {
    int L = mc - 6, P = 12, n_diff = 0;
    kr_forecast_result a, b;
    kr_forecast_request r = request_from(s, L, P);
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
