/* eval_plan.c — the evaluation request contract: every rule a request must meet, checked
 * once; the origins, the forecast request of each (window or live), and what all of them
 * cost. The server, the one-shot evaluation and the scores all go through here. */
#include "evaluate_impl.h"
#include "forecast_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr_evaluate_request_init(kr_evaluate_request *req) {
    kr_forecast_request f;
    kr_forecast_request_init(&f);
    memset(req, 0, sizeof *req);
    req->first_origin = req->last_origin = -1;
    req->samples = f.samples;
    req->sampling = f.sampling;
    req->seed = f.seed;
    req->n_quantiles = 3;
    req->quantiles[0] = 0.1;
    req->quantiles[1] = 0.5;
    req->quantiles[2] = 0.9;
    req->mode = KR_EVAL_WINDOW;
    req->calibration_mode = KR_CALIB_NONE;
    req->calibration_warmup = 50;
}

void kr_evaluate_origin_request(const kr_evaluate_request *req, const kr_evaluate_plan *plan, int k,
                                kr_forecast_request *out) {
    const int o = plan->first_origin + k * plan->stride;
    /* window: the lookback candles before o; live: from the first window's start to o */
    const int start =
        req->mode == KR_EVAL_LIVE ? plan->first_origin - req->lookback : o - req->lookback;
    const kr_candles *cd = &req->candles;
    kr_forecast_request_init(out);
    out->context.n = o - start;
    out->context.timestamps = cd->timestamps + start;
    for (int c = 0; c < KR_D_IN; c++)
        out->context.columns[c] = cd->columns[c] ? cd->columns[c] + start : NULL;
    out->horizon = req->horizon;
    out->future_timestamps = cd->timestamps + o; /* the actual rows' */
    out->samples = req->samples;
    out->sampling = req->sampling;
    out->seed = req->seed;
    out->max_context = req->max_context;
    out->use_cache = true;
    out->return_paths = true; /* the CRPS and the PIT need them */
    out->n_quantiles = req->n_quantiles;
    memcpy(out->quantiles, req->quantiles, sizeof out->quantiles);
    out->cancel = req->cancel;
    out->class_flops = plan->flops; /* a heavy evaluation's origins are heavy */
    if (req->mode == KR_EVAL_LIVE) {
        out->norm.pinned = true;
        memcpy(out->norm.mean, plan->mean, sizeof out->norm.mean);
        memcpy(out->norm.std, plan->std, sizeof out->norm.std);
    }
}

static int check_series(const kr_evaluate_request *r, kr_error *err) {
    const kr_candles *cd = &r->candles;
    if (cd->n < 2)
        return kr_fail_code(err, KR_E_INVALID, "candles: at least 2 candles are required, got %d",
                            cd->n);
    if (!cd->timestamps) return kr_fail_code(err, KR_E_INVALID, "candles.timestamps: missing");
    if (kr_check_columns(cd, err) ||
        kr_check_increasing(cd->timestamps, cd->n, "candles.timestamps", err))
        return -1;
    if (r->lookback < 2)
        return kr_fail_code(err, KR_E_INVALID, "lookback: must be an integer >= 2, got %d",
                            r->lookback);
    if (r->horizon < 1)
        return kr_fail_code(err, KR_E_INVALID, "horizon: must be an integer >= 1, got %d",
                            r->horizon);
    if (r->stride < 0)
        return kr_fail_code(err, KR_E_INVALID, "stride: must be an integer >= 1, got %d",
                            r->stride);
    if (r->mode != KR_EVAL_WINDOW && r->mode != KR_EVAL_LIVE)
        return kr_fail_code(err, KR_E_INVALID, "mode: must be window or live");
    if (r->norm.pinned && r->mode != KR_EVAL_LIVE)
        return kr_fail_code(err, KR_E_INVALID,
                            "normalization: pins the statistics of mode \"live\"; in mode "
                            "\"window\" every origin is normalised by its own window");
    return kr_check_normalisation(&r->norm, err);
}

/* The origins: first_origin, first_origin + stride, ... up to last_origin. */
static int place_origins(const kr_evaluate_request *r, kr_evaluate_plan *plan, kr_error *err) {
    const int n = r->candles.n, L = r->lookback, P = r->horizon;
    const int first = r->first_origin < 0 ? L : r->first_origin;
    if (n - P < L)
        return kr_fail_code(err, KR_E_INVALID,
                            "candles: %d candles hold no origin with lookback %d and horizon %d "
                            "(at least %d are needed)",
                            n, L, P, L + P);
    if (first < L)
        return kr_fail_code(err, KR_E_INVALID,
                            "first_origin: %d leaves fewer than lookback (%d) candles before it",
                            first, L);
    if (first > n - P)
        return kr_fail_code(err, KR_E_INVALID,
                            "first_origin: %d leaves fewer than horizon (%d) candles after it "
                            "(the series has %d)",
                            first, P, n);
    const int last = r->last_origin < 0 ? n - P : r->last_origin;
    if (last > n - P)
        return kr_fail_code(err, KR_E_INVALID,
                            "last_origin: %d leaves fewer than horizon (%d) candles after it "
                            "(the series has %d, so at most %d)",
                            last, P, n, n - P);
    if (last < first)
        return kr_fail_code(err, KR_E_INVALID, "last_origin: %d is before first_origin %d", last,
                            first);
    plan->stride = r->stride ? r->stride : P;
    plan->first_origin = first;
    plan->origins = (last - first) / plan->stride + 1;
    plan->last_origin = first + (plan->origins - 1) * plan->stride;
    return 0;
}

/* Live mode: the statistics pinned, those given or the first window's. */
static int live_statistics(const kr_evaluate_request *r, kr_evaluate_plan *plan, kr_error *err) {
    if (r->norm.pinned) {
        memcpy(plan->mean, r->norm.mean, sizeof plan->mean);
        memcpy(plan->std, r->norm.std, sizeof plan->std);
        return 0;
    }
    const int start = plan->first_origin - r->lookback;
    kr_candles w = {.n = r->lookback, .timestamps = r->candles.timestamps + start};
    for (int c = 0; c < KR_D_IN; c++)
        w.columns[c] = r->candles.columns[c] ? r->candles.columns[c] + start : NULL;
    float *xn = kr_normalised(&w, NULL, plan->mean, plan->std, "evaluate", err);
    free(xn);
    return xn ? 0 : -1;
}

/* A calibration: its warm-up, a given object's rules and match, closes it can scale by. */
static int check_calibration(const kr_evaluate_request *r, const kr_evaluate_plan *plan,
                             kr_error *err) {
    if (r->calibration_mode == KR_CALIB_NONE) return 0;
    if (r->calibration_mode != KR_CALIB_ROLLING && r->calibration_mode != KR_CALIB_GIVEN)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration: must be \"none\", \"rolling\" or an object");
    if (r->calibration_mode == KR_CALIB_ROLLING && r->calibration_warmup < 1)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration_warmup: must be an integer >= 1, got %d",
                            r->calibration_warmup);
    if (r->calibration_mode == KR_CALIB_GIVEN &&
        (!r->calibration || kr_calibration_check(r->calibration, err) ||
         kr_calibration_match(r->calibration, r->model_id, r->horizon, r->samples, r->quantiles,
                              r->n_quantiles, err)))
        return r->calibration ? -1 : kr_fail_code(err, KR_E_INVALID, "calibration: missing");
    const double *close = r->candles.columns[KR_CLOSE];
    for (int k = 0; k < plan->origins; k++) {
        const int o = plan->first_origin + k * plan->stride;
        if (!(close[o - 1] > 0))
            return kr_fail_code(err, KR_E_INVALID,
                                "candles.close[%d]: %g is the last close before origin %d; "
                                "calibration needs it > 0 (its scores are in units of it)",
                                o - 1, close[o - 1], o);
    }
    return 0;
}

/* An anomaly band: one of the symmetric pairs of the request's quantiles (lo + hi = 1). */
static int check_anomalies(const kr_evaluate_request *r, kr_error *err) {
    if (!r->anomalies) return 0;
    char pairs[512] = "";
    size_t used = 0;
    for (int i = 0; i < r->n_quantiles; i++)
        for (int j = 0; j < r->n_quantiles; j++) {
            const double lo = r->quantiles[i], hi = r->quantiles[j];
            if (!(lo < hi && fabs(lo + hi - 1.0) < 1e-9)) continue;
            if (fabs(lo - r->anomaly_lo) < 1e-9 && fabs(hi - r->anomaly_hi) < 1e-9) return 0;
            if (used < sizeof pairs) {
                const int w = snprintf(pairs + used, sizeof pairs - used, "%s\"%g-%g\"",
                                       used ? ", " : "", lo, hi);
                used += w > 0 ? (size_t)w : 0;
            }
        }
    if (!used)
        return kr_fail_code(err, KR_E_INVALID,
                            "anomalies.band: \"%g-%g\" is not a band of this request: its "
                            "quantiles hold no symmetric pair (lo + hi = 1)",
                            r->anomaly_lo, r->anomaly_hi);
    return kr_fail_code(err, KR_E_INVALID,
                        "anomalies.band: \"%g-%g\" is not a symmetric pair of the request's "
                        "quantiles; it could be %s",
                        r->anomaly_lo, r->anomaly_hi, pairs);
}

int kr_evaluate_plan_make(const kr_model *m, const kr_evaluate_request *req, kr_evaluate_plan *plan,
                          kr_error *err) {
    memset(plan, 0, sizeof *plan);
    if (check_series(req, err) || place_origins(req, plan, err)) return -1;
    if (req->mode == KR_EVAL_LIVE && live_statistics(req, plan, err)) return -1;
    if (check_calibration(req, plan, err) || check_anomalies(req, err)) return -1;
    /* each origin's forecast as kr_forecast would plan it: the sampling fields, quantiles,
     * max_context and horizon are its rules */
    for (int k = 0; k < plan->origins; k++) {
        kr_forecast_request f;
        kr_forecast_plan fp;
        kr_evaluate_origin_request(req, plan, k, &f);
        if (kr_forecast_plan_make(m, &f, &fp, err)) return -1;
        plan->flops += fp.flops;
        if (fp.pool_bytes > plan->pool_bytes) plan->pool_bytes = fp.pool_bytes;
    }
    return 0;
}
