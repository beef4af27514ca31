/* evaluate_json.c — parse an evaluation request, write an evaluation response
 * (evaluate_json.h). The fields shared with /forecast are read by its parsers. */
#include "evaluate_json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "numfmt.h"
#include "json_out.h"

/* The request's fields; the options are those after "candles". */
static const char *const request_fields[] = {"candles",
                                             "lookback",
                                             "horizon",
                                             "stride",
                                             "first_origin",
                                             "last_origin",
                                             "samples",
                                             "temperature",
                                             "top_k",
                                             "top_p",
                                             "seed",
                                             "max_context",
                                             "quantiles",
                                             "mode",
                                             "normalization",
                                             "return_origins",
                                             "timeout_ms",
                                             "calibration",
                                             "calibration_warmup",
                                             "anomalies",
                                             "model",
                                             NULL};

const char *const *kd_evaluate_option_names(void) {
    return request_fields + 1;
}

void kd_evaluate_input_free(kd_evaluate_input *in) {
    if (!in) return;
    kd_candles_free(&in->candles);
    kr_calibration_free(&in->calibration);
    memset(in, 0, sizeof *in);
}

/* A required integer field (its range is the core's rule). */
static int required_int(const json_t *body, const char *key, const char *rule, int *out, char *err,
                        size_t errlen) {
    long long v = 0;
    if (!kd_field(body, key)) return kd_fail(err, errlen, "%s: missing; must be %s", key, rule);
    if (kd_opt_int(body, key, INT_MIN, INT_MAX, "an integer", &v, err, errlen) < 0) return -1;
    *out = (int)v;
    return 0;
}

static int parse_origins(const json_t *body, const kd_forecast_limits *lim, kr_evaluate_request *r,
                         char *err, size_t errlen) {
    long long stride = 0, first = -1, last = -1;
    if (required_int(body, "lookback", "an integer >= 2", &r->lookback, err, errlen) < 0 ||
        required_int(body, "horizon", "an integer >= 1", &r->horizon, err, errlen) < 0)
        return -1;
    if (lim->max_horizon > 0 && r->horizon > lim->max_horizon)
        return kd_fail(err, errlen, "horizon: %d exceeds the limit of %d", r->horizon,
                       lim->max_horizon);
    if (kd_opt_int(body, "stride", 1, INT_MAX, "an integer >= 1", &stride, err, errlen) < 0 ||
        kd_opt_int(body, "first_origin", 0, INT_MAX, "an integer >= 0", &first, err, errlen) < 0 ||
        kd_opt_int(body, "last_origin", 0, INT_MAX, "an integer >= 0", &last, err, errlen) < 0)
        return -1;
    r->stride = (int)stride;
    r->first_origin = (int)first;
    r->last_origin = (int)last;
    return 0;
}

static int parse_mode(const json_t *body, kr_evaluate_request *r, char *err, size_t errlen) {
    const json_t *m = kd_field(body, "mode");
    if (!m) return 0;
    const char *s = json_is_string(m) ? json_string_value(m) : NULL;
    if (s && !strcmp(s, "window"))
        r->mode = KR_EVAL_WINDOW;
    else if (s && !strcmp(s, "live"))
        r->mode = KR_EVAL_LIVE;
    else
        return kd_wrong(m, "mode", "\"window\" or \"live\"", err, errlen);
    return 0;
}

/* "calibration": "none" (absent), "rolling" or an object; "calibration_warmup". */
static int parse_calibration(const json_t *body, kd_evaluate_input *in, char *err, size_t errlen) {
    kr_evaluate_request *r = &in->req;
    const json_t *c = kd_field(body, "calibration");
    long long warmup = r->calibration_warmup;
    if (kd_opt_int(body, "calibration_warmup", INT_MIN, INT_MAX, "an integer", &warmup, err,
                   errlen) < 0)
        return -1;
    r->calibration_warmup = (int)warmup;
    const char *s = json_is_string(c) ? json_string_value(c) : NULL;
    if (!c || (s && !strcmp(s, "none"))) {
        r->calibration_mode = KR_CALIB_NONE;
    } else if (s && !strcmp(s, "rolling")) {
        r->calibration_mode = KR_CALIB_ROLLING;
    } else {
        if (kd_calibration_parse(c, &in->calibration, err, errlen) < 0) return -1;
        r->calibration_mode = KR_CALIB_GIVEN;
        r->calibration = &in->calibration;
    }
    if (kd_field(body, "calibration_warmup") && r->calibration_mode != KR_CALIB_ROLLING)
        return kd_fail(err, errlen,
                       "calibration_warmup: applies to \"calibration\": \"rolling\" only");
    return 0;
}

/* "anomalies": {"band": "lo-hi"}, a pair named as the answer's coverage keys name pairs;
 * whether it is one of the request's pairs is the core's rule (kr_evaluate_plan_make). */
static int parse_anomalies(const json_t *body, kr_evaluate_request *r, char *err, size_t errlen) {
    static const char *const fields[] = {"band", NULL};
    const json_t *a = kd_field(body, "anomalies");
    if (!a) return 0;
    if (!json_is_object(a))
        return kd_wrong(a, "anomalies", "an object {\"band\": \"0.1-0.9\"}", err, errlen);
    if (kd_check_fields(a, "anomalies: ", fields, err, errlen) < 0) return -1;
    const json_t *b = kd_field(a, "band");
    const char *s = json_is_string(b) ? json_string_value(b) : NULL;
    char *end = NULL, *end2 = NULL;
    const double lo = s ? strtod(s, &end) : 0;
    const double hi = end && end != s && *end == '-' ? strtod(end + 1, &end2) : 0;
    if (!b || !s || !end2 || end2 == end + 1 || *end2)
        return kd_wrong(b ? b : a, "anomalies.band",
                        "a pair of the quantiles named as the answer's coverage keys, e.g. "
                        "\"0.1-0.9\"",
                        err, errlen);
    r->anomalies = true;
    r->anomaly_lo = lo;
    r->anomaly_hi = hi;
    return 0;
}

/* Everything but the candles, which are in in->candles already. */
static int parse_options(const json_t *body, const kd_forecast_limits *lim, kd_evaluate_input *in,
                         char *err, size_t errlen) {
    kr_evaluate_request *r = &in->req;
    kr_forecast_request f; /* the fields /forecast shares, read by its parser */
    kr_forecast_request_init(&f);
    f.samples = r->samples;
    f.sampling = r->sampling;
    f.seed = r->seed;
    f.n_quantiles = r->n_quantiles;
    memcpy(f.quantiles, r->quantiles, sizeof f.quantiles);
    if (parse_origins(body, lim, r, err, errlen) < 0 ||
        kd_forecast_fields_parse(body, lim, &f, err, errlen) < 0 ||
        parse_mode(body, r, err, errlen) < 0 ||
        kd_normalization_parse(kd_field(body, "normalization"), &r->norm, err, errlen) < 0 ||
        kd_opt_bool(body, "return_origins", &in->return_origins, err, errlen) < 0 ||
        parse_calibration(body, in, err, errlen) < 0 || parse_anomalies(body, r, err, errlen) < 0 ||
        kd_opt_int(body, "timeout_ms", 1, 86400000LL, "an integer in 1..86400000", &in->timeout_ms,
                   err, errlen) < 0) {
        kd_evaluate_input_free(in);
        return -1;
    }
    r->samples = f.samples;
    r->sampling = f.sampling;
    r->seed = f.seed;
    r->max_context = f.max_context;
    r->n_quantiles = f.n_quantiles;
    memcpy(r->quantiles, f.quantiles, sizeof r->quantiles);
    r->keep_origins = in->return_origins;
    kd_candles_link(&in->candles, &r->candles);
    return 0;
}

int kd_evaluate_request_parse(const json_t *body, const kd_forecast_limits *limits,
                              kd_evaluate_input *in, char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    memset(in, 0, sizeof *in);
    kr_evaluate_request_init(&in->req);
    if (kd_request_object_candles(body, request_fields, lim->max_candles, &in->candles, err,
                                  errlen) < 0)
        return -1;
    return parse_options(body, lim, in, err, errlen);
}

int kd_evaluate_request_with_candles(const json_t *options, kd_owned_candles *candles,
                                     const kd_forecast_limits *limits, kd_evaluate_input *in,
                                     char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    memset(in, 0, sizeof *in);
    kr_evaluate_request_init(&in->req);
    in->candles = *candles;
    memset(candles, 0, sizeof *candles);
    if (kd_check_fields(options, "", request_fields + 1, err, errlen) < 0) {
        kd_evaluate_input_free(in);
        return -1;
    }
    return parse_options(options, lim, in, err, errlen);
}

/* ---- response ------------------------------------------------------------------------------- */

static json_t *scores_object(const kr_evaluation *ev, int f) {
    const int H = ev->horizon + 1;
    return kd_eval_scores_json(
        ev, ev->scores + (size_t)f * KR_EVAL_METRICS * H,
        f == KR_EVAL_PERSISTENCE ? NULL : ev->coverage + (size_t)f * ev->n_pairs * H,
        f == KR_EVAL_MODEL, f != KR_EVAL_PERSISTENCE);
}

static json_t *skill_object(const kr_evaluation *ev) {
    static const char *const baselines[] = {"persistence", "random_walk"};
    static const char *const metrics[] = {"mae", "crps"};
    const int P = ev->horizon, H = P + 1;
    json_t *o = json_object();
    for (int b = 0; o && b < 2; b++) {
        json_t *s = json_object(), *overall = json_object();
        int rc = s && overall ? 0 : -1;
        for (int m = 0; rc == 0 && m < 2; m++) {
            const double *v = ev->skill + ((size_t)b * 2 + m) * H;
            rc = kd_json_put(s, metrics[m], kd_json_reals(v, P));
            if (rc == 0) rc = kd_json_put(overall, metrics[m], kd_json_real(v[P]));
        }
        if (rc == 0)
            rc = kd_json_put(s, "overall", overall);
        else
            json_decref(overall);
        if (rc || kd_json_put(o, baselines[b], s) < 0) {
            if (rc) json_decref(s);
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *origin_object(const kd_evaluate_input *in, const kr_evaluation *ev, int k) {
    const int P = ev->horizon, S = ev->samples, Q = ev->n_quantiles;
    const kd_time_form *tf = &in->candles.time_form;
    json_t *o = json_object(), *close = json_object(), *ts = json_array(), *qs = json_object();
    int rc = o && close && ts && qs ? 0 : -1;
    for (int h = 0; rc == 0 && h < P; h++)
        rc = json_array_append_new(ts, kd_timestamp_json(ev->timestamps[(size_t)k * P + h], tf));
    char key[KD_NUM_MAX];
    for (int q = 0; rc == 0 && q < Q; q++) {
        kd_fmt_double(ev->quantile_levels[q], key, sizeof key);
        rc = kd_json_put(qs, key, kd_json_reals(ev->quantiles + ((size_t)k * Q + q) * P, P));
    }
    if (rc == 0)
        rc = kd_json_put(close, "last", json_real(ev->last_close[k])) ||
             kd_json_put(close, "actual", kd_json_reals(ev->actual + (size_t)k * P, P)) ||
             kd_json_put(close, "mean", kd_json_reals(ev->mean + (size_t)k * P, P));
    if (rc == 0) {
        rc = kd_json_put(close, "quantiles", qs);
        qs = NULL;
    }
    if (rc == 0 && S > 1 && ev->paths) {
        json_t *paths = json_array();
        for (int p = 0; paths && rc == 0 && p < S; p++)
            rc =
                json_array_append_new(paths, kd_json_reals(ev->paths + ((size_t)k * S + p) * P, P));
        rc = rc ? (json_decref(paths), -1) : kd_json_put(close, "paths", paths);
    }
    if (rc == 0)
        rc = kd_json_put(o, "origin", json_integer(ev->origin_index[k])) ||
             kd_json_put(o, "timestamp", kd_timestamp_json(ev->timestamps[(size_t)k * P], tf));
    if (rc == 0) {
        rc = kd_json_put(o, "timestamps", ts);
        ts = NULL;
    }
    if (rc == 0) {
        rc = kd_json_put(o, "close", close);
        close = NULL;
    }
    if (rc == 0)
        rc = kd_json_put(o, "prob_close_up", kd_json_reals(ev->prob_close_up + (size_t)k * P, P));
    if (rc == 0 && ev->calibrated)
        rc = kd_json_put(o, "calibrated", kd_evaluate_origin_calibrated_json(ev, k));
    json_decref(qs);
    json_decref(ts);
    json_decref(close);
    if (rc == 0) return o;
    json_decref(o);
    return NULL;
}

json_t *kd_evaluate_response_json(const kd_evaluate_input *in, const kr_evaluate_plan *plan,
                                  const kr_evaluation *ev) {
    json_t *r = json_object();
    const char *mode = ev->mode == KR_EVAL_LIVE ? "live" : "window";
    int rc = kd_json_put(r, "origins", json_integer(ev->origins)) ||
             kd_json_put(r, "horizon", json_integer(ev->horizon)) ||
             kd_json_put(r, "samples", json_integer(ev->samples)) ||
             kd_json_put(r, "mode", json_string(mode)) ||
             kd_json_put(r, "lookback", json_integer(in->req.lookback)) ||
             kd_json_put(r, "stride", json_integer(plan->stride)) ||
             kd_json_put(r, "first_origin", json_integer(plan->first_origin)) ||
             kd_json_put(r, "last_origin", json_integer(plan->last_origin));
    for (int f = 0; rc == 0 && f < KR_EVAL_FORECASTERS; f++)
        rc = kd_json_put(r, kr_eval_forecaster_names[f], scores_object(ev, f));
    if (rc == 0)
        rc = kd_json_put(r, "skill", skill_object(ev)) ||
             kd_json_put(r, "pit_histogram", kd_json_reals(ev->pit, KR_EVAL_PIT_BINS));
    if (rc == 0) rc = kd_evaluate_calibrated_json(r, in, ev);
    if (rc == 0 && ev->anomalies)
        rc = kd_json_put(r, "anomalies", kd_evaluate_anomalies_json(in, ev));
    if (rc == 0 && ev->mode == KR_EVAL_LIVE)
        rc = kd_json_put(r, "normalization", kd_normalization_json(plan->mean, plan->std));
    if (rc == 0)
        rc = kd_json_put(r, "usage",
                         json_pack("{s:I,s:f,s:f,s:s,s:s}", "generated_tokens",
                                   (json_int_t)ev->usage.generated_tokens, "planned_gflop",
                                   ev->usage.flops / 1e9, "elapsed_ms", ev->usage.elapsed_ms,
                                   "weights", kr_precision_name(ev->usage.weights), "kv",
                                   kr_precision_name(ev->usage.kv)));
    if (rc == 0 && in->return_origins) {
        json_t *a = json_array();
        for (int k = 0; a && rc == 0 && k < ev->origins; k++)
            rc = json_array_append_new(a, origin_object(in, ev, k));
        rc = rc ? (json_decref(a), -1) : kd_json_put(r, "by_origin", a);
    }
    if (rc == 0) return r;
    json_decref(r);
    return NULL;
}
