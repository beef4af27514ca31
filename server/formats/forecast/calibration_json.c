/* calibration_json.c — the calibration object read and written (calibration_json.h). */
#include "calibration_json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "json_fields.h"
#include "json_out.h"

#define FORMAT_NAME   "kronosd-calibration"
#define METHOD_QUANTS "conformal-shift"
#define METHOD_UP     "isotonic"
#define MAX_SAMPLES   100000

static const char *const object_fields[] = {"format",  "version", "model",   "horizon",
                                            "samples", "origins", "methods", "quantiles",
                                            "grid",    "steps",   "columns", NULL};
static const char *const column_names[KR_CALIB_COLS + 1] = {"open", "high", "low", NULL};
static const char *const method_fields[] = {"quantiles", "prob_close_up", NULL};
static const char *const step_fields[] = {"shift", "up_x", "up_y", NULL};

static int required(const json_t *o, const char *key, const char *path, const json_t **out,
                    char *err, size_t errlen) {
    if (!(*out = kd_field(o, key))) return kd_fail(err, errlen, "%s: missing", path);
    return 0;
}

static int int_field(const json_t *o, const char *key, long long lo, long long hi, const char *rule,
                     int *out, char *err, size_t errlen) {
    char path[KD_PATH_LEN];
    const json_t *v;
    long long x;
    snprintf(path, sizeof path, "calibration.%s", key);
    if (required(o, key, path, &v, err, errlen) ||
        kd_get_int(v, path, lo, hi, rule, &x, err, errlen) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

/* The string field key must be `want`. */
static int name_field(const json_t *o, const char *key, const char *path, const char *want,
                      char *err, size_t errlen) {
    const json_t *v;
    char rule[64];
    if (required(o, key, path, &v, err, errlen)) return -1;
    snprintf(rule, sizeof rule, "\"%s\"", want);
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
        return kd_wrong(v, path, rule, err, errlen);
    return 0;
}

/* An array of at most max numbers into out; *n its length. */
static int numbers(const json_t *o, const char *key, const char *path, int max, double *out, int *n,
                   char *err, size_t errlen) {
    const json_t *a;
    char at[KD_PATH_LEN + 16];
    if (required(o, key, path, &a, err, errlen)) return -1;
    if (!json_is_array(a)) return kd_wrong(a, path, "an array of numbers", err, errlen);
    if (json_array_size(a) > (size_t)max)
        return kd_fail(err, errlen, "%s: at most %d values, got %zu", path, max,
                       json_array_size(a));
    for (size_t i = 0; i < json_array_size(a); i++) {
        snprintf(at, sizeof at, "%s[%zu]", path, i);
        if (kd_get_number(json_array_get(a, i), at, &out[i], err, errlen) < 0) return -1;
    }
    *n = (int)json_array_size(a);
    return 0;
}

static int parse_head(const json_t *v, kr_calibration *c, char *err, size_t errlen) {
    const json_t *m;
    if (name_field(v, "format", "calibration.format", FORMAT_NAME, err, errlen) ||
        int_field(v, "version", INT_MIN, INT_MAX, "an integer", &c->version, err, errlen) ||
        required(v, "model", "calibration.model", &m, err, errlen))
        return -1;
    if (!json_is_string(m) || json_string_length(m) >= KR_CALIB_MODEL)
        return kd_wrong(m, "calibration.model", "a model identifier (a string)", err, errlen);
    snprintf(c->model, sizeof c->model, "%s", json_string_value(m));
    if (int_field(v, "horizon", 1, 100000, "an integer in 1..100000", &c->horizon, err, errlen) ||
        int_field(v, "samples", 1, MAX_SAMPLES, "an integer in 1..100000", &c->samples, err,
                  errlen) ||
        int_field(v, "origins", INT_MIN, INT_MAX, "an integer", &c->fitted, err, errlen) ||
        required(v, "methods", "calibration.methods", &m, err, errlen))
        return -1;
    if (!json_is_object(m)) return kd_wrong(m, "calibration.methods", "an object", err, errlen);
    if (kd_check_fields(m, "calibration.methods: ", method_fields, err, errlen) < 0 ||
        name_field(m, "quantiles", "calibration.methods.quantiles", METHOD_QUANTS, err, errlen) ||
        name_field(m, "prob_close_up", "calibration.methods.prob_close_up", METHOD_UP, err, errlen))
        return -1;
    return numbers(v, "quantiles", "calibration.quantiles", KR_MAX_QUANTILES, c->levels,
                   &c->n_levels, err, errlen) ||
                   numbers(v, "grid", "calibration.grid", KR_CALIB_MAX_GRID, c->grid, &c->n_grid,
                           err, errlen)
               ? -1
               : 0;
}

static int parse_step(const json_t *s, kr_calibration *c, int h, char *err, size_t errlen) {
    char path[KD_PATH_LEN], where[KD_PATH_LEN + 2];
    int n = 0, ny = 0;
    snprintf(path, sizeof path, "calibration.steps[%d]", h);
    if (!json_is_object(s))
        return kd_wrong(s, path, "an object {\"shift\", \"up_x\", \"up_y\"}", err, errlen);
    snprintf(where, sizeof where, "%s: ", path);
    if (kd_check_fields(s, where, step_fields, err, errlen) < 0) return -1;
    snprintf(path, sizeof path, "calibration.steps[%d].shift", h);
    if (numbers(s, "shift", path, c->n_grid, c->shift + (size_t)h * c->n_grid, &n, err, errlen))
        return -1;
    if (n != c->n_grid)
        return kd_fail(err, errlen, "%s: must hold %d values (one per grid level), got %d", path,
                       c->n_grid, n);
    snprintf(path, sizeof path, "calibration.steps[%d].up_x", h);
    if (numbers(s, "up_x", path, c->up_cap, c->up_x + (size_t)h * c->up_cap, &n, err, errlen))
        return -1;
    snprintf(path, sizeof path, "calibration.steps[%d].up_y", h);
    if (numbers(s, "up_y", path, c->up_cap, c->up_y + (size_t)h * c->up_cap, &ny, err, errlen))
        return -1;
    if (ny != n)
        return kd_fail(err, errlen, "%s: must hold as many values as up_x (%d), got %d", path, n,
                       ny);
    c->up_n[h] = n;
    return 0;
}

/* "columns": {"open": [[grid] per step], "high": ..., "low": ...} into c->col_shift. */
static int parse_columns(const json_t *v, kr_calibration *c, char *err, size_t errlen) {
    if (!json_is_object(v))
        return kd_wrong(v, "calibration.columns", "an object {\"open\", \"high\", \"low\"}", err,
                        errlen);
    if (kd_check_fields(v, "calibration.columns: ", column_names, err, errlen) < 0) return -1;
    char path[KD_PATH_LEN];
    for (int j = 0; j < KR_CALIB_COLS; j++) {
        const json_t *steps;
        snprintf(path, sizeof path, "calibration.columns.%s", column_names[j]);
        if (required(v, column_names[j], path, &steps, err, errlen)) return -1;
        if (!json_is_array(steps) || json_array_size(steps) != (size_t)c->horizon)
            return kd_wrong(steps, path, "an array of horizon arrays of grid shifts", err, errlen);
        for (int h = 0; h < c->horizon; h++) {
            char at[KD_PATH_LEN + 16];
            int n = 0;
            snprintf(at, sizeof at, "%s[%d]", path, h);
            json_t *wrap = json_pack("{s:O}", "s", json_array_get(steps, (size_t)h));
            const int rc = wrap ? numbers(wrap, "s", at, c->n_grid,
                                          c->col_shift + ((size_t)j * c->horizon + h) * c->n_grid,
                                          &n, err, errlen)
                                : kd_fail(err, errlen, "%s: out of memory", at);
            json_decref(wrap);
            if (rc) return -1;
            if (n != c->n_grid)
                return kd_fail(err, errlen, "%s: must hold %d values (one per grid level), got %d",
                               at, c->n_grid, n);
        }
    }
    return 0;
}

int kd_calibration_parse(const json_t *v, kr_calibration *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(v))
        return kd_wrong(v, "calibration", "\"none\", \"rolling\" or a calibration object", err,
                        errlen);
    if (kd_check_fields(v, "calibration: ", object_fields, err, errlen) < 0 ||
        parse_head(v, c, err, errlen))
        return -1;
    const json_t *steps;
    if (required(v, "steps", "calibration.steps", &steps, err, errlen)) return -1;
    if (!json_is_array(steps))
        return kd_wrong(steps, "calibration.steps", "an array of steps", err, errlen);
    if (json_array_size(steps) != (size_t)c->horizon)
        return kd_fail(err, errlen, "calibration.steps: must hold horizon (%d) steps, got %zu",
                       c->horizon, json_array_size(steps));
    if (c->n_grid < 1) return kd_fail(err, errlen, "calibration.grid: must not be empty");
    /* room for the points the steps hold, so that memory follows the object's size */
    for (size_t h = 0; h < json_array_size(steps); h++) {
        const json_t *x = json_object_get(json_array_get(steps, h), "up_x");
        if (json_is_array(x) && json_array_size(x) > (size_t)c->up_cap)
            c->up_cap = (int)json_array_size(x);
    }
    if (c->up_cap < 1) c->up_cap = 1;
    const json_t *cols = kd_field(v, "columns");
    c->has_columns = cols != NULL; /* a version 1 object with them: the core's rules refuse it */
    kr_error ke = {0};
    if (kr_calibration_alloc(c, &ke)) return kd_fail(err, errlen, "%s", ke.msg);
    for (int h = 0; h < c->horizon; h++)
        if (parse_step(json_array_get(steps, (size_t)h), c, h, err, errlen)) return -1;
    return cols ? parse_columns(cols, c, err, errlen) : 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

static json_t *methods(void) {
    return json_pack("{s:s,s:s}", "quantiles", METHOD_QUANTS, "prob_close_up", METHOD_UP);
}

json_t *kd_calibration_summary_json(const kr_calibration *c) {
    return json_pack("{s:i,s:s,s:i,s:o}", "version", c->version, "model", c->model, "origins",
                     c->fitted, "methods", methods());
}

static json_t *columns_json(const kr_calibration *c) {
    json_t *o = json_object();
    for (int j = 0; o && j < KR_CALIB_COLS; j++) {
        json_t *steps = json_array();
        for (int h = 0; steps && h < c->horizon; h++)
            if (json_array_append_new(
                    steps, kd_json_reals(c->col_shift + ((size_t)j * c->horizon + h) * c->n_grid,
                                         c->n_grid)) < 0) {
                json_decref(steps);
                steps = NULL;
            }
        if (!steps || json_object_set_new(o, column_names[j], steps) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

json_t *kd_calibration_json(const kr_calibration *c) {
    json_t *steps = json_array();
    for (int h = 0; steps && h < c->horizon; h++) {
        const size_t u = (size_t)h * c->up_cap;
        json_t *s = json_pack("{s:o,s:o,s:o}", "shift",
                              kd_json_reals(c->shift + (size_t)h * c->n_grid, c->n_grid), "up_x",
                              kd_json_reals(c->up_x + u, c->up_n[h]), "up_y",
                              kd_json_reals(c->up_y + u, c->up_n[h]));
        if (json_array_append_new(steps, s) < 0) {
            json_decref(steps);
            return NULL;
        }
    }
    if (!steps) return NULL;
    json_t *o = json_pack("{s:s,s:i,s:s,s:i,s:i,s:i,s:o,s:o,s:o,s:o}", "format", FORMAT_NAME,
                          "version", c->version, "model", c->model, "horizon", c->horizon,
                          "samples", c->samples, "origins", c->fitted, "methods", methods(),
                          "quantiles", kd_json_reals(c->levels, c->n_levels), "grid",
                          kd_json_reals(c->grid, c->n_grid), "steps", steps);
    if (o && c->has_columns && json_object_set_new(o, "columns", columns_json(c)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
