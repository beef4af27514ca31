/* forecast_json.c — parse a forecast request, write a forecast response. */
#include "forecast_json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "numfmt.h"
#include "timefmt.h"
#include "json_out.h"

const kd_forecast_limits kd_forecast_default_limits = {100000, 10000, 1000};

/* The forecast request's fields; the options are those after "candles". */
static const char *const request_fields[] = {
    "candles",    "horizon",       "future_timestamps", "samples",   "temperature", "top_k",
    "top_p",      "seed",          "max_context",       "use_cache", "quantiles",   "return_paths",
    "timeout_ms", "normalization", "calibration",       "model",     NULL};
static const char *const normalization_fields[] = {"mean", "std", NULL};
static const char *const kr_column_names_null[] = {"open",   "high",   "low", "close",
                                                   "volume", "amount", NULL};

/* ---- sampling ----------------------------------------------------------------------- */

int kd_sampling_parse(const json_t *body, kr_sampling *s, uint64_t *seed, char *err,
                      size_t errlen) {
    /* types here; the values' rules are the core's (kr_sampling_check) */
    long long top_k = s->top_k, sd = (long long)*seed;
    if (kd_opt_real(body, "temperature", kd_any_number, "a number", &s->temperature, err, errlen) <
            0 ||
        kd_opt_int(body, "top_k", INT_MIN, INT_MAX, "an integer", &top_k, err, errlen) < 0 ||
        kd_opt_real(body, "top_p", kd_any_number, "a number", &s->top_p, err, errlen) < 0 ||
        kd_opt_int(body, "seed", 0, LLONG_MAX, "an integer >= 0", &sd, err, errlen) < 0)
        return -1;
    s->top_k = (int)top_k;
    *seed = (uint64_t)sd;
    return 0;
}

/* ---- options ------------------------------------------------------------------------ */

static int parse_horizon(const json_t *body, const kd_forecast_limits *lim, kd_forecast_input *in,
                         char *err, size_t errlen) {
    long long h = 0;
    if (!kd_field(body, "horizon"))
        return kd_fail(err, errlen, "horizon: missing; must be an integer >= 1");
    if (kd_opt_int(body, "horizon", INT_MIN, INT_MAX, "an integer", &h, err, errlen) < 0) return -1;
    if (lim->max_horizon > 0 && h > lim->max_horizon)
        return kd_fail(err, errlen, "horizon: %lld exceeds the limit of %d", h, lim->max_horizon);
    in->req.horizon = (int)h;
    return 0;
}

/* Exactly horizon entries, strictly increasing, after the last context candle. */
static int parse_future(const json_t *body, kd_forecast_input *in, char *err, size_t errlen) {
    const json_t *ft = kd_field(body, "future_timestamps");
    const int p = in->req.horizon;
    char path[KD_PATH_LEN];

    if (!ft) return 0; /* the core continues at the series' last interval */
    if (!json_is_array(ft))
        return kd_wrong(ft, "future_timestamps", "an array of timestamps", err, errlen);
    if (json_array_size(ft) != (size_t)p)
        return kd_fail(err, errlen, "future_timestamps: %zu value%s, but horizon is %d",
                       json_array_size(ft), json_array_size(ft) == 1 ? "" : "s", p);
    in->future_timestamps = malloc((size_t)p * sizeof *in->future_timestamps);
    if (!in->future_timestamps)
        return kd_fail(err, errlen, "future_timestamps: out of memory for %d values", p);

    const int64_t last = in->candles.timestamps[in->candles.n - 1];
    int *offsets = malloc((size_t)p * sizeof *offsets), rc = 0;
    if (!offsets) return kd_fail(err, errlen, "future_timestamps: out of memory for %d values", p);
    for (int i = 0; rc == 0 && i < p; i++) {
        kd_time_form form = {0};
        snprintf(path, sizeof path, "future_timestamps[%d]", i);
        rc = kd_get_timestamp(json_array_get(ft, (size_t)i), path, &in->future_timestamps[i], &form,
                              err, errlen);
        offsets[i] = kd_form_offset(&form);
    }
    if (rc == 0)
        rc = kd_align_timestamps(in->future_timestamps, offsets, (size_t)p,
                                 kd_form_offset(&in->candles.time_form), &last,
                                 "future_timestamps[%zu]", err, errlen);
    free(offsets);
    return rc;
}

/* Without future_timestamps the core continues at the last interval; the response must
 * still be writable, so the last step may not pass 9999-12-31T23:59:59. */
static int check_year_9999(const kd_forecast_input *in, char *err, size_t errlen) {
    const int n = in->candles.n, p = in->req.horizon;
    if (in->future_timestamps || n < 2) return 0;
    const int64_t last = in->candles.timestamps[n - 1], step = last - in->candles.timestamps[n - 2];
    if (step > 0 && p > (KD_WALL_MAX - last) / step) {
        char when[KD_TIMESTAMP_MAX];
        kd_format_timestamp(last, in->candles.time_form.tz_offset_min, in->candles.time_form.has_tz,
                            when, sizeof when);
        return kd_fail(err, errlen,
                       "horizon: %d steps of %lld s after %s run past year 9999, the last a "
                       "timestamp can be written in; the horizon may be at most %lld here",
                       p, (long long)step, when, (long long)((KD_WALL_MAX - last) / step));
    }
    return 0;
}

static int parse_samples(const json_t *body, const kd_forecast_limits *lim, kr_forecast_request *r,
                         char *err, size_t errlen) {
    long long samples = r->samples;
    if (kd_opt_int(body, "samples", INT_MIN, INT_MAX, "an integer", &samples, err, errlen) < 0)
        return -1;
    if (lim->max_samples > 0 && samples > lim->max_samples)
        return kd_fail(err, errlen, "samples: %lld exceeds the limit of %d", samples,
                       lim->max_samples);
    r->samples = (int)samples;
    return 0;
}

static int parse_quantiles(const json_t *body, kr_forecast_request *r, char *err, size_t errlen) {
    const json_t *q = kd_field(body, "quantiles");
    char path[KD_PATH_LEN];
    if (!q) return 0;
    if (!json_is_array(q)) return kd_wrong(q, "quantiles", "an array of numbers", err, errlen);
    if (json_array_size(q) > KR_MAX_QUANTILES)
        return kd_fail(err, errlen, "quantiles: at most %d levels are allowed, got %zu",
                       KR_MAX_QUANTILES, json_array_size(q));
    for (size_t i = 0; i < json_array_size(q); i++) {
        const json_t *v = json_array_get(q, i);
        snprintf(path, sizeof path, "quantiles[%zu]", i);
        if (!json_is_number(v)) return kd_wrong(v, path, "a number", err, errlen);
        r->quantiles[i] = json_number_value(v); /* the core checks the levels (plan.c) */
    }
    r->n_quantiles = (int)json_array_size(q);
    return 0;
}

static int parse_options(const json_t *body, int model_max_context, kr_forecast_request *r,
                         char *err, size_t errlen) {
    long long mc = r->max_context;
    /* its range is the core's rule (plan.c), where 0 means "not given": a 0 that is given
     * gets the core's message rather than the model's window */
    const json_t *given = kd_field(body, "max_context");
    if (json_is_integer(given) && json_integer_value(given) == 0) {
        if (model_max_context > 0)
            return kd_fail(err, errlen, "max_context: must be in [1, %d] (the model's), got 0",
                           model_max_context);
        return kd_fail(err, errlen, "max_context: must be at least 1, got 0");
    }
    if (kd_opt_int(body, "max_context", INT_MIN, INT_MAX, "an integer", &mc, err, errlen) < 0 ||
        kd_opt_bool(body, "use_cache", &r->use_cache, err, errlen) < 0 ||
        kd_opt_bool(body, "return_paths", &r->return_paths, err, errlen) < 0 ||
        parse_quantiles(body, r, err, errlen) < 0)
        return -1;
    r->max_context = (int)mc;
    return 0;
}

int kd_forecast_fields_parse(const json_t *body, const kd_forecast_limits *limits,
                             kr_forecast_request *r, char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    long long mc = r->max_context;
    if (parse_samples(body, lim, r, err, errlen) < 0 ||
        kd_sampling_parse(body, &r->sampling, &r->seed, err, errlen) < 0 ||
        kd_opt_int(body, "max_context", INT_MIN, INT_MAX, "an integer", &mc, err, errlen) < 0 ||
        parse_quantiles(body, r, err, errlen) < 0)
        return -1;
    r->max_context = (int)mc;
    return 0;
}

/* ---- normalization ------------------------------------------------------------------ */

/* {"open": x, ..., "amount": x}: six float32 numbers (std ones >= 0). */
static int parse_stat(const json_t *obj, const char *key, bool nonneg, float out[KR_D_IN],
                      char *err, size_t errlen) {
    char path[KD_PATH_LEN], where[KD_PATH_LEN + 2];
    const json_t *o = kd_field(obj, key);
    snprintf(path, sizeof path, "normalization.%s", key);
    if (!o) return kd_fail(err, errlen, "%s: missing", path);
    if (!json_is_object(o))
        return kd_wrong(o, path, "an object of six numbers (open .. amount)", err, errlen);
    snprintf(where, sizeof where, "%s: ", path);
    if (kd_check_fields(o, where, kr_column_names_null, err, errlen) < 0) return -1;
    for (int c = 0; c < KR_D_IN; c++) {
        double x;
        snprintf(path, sizeof path, "normalization.%s.%s", key, kr_column_names[c]);
        const json_t *v = kd_field(o, kr_column_names[c]);
        if (!v) return kd_fail(err, errlen, "%s: missing", path);
        if (kd_get_number(v, path, &x, err, errlen) < 0) return -1;
        if (!isfinite((float)x)) return kd_fail(err, errlen, "%s: outside float32 range", path);
        if (nonneg && x < 0) return kd_wrong(v, path, "a number >= 0", err, errlen);
        out[c] = (float)x;
    }
    return 0;
}

int kd_normalization_parse(const json_t *v, kr_norm *norm, char *err, size_t errlen) {
    norm->pinned = false;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v))
        return kd_wrong(v, "normalization", "an object {\"mean\": {...}, \"std\": {...}}", err,
                        errlen);
    if (kd_check_fields(v, "normalization: ", normalization_fields, err, errlen) < 0 ||
        parse_stat(v, "mean", false, norm->mean, err, errlen) < 0 ||
        parse_stat(v, "std", true, norm->std, err, errlen) < 0)
        return -1;
    norm->pinned = true;
    return 0;
}

static json_t *stat_object(const float v[KR_D_IN]) {
    json_t *o = json_object();
    for (int c = 0; o && c < KR_D_IN; c++)
        if (json_object_set_new(o, kr_column_names[c],
                                isfinite(v[c]) ? json_real((double)v[c]) : json_null()) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

json_t *kd_normalization_json(const float mean[KR_D_IN], const float std[KR_D_IN]) {
    return json_pack("{s:o,s:o}", "mean", stat_object(mean), "std", stat_object(std));
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

/* "calibration": an object; its levels are the answer's when "quantiles" is absent, and the
 * paths are computed (the calibration reads them), answered only when asked for. */
static int parse_calibration(const json_t *body, kd_forecast_input *in, char *err, size_t errlen) {
    const json_t *v = kd_field(body, "calibration");
    in->show_paths = in->req.return_paths;
    if (!v) return 0;
    if (!json_is_object(v)) return kd_wrong(v, "calibration", "a calibration object", err, errlen);
    if (!(in->calibration = calloc(1, sizeof *in->calibration)))
        return kd_fail(err, errlen, "calibration: out of memory");
    if (kd_calibration_parse(v, in->calibration, err, errlen) < 0) return -1;
    if (!kd_field(body, "quantiles")) {
        in->req.n_quantiles = in->calibration->n_levels;
        memcpy(in->req.quantiles, in->calibration->levels, sizeof in->req.quantiles);
    }
    in->req.return_paths = true;
    return 0;
}

/* Everything but the candles, which are in in->candles already. */
static int parse_options_of(const json_t *body, int model_max_context,
                            const kd_forecast_limits *lim, kd_forecast_input *in, char *err,
                            size_t errlen) {
    if (parse_horizon(body, lim, in, err, errlen) < 0 || parse_future(body, in, err, errlen) < 0 ||
        check_year_9999(in, err, errlen) < 0 ||
        parse_samples(body, lim, &in->req, err, errlen) < 0 ||
        kd_sampling_parse(body, &in->req.sampling, &in->req.seed, err, errlen) < 0 ||
        parse_options(body, model_max_context, &in->req, err, errlen) < 0 ||
        kd_opt_int(body, "timeout_ms", 1, 86400000LL, "an integer in 1..86400000", &in->timeout_ms,
                   err, errlen) < 0 ||
        kd_normalization_parse(kd_field(body, "normalization"), &in->req.norm, err, errlen) < 0) {
        kd_forecast_input_free(in);
        return -1;
    }
    if (parse_calibration(body, in, err, errlen) < 0) {
        kd_forecast_input_free(in);
        return -1;
    }
    kd_candles_link(&in->candles, &in->req.context);
    in->req.future_timestamps = in->future_timestamps;
    return 0;
}

int kd_request_object_candles(const json_t *body, const char *const fields[], int max_candles,
                              kd_owned_candles *candles, char *err, size_t errlen) {
    char d[KD_DESC_LEN];
    if (!json_is_object(body))
        return kd_fail(err, errlen, "expected a JSON object, got %s",
                       body ? kd_describe(body, d, sizeof d) : "nothing");
    if (kd_check_fields(body, "", fields, err, errlen) < 0 ||
        kd_candles_parse(kd_field(body, "candles"), 2, max_candles, candles, err, errlen) < 0)
        return -1;
    return 0;
}

int kd_forecast_request_parse_limited(const json_t *body, int model_max_context,
                                      const kd_forecast_limits *limits, kd_forecast_input *in,
                                      char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    memset(in, 0, sizeof *in);
    set_defaults(&in->req);
    if (kd_request_object_candles(body, request_fields, lim->max_candles, &in->candles, err,
                                  errlen) < 0)
        return -1;
    return parse_options_of(body, model_max_context, lim, in, err, errlen);
}

int kd_forecast_request_with_candles(const json_t *options, kd_owned_candles *candles,
                                     int model_max_context, const kd_forecast_limits *limits,
                                     kd_forecast_input *in, char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    memset(in, 0, sizeof *in);
    set_defaults(&in->req);
    in->candles = *candles;
    memset(candles, 0, sizeof *candles);
    if (kd_check_fields(options, "", request_fields + 1, err, errlen) < 0) {
        kd_forecast_input_free(in);
        return -1;
    }
    return parse_options_of(options, model_max_context, lim, in, err, errlen);
}

const char *const *kd_forecast_option_names(void) {
    return request_fields + 1;
}

int kd_forecast_request_parse(const json_t *body, int model_max_context, kd_forecast_input *in,
                              char *err, size_t errlen) {
    return kd_forecast_request_parse_limited(body, model_max_context, NULL, in, err, errlen);
}

void kd_forecast_input_free(kd_forecast_input *in) {
    if (!in) return;
    kd_candles_free(&in->candles);
    free(in->future_timestamps);
    kr_calibration_free(in->calibration);
    free(in->calibration);
    memset(in, 0, sizeof *in);
}

/* ---- response ----------------------------------------------------------------------- */

json_t *kd_columns_json(const double *block, int p) {
    json_t *o = json_object();
    for (int c = 0; o && c < KR_D_IN; c++) {
        if (json_object_set_new(o, kr_column_names[c],
                                kd_json_reals(block + (size_t)c * (size_t)p, p)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

json_t *kd_timestamp_json(int64_t wall, const kd_time_form *f) {
    char buf[KD_TIMESTAMP_MAX];
    if (f->unix_seconds) return json_integer((json_int_t)wall);
    kd_format_timestamp(wall, f->tz_offset_min, f->has_tz, buf, sizeof buf);
    return json_string(buf);
}

static json_t *timestamps_array(const kd_forecast_input *in, const kr_forecast_result *res) {
    json_t *a = json_array();
    for (int i = 0; a && i < res->horizon; i++) {
        if (json_array_append_new(
                a, kd_timestamp_json(res->timestamps[i], &in->candles.time_form)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *usage_object(const kr_forecast_result *res) {
    return json_pack(
        "{s:I,s:I,s:I,s:I,s:o,s:s,s:s}", "context_candles", (json_int_t)res->usage.context_candles,
        "generated_tokens", (json_int_t)res->usage.generated_tokens, "cached_steps",
        (json_int_t)res->usage.cached_steps, "recomputed_steps",
        (json_int_t)res->usage.recomputed_steps, "elapsed_ms", kd_json_real(res->usage.elapsed_ms),
        "weights", kr_precision_name(res->usage.weights), "kv", kr_precision_name(res->usage.kv));
}

/* The columns of the k-th of blocks (paths, quantiles), each KR_D_IN columns of horizon. */
static json_t *block_columns(const double *blocks, int k, int horizon) {
    return kd_columns_json(blocks + (size_t)k * KR_D_IN * (size_t)horizon, horizon);
}

static json_t *paths_array(const kr_forecast_result *res) {
    json_t *a = json_array();
    for (int s = 0; a && s < res->samples; s++)
        if (json_array_append_new(a, block_columns(res->paths, s, res->horizon)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* {"0.1": {"open": [P], ...}, ...}; the request's levels are distinct, and so are their
 * shortest decimals. */
static json_t *quantiles_object(const kr_forecast_result *res) {
    json_t *o = json_object();
    char key[32];
    for (int q = 0; o && q < res->n_quantiles; q++) {
        json_t *cols = block_columns(res->quantiles, q, res->horizon);
        kd_fmt_double(res->quantile_levels[q], key, sizeof key);
        if (json_object_set_new(o, key, cols) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* {"0.1": {"close": [P]}, ...}: the calibrated close (and open, high, low when the object
 * calibrates them) at the request's levels (the object's, in the same order). */
static json_t *calibrated_quantiles(const kr_forecast_result *res, const kr_calibrated *cal) {
    json_t *o = json_object();
    char key[32];
    for (int q = 0; o && q < cal->n_levels; q++) {
        kd_fmt_double(res->quantile_levels[q], key, sizeof key);
        json_t *close =
            json_pack("{s:o}", "close",
                      kd_json_reals(cal->quantiles + (size_t)q * cal->horizon, cal->horizon));
        static const char *const names[KR_CALIB_COLS] = {"open", "high", "low"};
        for (int j = 0; close && cal->col_quantiles && j < KR_CALIB_COLS; j++) {
            const size_t at = ((size_t)j * cal->n_levels + (size_t)q) * cal->horizon;
            if (json_object_set_new(close, names[j],
                                    kd_json_reals(cal->col_quantiles + at, cal->horizon)) < 0) {
                json_decref(close);
                close = NULL;
            }
        }
        if (json_object_set_new(o, key, close) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* The calibrated close in place of the raw, which move to "raw". */
static int set_calibrated(json_t *r, const kd_forecast_input *in, const kr_forecast_result *res) {
    kr_calibrated cal;
    kr_error e = {0};
    if (kr_calibrate_forecast(in->calibration, &in->req, res, &cal, &e) < 0) return -1;
    json_t *raw = json_object();
    int rc = raw ? 0 : -1;
    if (rc == 0 && res->n_quantiles > 0 && res->quantiles)
        rc = json_object_set_new(raw, "quantiles", quantiles_object(res));
    if (rc == 0)
        rc = json_object_set_new(raw, "prob_close_up",
                                 kd_json_reals(res->prob_close_up, res->horizon));
    if (rc == 0) {
        rc = json_object_set_new(r, "raw", raw);
        raw = NULL;
    }
    if (rc == 0 && res->n_quantiles > 0)
        rc = json_object_set_new(r, "quantiles", calibrated_quantiles(res, &cal));
    if (rc == 0)
        rc = json_object_set_new(r, "prob_close_up",
                                 kd_json_reals(cal.prob_close_up, cal.horizon)) ||
             json_object_set_new(r, "calibrated", json_true()) ||
             json_object_set_new(r, "calibration", kd_calibration_summary_json(in->calibration));
    json_decref(raw);
    kr_calibrated_free(&cal);
    return rc ? -1 : 0;
}

static int set_optional_parts(json_t *r, const kd_forecast_input *in,
                              const kr_forecast_result *res) {
    if (res->paths && (!in->calibration || in->show_paths) &&
        json_object_set_new(r, "paths", paths_array(res)) < 0)
        return -1;
    if (in->calibration) return set_calibrated(r, in, res);
    if (res->n_quantiles > 0 && res->quantiles &&
        json_object_set_new(r, "quantiles", quantiles_object(res)) < 0)
        return -1;
    if (res->prob_close_up &&
        json_object_set_new(r, "prob_close_up", kd_json_reals(res->prob_close_up, res->horizon)) <
            0)
        return -1;
    return 0;
}

json_t *kd_forecast_response_json(const kd_forecast_input *in, const kr_forecast_result *res) {
    if (!in || !res || !res->timestamps || !res->mean || res->horizon < 0) return NULL;
    json_t *r = json_object();
    if (!r) return NULL;
    if (json_object_set_new(r, "timestamps", timestamps_array(in, res)) < 0 ||
        json_object_set_new(r, "mean", kd_columns_json(res->mean, res->horizon)) < 0 ||
        json_object_set_new(r, "horizon", json_integer(res->horizon)) < 0 ||
        json_object_set_new(r, "samples", json_integer(res->samples)) < 0 ||
        json_object_set_new(r, "normalization",
                            kd_normalization_json(res->norm_mean, res->norm_std)) < 0 ||
        json_object_set_new(r, "usage", usage_object(res)) < 0 ||
        set_optional_parts(r, in, res) < 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}
