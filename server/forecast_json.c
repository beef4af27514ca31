/* forecast_json.c — parse a forecast request, write a forecast response. */
#include "forecast_json.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"

const kd_forecast_limits kd_forecast_default_limits = {100000, 10000, 1000};

#define PATH_LEN  64 /* "candles[123456].timestamp", "future_timestamps[12345]" */
#define DESC_LEN  96 /* a described JSON value: `the string "..."` */
#define QUOTE_MAX 40 /* bytes of a client's string repeated in a message */

/* ---- messages ----------------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A client's string made safe for a one-line message: at most QUOTE_MAX bytes, cut on a
 * UTF-8 boundary, control characters, quotes and backslashes as '?'. */
static void quote(const char *s, char *out, size_t n) {
    size_t len = strlen(s), k = len > QUOTE_MAX ? QUOTE_MAX : len, j = 0;
    while (k > 0 && k < len && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    for (size_t i = 0; i < k && j + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[j++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    out[j] = '\0';
    if (k < len && j + 4 < n) strcat(out, "...");
}

/* What a JSON value is, for "got ...": `the string "NaN"`, `1.5`, `null`, `an array`. */
static const char *describe(const json_t *v, char *buf, size_t n) {
    char q[QUOTE_MAX * 2];
    switch (json_typeof(v)) {
    case JSON_STRING:
        quote(json_string_value(v), q, sizeof q);
        snprintf(buf, n, "the string \"%s\"", q);
        return buf;
    case JSON_INTEGER:
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    case JSON_REAL:
        snprintf(buf, n, "%g", json_real_value(v));
        return buf;
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    }
    return "an unknown value";
}

static int wrong(const json_t *v, const char *path, const char *rule, char *err, size_t errlen) {
    char d[DESC_LEN];
    return fail(err, errlen, "%s: must be %s, got %s", path, rule, describe(v, d, sizeof d));
}

/* A field of an object; a JSON null counts as absent. */
static const json_t *field(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* ---- scalars ------------------------------------------------------------------------ */

/* A finite JSON number: integer or real. */
static int get_number(const json_t *v, const char *path, double *out, char *err, size_t errlen) {
    if (!json_is_number(v)) return wrong(v, path, "a number", err, errlen);
    const double x = json_number_value(v);
    /* Strict JSON cannot carry these, but a caller may build a json_t by other means. */
    if (isnan(x)) return fail(err, errlen, "%s: NaN is not allowed", path);
    if (isinf(x)) return fail(err, errlen, "%s: infinity is not allowed", path);
    *out = x;
    return 0;
}

/* An optional integer field in [lo, hi]; *out is left alone when absent. */
static int opt_int(const json_t *body, const char *key, long long lo, long long hi,
                   const char *rule, long long *out, char *err, size_t errlen) {
    const json_t *v = field(body, key);
    if (!v) return 0;
    if (!json_is_integer(v)) return wrong(v, key, rule, err, errlen);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) return wrong(v, key, rule, err, errlen);
    *out = x;
    return 0;
}

/* An optional number field; ok() decides the range. */
static int opt_real(const json_t *body, const char *key, bool (*ok)(double), const char *rule,
                    double *out, char *err, size_t errlen) {
    const json_t *v = field(body, key);
    if (!v) return 0;
    if (!json_is_number(v) || !ok(json_number_value(v))) return wrong(v, key, rule, err, errlen);
    *out = json_number_value(v);
    return 0;
}

static int opt_bool(const json_t *body, const char *key, bool *out, char *err, size_t errlen) {
    const json_t *v = field(body, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return wrong(v, key, "true or false", err, errlen);
    *out = json_is_true(v);
    return 0;
}

static bool positive_finite(double x) {
    return isfinite(x) && x > 0;
}

static bool in_open_unit(double x) {
    return x > 0 && x <= 1;
}

static bool in_unit(double x) {
    return x >= 0 && x <= 1;
}

/* ---- timestamps --------------------------------------------------------------------- */

/* An ISO 8601 string or Unix seconds; *form says how it was written. */
static int get_timestamp(const json_t *v, const char *path, int64_t *wall, kd_time_form *form,
                         char *err, size_t errlen) {
    char why[128], q[QUOTE_MAX * 2];
    kd_time_form f = {0};
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (kd_parse_timestamp(s, wall, &f.tz_offset_min, &f.has_tz, why, sizeof why) < 0) {
            quote(s, q, sizeof q);
            return fail(err, errlen, "%s: \"%s\" is not a valid timestamp (%s)", path, q, why);
        }
    } else if (json_is_number(v)) {
        if (kd_wall_from_unix(json_number_value(v), wall, why, sizeof why) < 0)
            return fail(err, errlen, "%s: %s", path, why);
        f.unix_seconds = true;
    } else {
        return wrong(v, path, "a timestamp (an ISO 8601 string or Unix seconds)", err, errlen);
    }
    if (form) *form = f;
    return 0;
}

/* ---- candles ------------------------------------------------------------------------ */

static int check_count(size_t n, const kd_forecast_limits *lim, char *err, size_t errlen) {
    if (lim->max_candles > 0 && n > (size_t)lim->max_candles)
        return fail(err, errlen, "candles: %zu candles exceed the limit of %d", n,
                    lim->max_candles);
    if (n > INT_MAX) return fail(err, errlen, "candles: %zu candles are too many", n);
    if (n < 2) return fail(err, errlen, "candles: at least 2 candles are required, got %zu", n);
    return 0;
}

/* Volume without amount is fine (the core derives amount); amount alone would be dropped
 * silently upstream (both become 0), so it is refused. */
static int check_present(const bool present[KR_D_IN], const char *where, char *err, size_t errlen) {
    for (int c = 0; c < KR_VOLUME; c++)
        if (!present[c]) return fail(err, errlen, "%s%s: missing", where, kr_column_names[c]);
    if (present[KR_AMOUNT] && !present[KR_VOLUME])
        return fail(err, errlen, "%samount: given without volume", where);
    return 0;
}

static int alloc_arrays(kd_forecast_input *in, size_t n, const bool present[KR_D_IN], char *err,
                        size_t errlen) {
    in->timestamps = malloc(n * sizeof *in->timestamps);
    if (!in->timestamps) return fail(err, errlen, "out of memory");
    for (int c = 0; c < KR_D_IN; c++) {
        if (!present[c]) continue;
        in->columns[c] = malloc(n * sizeof *in->columns[c]);
        if (!in->columns[c]) return fail(err, errlen, "out of memory");
    }
    return 0;
}

static int check_increasing(const int64_t *t, size_t i, const char *path, char *err,
                            size_t errlen) {
    if (i > 0 && t[i] <= t[i - 1])
        return fail(err, errlen, "%s: not after the previous timestamp", path);
    return 0;
}

/* {"timestamps": [...], "open": [...], ...} */
static int parse_columnar(const json_t *cd, const kd_forecast_limits *lim, kd_forecast_input *in,
                          char *err, size_t errlen) {
    const json_t *ts = field(cd, "timestamps"), *col[KR_D_IN];
    bool present[KR_D_IN];
    char path[PATH_LEN];

    if (!ts) return fail(err, errlen, "candles.timestamps: missing");
    if (!json_is_array(ts))
        return wrong(ts, "candles.timestamps", "an array of timestamps", err, errlen);
    const size_t n = json_array_size(ts);
    if (check_count(n, lim, err, errlen) < 0) return -1;
    in->req.n_context = (int)n;
    for (int c = 0; c < KR_D_IN; c++) {
        col[c] = field(cd, kr_column_names[c]);
        present[c] = col[c] != NULL;
        if (!col[c]) continue;
        snprintf(path, sizeof path, "candles.%s", kr_column_names[c]);
        if (!json_is_array(col[c])) return wrong(col[c], path, "an array of numbers", err, errlen);
        if (json_array_size(col[c]) != n)
            return fail(err, errlen, "%s: %zu value%s, but timestamps has %zu", path,
                        json_array_size(col[c]), json_array_size(col[c]) == 1 ? "" : "s", n);
    }
    if (check_present(present, "candles.", err, errlen) < 0) return -1;
    if (alloc_arrays(in, n, present, err, errlen) < 0) return -1;

    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "candles.timestamps[%zu]", i);
        if (get_timestamp(json_array_get(ts, i), path, &in->timestamps[i], &in->time_form, err,
                          errlen) < 0 ||
            check_increasing(in->timestamps, i, path, err, errlen) < 0)
            return -1;
    }
    for (int c = 0; c < KR_D_IN; c++) {
        for (size_t i = 0; present[c] && i < n; i++) {
            snprintf(path, sizeof path, "candles.%s[%zu]", kr_column_names[c], i);
            if (get_number(json_array_get(col[c], i), path, &in->columns[c][i], err, errlen) < 0)
                return -1;
        }
    }
    return 0;
}

/* One row {"timestamp": t, "open": o, ...}; present[] comes from the first row. */
static int parse_row(const json_t *row, size_t i, const bool present[KR_D_IN],
                     kd_forecast_input *in, char *err, size_t errlen) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "candles[%zu]", i);
    if (!json_is_object(row)) return wrong(row, path, "an object", err, errlen);

    const json_t *t1 = field(row, "timestamp"), *t2 = field(row, "timestamps");
    if (t1 && t2) return fail(err, errlen, "%s: both \"timestamp\" and \"timestamps\" given", path);
    snprintf(path, sizeof path, "candles[%zu].timestamp%s", i, t2 ? "s" : "");
    if (!t1 && !t2) return fail(err, errlen, "%s: missing", path);
    if (get_timestamp(t1 ? t1 : t2, path, &in->timestamps[i], &in->time_form, err, errlen) < 0 ||
        check_increasing(in->timestamps, i, path, err, errlen) < 0)
        return -1;

    for (int c = 0; c < KR_D_IN; c++) {
        const json_t *v = field(row, kr_column_names[c]);
        snprintf(path, sizeof path, "candles[%zu].%s", i, kr_column_names[c]);
        if (!v && present[c]) return fail(err, errlen, "%s: missing, but candles[0] has it", path);
        if (v && !present[c]) return fail(err, errlen, "%s: given, but candles[0] has none", path);
        if (v && get_number(v, path, &in->columns[c][i], err, errlen) < 0) return -1;
    }
    return 0;
}

/* [{"timestamp": ..., "open": ..., ...}, ...] */
static int parse_rows(const json_t *rows, const kd_forecast_limits *lim, kd_forecast_input *in,
                      char *err, size_t errlen) {
    const size_t n = json_array_size(rows);
    const json_t *first = json_array_get(rows, 0);
    bool present[KR_D_IN];

    if (check_count(n, lim, err, errlen) < 0) return -1;
    in->req.n_context = (int)n;
    if (!json_is_object(first)) return wrong(first, "candles[0]", "an object", err, errlen);
    for (int c = 0; c < KR_D_IN; c++)
        present[c] = field(first, kr_column_names[c]) != NULL;
    if (check_present(present, "candles[0].", err, errlen) < 0) return -1;
    if (alloc_arrays(in, n, present, err, errlen) < 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (parse_row(json_array_get(rows, i), i, present, in, err, errlen) < 0) return -1;
    return 0;
}

static int parse_candles(const json_t *body, const kd_forecast_limits *lim, kd_forecast_input *in,
                         char *err, size_t errlen) {
    const json_t *cd = field(body, "candles");
    if (!cd) return fail(err, errlen, "candles: missing");
    if (json_is_object(cd)) return parse_columnar(cd, lim, in, err, errlen);
    if (json_is_array(cd)) return parse_rows(cd, lim, in, err, errlen);
    return wrong(cd, "candles", "an object of columns or an array of candle objects", err, errlen);
}

/* ---- options ------------------------------------------------------------------------ */

static int parse_horizon(const json_t *body, const kd_forecast_limits *lim, kd_forecast_input *in,
                         char *err, size_t errlen) {
    long long h = 0;
    if (!field(body, "horizon"))
        return fail(err, errlen, "horizon: missing; must be an integer >= 1");
    if (opt_int(body, "horizon", 1, INT_MAX, "an integer >= 1", &h, err, errlen) < 0) return -1;
    if (lim->max_horizon > 0 && h > lim->max_horizon)
        return fail(err, errlen, "horizon: %lld exceeds the limit of %d", h, lim->max_horizon);
    in->req.horizon = (int)h;
    return 0;
}

/* Exactly horizon entries, strictly increasing, after the last context candle. */
static int parse_future(const json_t *body, kd_forecast_input *in, char *err, size_t errlen) {
    const json_t *ft = field(body, "future_timestamps");
    const int p = in->req.horizon;
    char path[PATH_LEN];

    if (!ft) return 0; /* the core continues at the series' last interval */
    if (!json_is_array(ft))
        return wrong(ft, "future_timestamps", "an array of timestamps", err, errlen);
    if (json_array_size(ft) != (size_t)p)
        return fail(err, errlen, "future_timestamps: %zu value%s, but horizon is %d",
                    json_array_size(ft), json_array_size(ft) == 1 ? "" : "s", p);
    in->future_timestamps = malloc((size_t)p * sizeof *in->future_timestamps);
    if (!in->future_timestamps) return fail(err, errlen, "out of memory");

    const int64_t last = in->timestamps[in->req.n_context - 1];
    for (int i = 0; i < p; i++) {
        snprintf(path, sizeof path, "future_timestamps[%d]", i);
        if (get_timestamp(json_array_get(ft, (size_t)i), path, &in->future_timestamps[i], NULL, err,
                          errlen) < 0)
            return -1;
        if (i == 0 && in->future_timestamps[0] <= last)
            return fail(err, errlen, "%s: not after the last context timestamp", path);
        if (check_increasing(in->future_timestamps, (size_t)i, path, err, errlen) < 0) return -1;
    }
    return 0;
}

static int parse_sampling(const json_t *body, const kd_forecast_limits *lim, kr_forecast_request *r,
                          char *err, size_t errlen) {
    long long samples = r->samples, top_k = r->sampling.top_k, seed = (long long)r->seed;
    if (opt_int(body, "samples", 1, INT_MAX, "an integer >= 1", &samples, err, errlen) < 0)
        return -1;
    if (lim->max_samples > 0 && samples > lim->max_samples)
        return fail(err, errlen, "samples: %lld exceeds the limit of %d", samples,
                    lim->max_samples);
    if (opt_real(body, "temperature", positive_finite, "a number > 0", &r->sampling.temperature,
                 err, errlen) < 0 ||
        opt_int(body, "top_k", 0, INT_MAX, "an integer >= 0", &top_k, err, errlen) < 0 ||
        opt_real(body, "top_p", in_open_unit, "in (0, 1]", &r->sampling.top_p, err, errlen) < 0 ||
        opt_int(body, "seed", 0, LLONG_MAX, "an integer >= 0", &seed, err, errlen) < 0)
        return -1;
    r->samples = (int)samples;
    r->sampling.top_k = (int)top_k;
    r->seed = (uint64_t)seed;
    return 0;
}

static int parse_quantiles(const json_t *body, kr_forecast_request *r, char *err, size_t errlen) {
    const json_t *q = field(body, "quantiles");
    char path[PATH_LEN];
    if (!q) return 0;
    if (!json_is_array(q))
        return wrong(q, "quantiles", "an array of numbers in [0, 1]", err, errlen);
    if (json_array_size(q) > KR_MAX_QUANTILES)
        return fail(err, errlen, "quantiles: at most %d levels are allowed, got %zu",
                    KR_MAX_QUANTILES, json_array_size(q));
    for (size_t i = 0; i < json_array_size(q); i++) {
        const json_t *v = json_array_get(q, i);
        snprintf(path, sizeof path, "quantiles[%zu]", i);
        if (!json_is_number(v) || !in_unit(json_number_value(v)))
            return wrong(v, path, "a number in [0, 1]", err, errlen);
        r->quantiles[i] = json_number_value(v);
    }
    r->n_quantiles = (int)json_array_size(q);
    return 0;
}

static int parse_options(const json_t *body, int model_max_context, kr_forecast_request *r,
                         char *err, size_t errlen) {
    const int hi = model_max_context > 0 ? model_max_context : INT_MAX;
    char rule[48];
    long long mc = r->max_context;
    if (model_max_context > 0)
        snprintf(rule, sizeof rule, "an integer in 1..%d", model_max_context);
    else
        snprintf(rule, sizeof rule, "an integer >= 1");
    if (opt_int(body, "max_context", 1, hi, rule, &mc, err, errlen) < 0 ||
        opt_bool(body, "use_cache", &r->use_cache, err, errlen) < 0 ||
        opt_bool(body, "return_paths", &r->return_paths, err, errlen) < 0 ||
        parse_quantiles(body, r, err, errlen) < 0)
        return -1;
    r->max_context = (int)mc;
    return 0;
}

/* ---- request ------------------------------------------------------------------------ */

/* The API's documented defaults, set explicitly so that they stay what this file's header
 * promises even if the core's own defaults move. */
static void set_defaults(kr_forecast_request *r) {
    kr_forecast_request_init(r);
    r->samples = 1;
    r->sampling.temperature = 1.0;
    r->sampling.top_k = 0;
    r->sampling.top_p = 0.9;
    r->seed = 0;
    r->max_context = 0;
    r->use_cache = true;
    r->return_paths = false;
    r->n_quantiles = 0;
}

/* Points the core's request at the arrays that in owns. */
static void link_request(kd_forecast_input *in) {
    in->req.timestamps = in->timestamps;
    for (int c = 0; c < KR_D_IN; c++)
        in->req.columns[c] = in->columns[c];
    in->req.future_timestamps = in->future_timestamps;
}

int kd_forecast_request_parse_limited(const json_t *body, int model_max_context,
                                      const kd_forecast_limits *limits, kd_forecast_input *in,
                                      char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    char d[DESC_LEN];

    memset(in, 0, sizeof *in);
    set_defaults(&in->req);
    if (!json_is_object(body))
        return fail(err, errlen, "expected a JSON object, got %s",
                    body ? describe(body, d, sizeof d) : "nothing");
    if (parse_candles(body, lim, in, err, errlen) < 0 ||
        parse_horizon(body, lim, in, err, errlen) < 0 || parse_future(body, in, err, errlen) < 0 ||
        parse_sampling(body, lim, &in->req, err, errlen) < 0 ||
        parse_options(body, model_max_context, &in->req, err, errlen) < 0) {
        kd_forecast_input_free(in);
        return -1;
    }
    link_request(in);
    return 0;
}

int kd_forecast_request_parse(const json_t *body, int model_max_context, kd_forecast_input *in,
                              char *err, size_t errlen) {
    return kd_forecast_request_parse_limited(body, model_max_context, NULL, in, err, errlen);
}

void kd_forecast_input_free(kd_forecast_input *in) {
    if (!in) return;
    free(in->timestamps);
    for (int c = 0; c < KR_D_IN; c++)
        free(in->columns[c]);
    free(in->future_timestamps);
    memset(in, 0, sizeof *in);
}

/* ---- response ----------------------------------------------------------------------- */

/* json_real refuses NaN and infinities; null says "no value" without failing the reply. */
static json_t *real_or_null(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *real_array(const double *x, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        if (json_array_append_new(a, real_or_null(x[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* {"open": [P], ..., "amount": [P]} from a [KR_D_IN][P] block. */
static json_t *columns_object(const double *block, int p) {
    json_t *o = json_object();
    for (int c = 0; o && c < KR_D_IN; c++) {
        if (json_object_set_new(o, kr_column_names[c],
                                real_array(block + (size_t)c * (size_t)p, p)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *timestamp_value(int64_t wall, const kd_time_form *f) {
    char buf[KD_TIMESTAMP_MAX];
    if (f->unix_seconds) return json_integer((json_int_t)wall);
    kd_format_timestamp(wall, f->tz_offset_min, f->has_tz, buf, sizeof buf);
    return json_string(buf);
}

static json_t *timestamps_array(const kd_forecast_input *in, const kr_forecast_result *res) {
    json_t *a = json_array();
    for (int i = 0; a && i < res->horizon; i++) {
        if (json_array_append_new(a, timestamp_value(res->timestamps[i], &in->time_form)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *usage_object(const kr_forecast_result *res) {
    json_t *o = json_object();
    if (!o) return NULL;
    if (json_object_set_new(o, "context_candles", json_integer(res->usage.context_candles)) < 0 ||
        json_object_set_new(o, "generated_tokens", json_integer(res->usage.generated_tokens)) < 0 ||
        json_object_set_new(o, "cached_steps", json_integer(res->usage.cached_steps)) < 0 ||
        json_object_set_new(o, "recomputed_steps", json_integer(res->usage.recomputed_steps)) < 0 ||
        json_object_set_new(o, "elapsed_ms", real_or_null(res->usage.elapsed_ms)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *paths_array(const kr_forecast_result *res) {
    const size_t block = (size_t)KR_D_IN * (size_t)res->horizon;
    json_t *a = json_array();
    for (int s = 0; a && s < res->samples; s++) {
        if (json_array_append_new(a, columns_object(res->paths + (size_t)s * block, res->horizon)) <
            0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* {"0.1": {"open": [P], ...}, ...}; equal levels share one key. */
static json_t *quantiles_object(const kr_forecast_result *res) {
    const size_t block = (size_t)KR_D_IN * (size_t)res->horizon;
    json_t *o = json_object();
    char key[32];
    for (int q = 0; o && q < res->n_quantiles; q++) {
        json_t *cols = columns_object(res->quantiles + (size_t)q * block, res->horizon);
        snprintf(key, sizeof key, "%g", res->quantile_levels[q]);
        if (json_object_set_new(o, key, cols) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static int set_optional_parts(json_t *r, const kr_forecast_result *res) {
    if (res->paths && json_object_set_new(r, "paths", paths_array(res)) < 0) return -1;
    if (res->n_quantiles > 0 && res->quantiles &&
        json_object_set_new(r, "quantiles", quantiles_object(res)) < 0)
        return -1;
    if (res->prob_close_up &&
        json_object_set_new(r, "prob_close_up", real_array(res->prob_close_up, res->horizon)) < 0)
        return -1;
    return 0;
}

json_t *kd_forecast_response_json(const kd_forecast_input *in, const kr_forecast_result *res) {
    if (!in || !res || !res->timestamps || !res->mean || res->horizon < 0) return NULL;
    json_t *r = json_object();
    if (!r) return NULL;
    if (json_object_set_new(r, "timestamps", timestamps_array(in, res)) < 0 ||
        json_object_set_new(r, "mean", columns_object(res->mean, res->horizon)) < 0 ||
        json_object_set_new(r, "horizon", json_integer(res->horizon)) < 0 ||
        json_object_set_new(r, "samples", json_integer(res->samples)) < 0 ||
        json_object_set_new(r, "usage", usage_object(res)) < 0 || set_optional_parts(r, res) < 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}
