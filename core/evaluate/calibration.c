/* calibration.c — the calibration object (kr_calibration, kronos.h): its grid, its rules,
 * whether it fits a request, and a forecast's close calibrated by it. Fitting is the
 * evaluation's (eval_calibrated.c); the arithmetic is calib_math.c's. */
#include "evaluate_impl.h"

#include "base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int kr_calib_columns[KR_CALIB_COLS] = {KR_OPEN, KR_HIGH, KR_LOW};

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

bool kr_calib_is_fine(double level) {
    const long i = lround(level * 100);
    return i >= 1 && i <= KR_CALIB_FINE && (double)i / 100.0 == level;
}

int kr_calibration_grid(const double *levels, int n, double grid[KR_CALIB_MAX_GRID]) {
    int G = 0;
    for (int i = 1; i <= KR_CALIB_FINE; i++)
        grid[G++] = (double)i / 100.0;
    for (int q = 0; q < n && q < KR_MAX_QUANTILES; q++)
        if (!kr_calib_is_fine(levels[q])) grid[G++] = levels[q];
    qsort(grid, (size_t)G, sizeof *grid, cmp_double);
    int out = 0; /* the request's levels are distinct; a repeat is dropped all the same */
    for (int g = 0; g < G; g++)
        if (out == 0 || grid[g] != grid[out - 1]) grid[out++] = grid[g];
    return out;
}

int kr_calib_level_index(const kr_calibration *c, double level) {
    for (int g = 0; g < c->n_grid; g++)
        if (c->grid[g] == level) return g;
    return -1;
}

void kr_calibration_free(kr_calibration *c) {
    if (!c) return;
    KR_FREE_ALL(c->shift, c->up_n, c->up_x, c->up_y, c->col_shift);
    memset(c, 0, sizeof *c);
}

int kr_calibration_alloc(kr_calibration *c, kr_error *err) {
    c->shift = NULL;
    c->up_n = NULL;
    c->up_x = c->up_y = c->col_shift = NULL;
    if (c->horizon < 1 || c->samples < 1 || c->n_grid < 1 || c->n_grid > KR_CALIB_MAX_GRID)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration: horizon %d, samples %d, %d grid levels: out of range",
                            c->horizon, c->samples, c->n_grid);
    if (c->up_cap < 1) c->up_cap = c->samples + 1;
    const size_t P = (size_t)c->horizon, U = (size_t)c->up_cap;
    c->shift = calloc(P * (size_t)c->n_grid, sizeof *c->shift);
    c->up_n = calloc(P, sizeof *c->up_n);
    c->up_x = calloc(P * U, sizeof *c->up_x);
    c->up_y = calloc(P * U, sizeof *c->up_y);
    if (c->has_columns)
        c->col_shift = calloc(KR_CALIB_COLS * P * (size_t)c->n_grid, sizeof *c->col_shift);
    if (c->shift && c->up_n && c->up_x && c->up_y && (!c->has_columns || c->col_shift)) return 0;
    kr_calibration_free(c);
    return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory for %d steps", (int)P);
}

int kr_calibration_init(kr_calibration *c, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err) {
    memset(c, 0, sizeof *c);
    if (horizon < 1 || samples < 1 || n_levels < 0 || n_levels > KR_MAX_QUANTILES)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration: horizon %d, samples %d, %d levels: out of range", horizon,
                            samples, n_levels);
    c->version = KR_CALIB_VERSION;
    snprintf(c->model, sizeof c->model, "%s", model ? model : "");
    c->horizon = horizon;
    c->samples = samples;
    c->n_levels = n_levels;
    if (n_levels) memcpy(c->levels, levels, (size_t)n_levels * sizeof *levels);
    c->n_grid = kr_calibration_grid(levels, n_levels, c->grid);
    if (kr_calibration_alloc(c, err)) return -1;
    for (int h = 0; h < horizon; h++) { /* the identity */
        c->up_n[h] = 2;
        c->up_x[(size_t)h * c->up_cap + 1] = c->up_y[(size_t)h * c->up_cap + 1] = 1;
    }
    return 0;
}

int kr_calibration_copy(kr_calibration *dst, const kr_calibration *src, kr_error *err) {
    *dst = *src;
    if (kr_calibration_alloc(dst, err)) return -1;
    const size_t P = (size_t)src->horizon, U = (size_t)src->up_cap;
    memcpy(dst->shift, src->shift, P * (size_t)src->n_grid * sizeof *dst->shift);
    memcpy(dst->up_n, src->up_n, P * sizeof *dst->up_n);
    memcpy(dst->up_x, src->up_x, P * U * sizeof *dst->up_x);
    memcpy(dst->up_y, src->up_y, P * U * sizeof *dst->up_y);
    if (src->has_columns)
        memcpy(dst->col_shift, src->col_shift,
               KR_CALIB_COLS * P * (size_t)src->n_grid * sizeof *dst->col_shift);
    return 0;
}

/* ---- rules ---------------------------------------------------------------------------------- */

static int check_levels(const kr_calibration *c, kr_error *err) {
    if (c->n_levels < 0 || c->n_levels > KR_MAX_QUANTILES)
        return kr_fail_code(err, KR_E_INVALID, "calibration.quantiles: at most %d levels, got %d",
                            KR_MAX_QUANTILES, c->n_levels);
    for (int q = 0; q < c->n_levels; q++) {
        if (!(c->levels[q] >= 0 && c->levels[q] <= 1))
            return kr_fail_code(err, KR_E_INVALID,
                                "calibration.quantiles[%d]: must be in [0, 1], got %g", q,
                                c->levels[q]);
        for (int p = 0; p < q; p++)
            if (c->levels[p] == c->levels[q])
                return kr_fail_code(err, KR_E_INVALID,
                                    "calibration.quantiles[%d]: %g is already quantiles[%d]", q,
                                    c->levels[q], p);
    }
    double grid[KR_CALIB_MAX_GRID];
    const int G = kr_calibration_grid(c->levels, c->n_levels, grid);
    if (c->n_grid != G)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.grid: must hold %d levels (the quantiles and 0.01 .. "
                            "0.99, ascending), got %d",
                            G, c->n_grid);
    for (int g = 0; g < G; g++)
        if (c->grid[g] != grid[g])
            return kr_fail_code(err, KR_E_INVALID,
                                "calibration.grid[%d]: must be %.17g (the quantiles and 0.01 .. "
                                "0.99, ascending), got %.17g",
                                g, grid[g], c->grid[g]);
    return 0;
}

static int check_step(const kr_calibration *c, int h, kr_error *err) {
    for (int g = 0; g < c->n_grid; g++)
        if (!isfinite(c->shift[(size_t)h * c->n_grid + g]))
            return kr_fail_code(err, KR_E_INVALID,
                                "calibration.steps[%d].shift[%d]: must be a finite number", h, g);
    const int n = c->up_n[h];
    if (n < 1 || n > c->up_cap || n > c->samples + 1)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.steps[%d].up_x: must hold 1 to %d points (samples + 1), "
                            "got %d",
                            h, c->samples + 1, n);
    const double *x = c->up_x + (size_t)h * c->up_cap, *y = c->up_y + (size_t)h * c->up_cap;
    for (int i = 0; i < n; i++) {
        if (!(x[i] >= 0 && x[i] <= 1) || (i > 0 && !(x[i] > x[i - 1])))
            return kr_fail_code(err, KR_E_INVALID,
                                "calibration.steps[%d].up_x[%d]: must be in [0, 1] and above the "
                                "point before, got %g",
                                h, i, x[i]);
        if (!(y[i] >= 0 && y[i] <= 1) || (i > 0 && !(y[i] >= y[i - 1])))
            return kr_fail_code(err, KR_E_INVALID,
                                "calibration.steps[%d].up_y[%d]: must be in [0, 1] and not below "
                                "the point before, got %g",
                                h, i, y[i]);
    }
    return 0;
}

static int check_columns(const kr_calibration *c, kr_error *err) {
    if (!c->has_columns) return 0;
    static const char *const names[KR_CALIB_COLS] = {"open", "high", "low"};
    const size_t G = (size_t)c->n_grid;
    for (int j = 0; j < KR_CALIB_COLS; j++)
        for (int h = 0; h < c->horizon; h++)
            for (size_t g = 0; g < G; g++)
                if (!isfinite(c->col_shift[((size_t)j * c->horizon + h) * G + g]))
                    return kr_fail_code(err, KR_E_INVALID,
                                        "calibration.columns.%s[%d][%zu]: must be a finite number",
                                        names[j], h, g);
    return 0;
}

int kr_calibration_check(const kr_calibration *c, kr_error *err) {
    if (c->version != 1 && c->version != KR_CALIB_VERSION)
        return kr_fail_code(err, KR_E_INVALID, "calibration.version: must be 1 or %d, got %d",
                            KR_CALIB_VERSION, c->version);
    if (c->version == 1 && c->has_columns)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.columns: a version 1 object calibrates close only");
    if (c->horizon < 1)
        return kr_fail_code(err, KR_E_INVALID, "calibration.horizon: must be >= 1, got %d",
                            c->horizon);
    if (c->samples < 1 || c->up_cap < 1)
        return kr_fail_code(err, KR_E_INVALID, "calibration.samples: must be >= 1, got %d",
                            c->samples);
    if (c->fitted < 1)
        return kr_fail_code(err, KR_E_INVALID, "calibration.origins: must be >= 1, got %d",
                            c->fitted);
    if (check_levels(c, err)) return -1;
    if (!c->shift || !c->up_n || !c->up_x || !c->up_y)
        return kr_fail_code(err, KR_E_INVALID, "calibration.steps: missing");
    if (c->has_columns && !c->col_shift)
        return kr_fail_code(err, KR_E_INVALID, "calibration.columns: missing");
    for (int h = 0; h < c->horizon; h++)
        if (check_step(c, h, err)) return -1;
    return check_columns(c, err);
}

static void levels_text(const double *v, int n, char *out, size_t len) {
    size_t at = (size_t)snprintf(out, len, "[");
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%g", i ? ", " : "", v[i]);
    if (at < len) snprintf(out + at, len - at, "]");
}

int kr_calibration_match(const kr_calibration *c, const char *model, int horizon, int samples,
                         const double *levels, int n_levels, kr_error *err) {
    if (model && strcmp(c->model, model) != 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.model: fitted on model \"%s\"; this model is \"%s\"",
                            c->model, model);
    if (c->horizon != horizon)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.horizon: must be %d (the request's horizon), got %d",
                            horizon, c->horizon);
    if (c->samples != samples)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.samples: must be %d (the request's samples), got %d",
                            samples, c->samples);
    bool same = c->n_levels == n_levels;
    /* at float32 precision, as an answer writes the levels */
    for (int q = 0; same && q < n_levels; q++)
        same = (float)c->levels[q] == (float)levels[q];
    if (!same) {
        char want[256], got[256];
        levels_text(levels, n_levels, want, sizeof want);
        levels_text(c->levels, c->n_levels, got, sizeof got);
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration.quantiles: must be %s (the request's quantiles), got %s",
                            want, got);
    }
    return 0;
}

/* ---- a forecast calibrated ------------------------------------------------------------------ */

void kr_calibrated_free(kr_calibrated *out) {
    if (!out) return;
    free(out->quantiles);
    free(out->prob_close_up);
    free(out->col_quantiles);
    memset(out, 0, sizeof *out);
}

void kr_calib_step(const kr_calibration *c, int h, const double *sorted, int S, double last,
                   double raw_p_up, double *raw_grid, double *cal_grid, double *p_up) {
    for (int g = 0; g < c->n_grid; g++)
        raw_grid[g] = kr_quantile_linear(sorted, S, c->grid[g]);
    kr_calib_shifted(raw_grid, c->n_grid, last, c->shift + (size_t)h * c->n_grid, cal_grid);
    *p_up = kr_isotonic_at(c->up_x + (size_t)h * c->up_cap, c->up_y + (size_t)h * c->up_cap,
                           c->up_n[h], raw_p_up);
}

void kr_calib_column_step(const kr_calibration *c, int j, int h, const double *sorted, int S,
                          double last, double *raw_grid, double *cal_grid) {
    for (int g = 0; g < c->n_grid; g++)
        raw_grid[g] = kr_quantile_linear(sorted, S, c->grid[g]);
    kr_calib_shifted(raw_grid, c->n_grid, last,
                     c->col_shift + ((size_t)j * c->horizon + h) * c->n_grid, cal_grid);
}

int kr_calibrate_forecast(const kr_calibration *c, const kr_forecast_request *req,
                          const kr_forecast_result *res, kr_calibrated *out, kr_error *err) {
    memset(out, 0, sizeof *out);
    const int P = res->horizon, S = res->samples, Q = c->n_levels, G = c->n_grid;
    if (!res->paths || !res->prob_close_up || P != c->horizon || S != c->samples ||
        req->context.n < 1)
        return kr_fail(err, "calibration: the forecast is not one this calibration fits");
    out->horizon = P;
    out->n_levels = Q;
    memcpy(out->levels, c->levels, sizeof out->levels);
    out->quantiles = malloc(((size_t)Q ? (size_t)Q : 1) * P * sizeof *out->quantiles);
    out->prob_close_up = malloc((size_t)P * sizeof *out->prob_close_up);
    if (c->has_columns)
        out->col_quantiles =
            malloc(KR_CALIB_COLS * ((size_t)Q ? (size_t)Q : 1) * P * sizeof *out->col_quantiles);
    double *buf = malloc(((size_t)S + 2 * (size_t)G) * sizeof *buf);
    if (!out->quantiles || !out->prob_close_up || !buf || (c->has_columns && !out->col_quantiles)) {
        free(buf);
        kr_calibrated_free(out);
        return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
    }
    double *sorted = buf, *raw = buf + S, *cal = raw + G;
    const double last = req->context.columns[KR_CLOSE][req->context.n - 1];
    for (int h = 0; h < P; h++) {
        for (int p = 0; p < S; p++)
            sorted[p] = res->paths[((size_t)p * KR_D_IN + KR_CLOSE) * P + h];
        qsort(sorted, (size_t)S, sizeof *sorted, cmp_double);
        kr_calib_step(c, h, sorted, S, last, res->prob_close_up[h], raw, cal,
                      &out->prob_close_up[h]);
        for (int q = 0; q < Q; q++)
            out->quantiles[(size_t)q * P + h] = cal[kr_calib_level_index(c, c->levels[q])];
        for (int j = 0; c->has_columns && j < KR_CALIB_COLS; j++) {
            for (int p = 0; p < S; p++)
                sorted[p] = res->paths[((size_t)p * KR_D_IN + kr_calib_columns[j]) * P + h];
            qsort(sorted, (size_t)S, sizeof *sorted, cmp_double);
            kr_calib_column_step(c, j, h, sorted, S, last, raw, cal);
            for (int q = 0; q < Q; q++)
                out->col_quantiles[((size_t)j * Q + q) * P + h] =
                    cal[kr_calib_level_index(c, c->levels[q])];
        }
    }
    free(buf);
    return 0;
}
