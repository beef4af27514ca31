/* calib_bench.c — what calibration adds to one forecast, apart from the forecast itself: a
 * forecast of the example series' last 512 candles (horizon 8, 16 paths, quantiles 0.1, 0.5,
 * 0.9) is made once, then its JSON answer is made without and with a calibration object
 * (kd_forecast_response_json: the calibrated close, the raw one moved to "raw"), alternating,
 * and a live session's own work per forecast and candle timed (kr_calib_online_keep and
 * _resolve past the warm-up). Medians of RUNS rounds of ITERS calls each, in microseconds.
 *
 *   kronos-calib-bench MODEL_DIR CSV [RUNS] [ITERS] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_stats.h"
#include "forecast_json.h"
#include "kronos.h"

#define N_CTX    512
#define MAX_ROWS 4096

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The CSV's rows (timestamps as Unix seconds of "YYYY-MM-DD HH:MM:SS", as UTC). */
static int read_csv(const char *path, int64_t *ts, double *cols[KR_D_IN]) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    if (!fgets(line, sizeof line, f)) n = -1;
    while (n >= 0 && n < MAX_ROWS && fgets(line, sizeof line, f)) {
        struct tm tm = {0};
        double v[KR_D_IN];
        if (sscanf(line, "%d-%d-%d %d:%d:%d,%lf,%lf,%lf,%lf,%lf,%lf", &tm.tm_year, &tm.tm_mon,
                   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5]) != 12)
            continue;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        ts[n] = (int64_t)timegm(&tm);
        for (int c = 0; c < KR_D_IN; c++)
            cols[c][n] = v[c];
        n++;
    }
    fclose(f);
    return n;
}

/* Median microseconds per call of the JSON answer, with the calibration or without. */
static double answer_us(kd_forecast_input *in, kr_forecast_result *res, kr_calibration *cal,
                        int iters) {
    /* without calibration the paths are not asked for, so not answered; with it they are
     * computed for the calibration and not answered either */
    double *paths = res->paths;
    if (!cal) res->paths = NULL;
    in->calibration = cal;
    const double t0 = now_us();
    for (int i = 0; i < iters; i++)
        json_decref(kd_forecast_response_json(in, res));
    in->calibration = NULL;
    res->paths = paths;
    return (now_us() - t0) / iters;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR CSV [RUNS] [ITERS]\n", argv[0]);
        return 2;
    }
    const int runs = argc > 3 ? atoi(argv[3]) : 7, iters = argc > 4 ? atoi(argv[4]) : 2000;
    char tok[1024], pred[1024];
    snprintf(tok, sizeof tok, "%s/tokenizer", argv[1]);
    snprintf(pred, sizeof pred, "%s/predictor", argv[1]);
    kr_model_paths paths = {.tokenizer_dir = tok, .predictor_dir = pred, .max_context = N_CTX};
    kr_error err = {0};
    kr_model *m = kr_model_load(&paths, &err);
    kr_pool *pool = m ? kr_pool_create(m, (size_t)256 << 20, &err) : NULL;
    static int64_t ts[MAX_ROWS];
    static double col[KR_D_IN][MAX_ROWS];
    double *cols[KR_D_IN];
    for (int c = 0; c < KR_D_IN; c++)
        cols[c] = col[c];
    const int rows = read_csv(argv[2], ts, cols);
    if (!pool || rows < N_CTX) {
        fprintf(stderr, "%s\n", pool ? "the CSV holds too few rows" : err.msg);
        return 1;
    }
    kd_forecast_input in = {0};
    kr_forecast_request *q = &in.req;
    kr_forecast_request_init(q);
    q->context.n = N_CTX;
    q->context.timestamps = ts + rows - N_CTX;
    for (int c = 0; c < KR_D_IN; c++)
        q->context.columns[c] = cols[c] + rows - N_CTX;
    q->horizon = 8;
    q->samples = 16;
    q->seed = 1;
    q->return_paths = true;
    q->n_quantiles = 3;
    q->quantiles[0] = 0.1, q->quantiles[1] = 0.5, q->quantiles[2] = 0.9;
    kr_forecast_result res;
    const double f0 = now_us();
    if (kr_forecast(m, pool, q, &res, &err) < 0) {
        fprintf(stderr, "forecast: %s\n", err.msg);
        return 1;
    }
    const double forecast_us = now_us() - f0;
    kr_calibration cal;
    if (kr_calibration_init(&cal, "bench", 8, 16, q->quantiles, 3, &err) < 0) return 1;
    cal.fitted = 100;
    for (int i = 0; i < 8 * cal.n_grid; i++)
        cal.shift[i] = 0.0001 * (i % cal.n_grid - 50);
    /* a live session past its warm-up: the work each forecast (keep) and candle (resolve) adds */
    kr_calib_online *o = kr_calib_online_new(&cal, &err);
    double *sorted = malloc(8 * 16 * sizeof *sorted);
    if (!o || !sorted) return 1;
    kr_forecast_sorted_close(&res, sorted);
    kr_online_outcome out;
    const double last = q->context.columns[KR_CLOSE][N_CTX - 1];
    for (long i = 0; i < 2 * KR_ONLINE_WINDOW; i++) {
        kr_calib_online_keep(o, i, last, sorted, res.prob_close_up, &err);
        kr_calib_online_resolve(o, i, last * (1 + 0.001 * (double)(i % 7 - 3)), &out, &err);
    }
    double plain[64], calibrated[64], online[64];
    for (int r = 0; r < runs && r < 64; r++) {
        plain[r] = answer_us(&in, &res, NULL, iters);
        calibrated[r] = answer_us(&in, &res, &cal, iters);
        const double t0 = now_us();
        for (long i = 0; i < iters; i++) {
            const long k = 2 * KR_ONLINE_WINDOW + (long)r * iters + i;
            kr_calib_online_keep(o, k, last, sorted, res.prob_close_up, &err);
            kr_calib_online_resolve(o, k, last * (1 + 0.001 * (double)(k % 7 - 3)), &out, &err);
        }
        online[r] = (now_us() - t0) / iters;
    }
    const int n = runs < 64 ? runs : 64;
    const double a = kb_median(plain, n), b = kb_median(calibrated, n), c = kb_median(online, n);
    printf("the forecast itself (once, cold): %.0f us\n", forecast_us);
    printf("answer without calibration %.1f us, with an object %.1f us: calibration adds %.1f us "
           "(%.3f ms; target < 0.1 ms)\n",
           a, b, b - a, (b - a) / 1000);
    printf("a live session's own work per forecast and candle (keep + resolve, 8 steps): "
           "%.1f us\n",
           c);
    kr_calib_online_free(o);
    free(sorted);
    kr_calibration_free(&cal);
    kr_forecast_result_free(&res);
    kr_pool_free(pool);
    kr_model_free(m);
    return 0;
}
