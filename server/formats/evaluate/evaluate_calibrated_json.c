/* evaluate_calibrated_json.c — the calibrated forecaster's part of an evaluation's answer
 * (evaluate_parts_json.h): its scores beside the raw model's on the same origins, the PIT
 * histogram and KS distances, the reliability of P(up), the object, and each origin's
 * calibrated close. */
#include "calibration_json.h"
#include "evaluate_parts_json.h"

#include <stdio.h>

#include "numfmt.h"
#include "json_out.h"

static const char *const kinds[KR_CAL_KINDS] = {"model", "model_scored", "calibrated"};

static json_t *reliability(const kr_eval_calibrated *c) {
    double edges[KR_EVAL_PIT_BINS + 1], count[KR_EVAL_PIT_BINS];
    for (int b = 0; b <= KR_EVAL_PIT_BINS; b++)
        edges[b] = (double)b / KR_EVAL_PIT_BINS;
    json_t *o = json_object();
    int rc = kd_json_put(o, "edges", kd_json_reals(edges, KR_EVAL_PIT_BINS + 1));
    for (int k = 0; rc == 0 && k < KR_CAL_KINDS; k++) {
        for (int b = 0; b < KR_EVAL_PIT_BINS; b++)
            count[b] = (double)c->rel_count[k][b];
        json_t *t = json_object();
        rc = kd_json_put(t, "count", json_array()) ||
             kd_json_put(t, "mean_prob", kd_json_reals(c->rel_prob[k], KR_EVAL_PIT_BINS)) ||
             kd_json_put(t, "observed", kd_json_reals(c->rel_up[k], KR_EVAL_PIT_BINS));
        for (int b = 0; rc == 0 && b < KR_EVAL_PIT_BINS; b++)
            rc = json_array_append_new(json_object_get(t, "count"),
                                       json_integer((json_int_t)count[b]));
        rc = rc ? (json_decref(t), -1) : kd_json_put(o, kinds[k], t);
    }
    if (rc == 0) return o;
    json_decref(o);
    return NULL;
}

/* The raw model on the scored origins, with its quantile-form CRPS beside the ensemble's. */
static json_t *model_scored(const kr_evaluation *ev, const kr_eval_calibrated *c) {
    const int P = ev->horizon;
    json_t *o = kd_eval_scores_json(ev, c->scores, c->coverage, true, true);
    if (kd_json_put(o, "crps_quantile", kd_json_reals(c->crps_quantile_model, P)) ||
        kd_json_put(json_object_get(o, "overall"), "crps_quantile",
                    kd_json_real(c->crps_quantile_model[P]))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *const column_names[KR_CALIB_COLS] = {"open", "high", "low"};

/* {"coverage": {band: [h]}, "overall": {"coverage": {band: x}}} of one column, raw or
 * calibrated: cov is [pair][horizon + 1]. */
static json_t *column_coverage(const kr_evaluation *ev, const double *cov) {
    const int P = ev->horizon, H = P + 1;
    json_t *steps = json_object(), *all = json_object();
    char key[2 * KD_NUM_MAX + 2];
    int rc = steps && all ? 0 : -1;
    for (int j = 0; rc == 0 && j < ev->n_pairs; j++) {
        kd_eval_pair_key(ev, j, key, sizeof key);
        rc = kd_json_put(steps, key, kd_json_reals(cov + (size_t)j * H, P)) ||
             kd_json_put(all, key, kd_json_real(cov[(size_t)j * H + P]));
    }
    json_t *o =
        rc == 0 ? json_pack("{s:o,s:{s:o}}", "coverage", steps, "overall", "coverage", all) : NULL;
    if (!o && rc) {
        json_decref(steps);
        json_decref(all);
    }
    return o;
}

/* {"open": {"model_scored": ..., "calibrated": ...}, "high": ..., "low": ...} */
static json_t *columns_json(const kr_evaluation *ev, const kr_eval_calibrated *c) {
    const size_t H = (size_t)ev->horizon + 1, NP = ev->n_pairs ? (size_t)ev->n_pairs : 1;
    json_t *o = json_object();
    for (int j = 0; o && j < KR_CALIB_COLS; j++) {
        const double *raw = c->col_coverage + (size_t)j * NP * H,
                     *cal = c->col_coverage + (size_t)(KR_CALIB_COLS + j) * NP * H;
        json_t *col = json_object();
        if (kd_json_put(col, "model_scored", column_coverage(ev, raw)) ||
            kd_json_put(col, "calibrated", column_coverage(ev, cal)) ||
            kd_json_put(o, column_names[j], col)) {
            json_decref(col);
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int kd_evaluate_calibrated_json(json_t *r, const kd_evaluate_input *in, const kr_evaluation *ev) {
    const kr_eval_calibrated *c = ev->calibrated;
    if (!c) return 0;
    const int H = ev->horizon + 1, NP = ev->n_pairs ? ev->n_pairs : 1;
    const bool rolling = in->req.calibration_mode == KR_CALIB_ROLLING;
    json_t *ks = json_object();
    int rc = kd_json_put(r, "calibration_mode", json_string(rolling ? "rolling" : "given")) ||
             (rolling &&
              kd_json_put(r, "calibration_warmup", json_integer(in->req.calibration_warmup))) ||
             kd_json_put(r, "scored_origins", json_integer(c->scored)) ||
             kd_json_put(r, "first_scored_origin",
                         c->scored ? json_integer(ev->origin_index[c->first_scored]) : json_null());
    for (int k = 0; rc == 0 && k < KR_CAL_KINDS; k++)
        rc = kd_json_put(ks, kinds[k], kd_json_real(c->pit_ks[k]));
    if (rc == 0)
        rc = kd_json_put(r, "calibrated",
                         kd_eval_scores_json(ev, c->scores + (size_t)KR_EVAL_METRICS * H,
                                             c->coverage + (size_t)NP * H, true, true)) ||
             kd_json_put(r, "model_scored", model_scored(ev, c)) ||
             kd_json_put(r, "calibrated_pit_histogram", kd_json_reals(c->pit, KR_EVAL_PIT_BINS)) ||
             kd_json_put(r, "pit_ks", ks) || kd_json_put(r, "reliability", reliability(c)) ||
             kd_json_put(r, "calibration", kd_calibration_json(&c->fitted)) ||
             (c->col_coverage && kd_json_put(r, "columns", columns_json(ev, c)));
    else
        json_decref(ks);
    return rc ? -1 : 0;
}

json_t *kd_evaluate_origin_calibrated_json(const kr_evaluation *ev, int k) {
    const kr_eval_calibrated *c = ev->calibrated;
    const int P = ev->horizon, Q = ev->n_quantiles;
    json_t *o = json_object(), *qs = json_object();
    char key[KD_NUM_MAX];
    int rc = o && qs ? 0 : -1;
    for (int q = 0; rc == 0 && q < Q; q++) {
        kd_fmt_double(ev->quantile_levels[q], key, sizeof key);
        rc = kd_json_put(qs, key, kd_json_reals(c->quantiles + ((size_t)k * Q + q) * P, P));
    }
    if (rc == 0) {
        rc = kd_json_put(o, "quantiles", qs);
        qs = NULL;
    }
    if (rc == 0)
        rc = kd_json_put(o, "prob_close_up", kd_json_reals(c->prob_close_up + (size_t)k * P, P));
    json_t *cols = rc == 0 && c->col_quantiles ? json_object() : NULL;
    for (int j = 0; cols && j < KR_CALIB_COLS; j++) {
        json_t *cq = json_object();
        for (int q = 0; cq && q < Q; q++) {
            kd_fmt_double(ev->quantile_levels[q], key, sizeof key);
            const size_t at = (((size_t)j * ev->origins + (size_t)k) * Q + q) * P;
            if (kd_json_put(cq, key, kd_json_reals(c->col_quantiles + at, P))) {
                json_decref(cq);
                cq = NULL;
            }
        }
        if (kd_json_put(cols, column_names[j], cq)) {
            json_decref(cols);
            cols = NULL;
            rc = -1;
        }
    }
    if (cols) rc = kd_json_put(o, "columns", cols);
    json_decref(qs);
    if (rc == 0) return o;
    json_decref(o);
    return NULL;
}
