/* evaluate_parts_json.c — the parts an evaluation's answer is made of, shared by its
 * raw, calibrated and anomaly sections (evaluate_parts_json.h). */
#include "evaluate_parts_json.h"

#include <math.h>
#include <stdio.h>

#include "numfmt.h"
#include "json_out.h"

void kd_eval_pair_key(const kr_evaluation *ev, int j, char *key, size_t n) {
    char lo[KD_NUM_MAX], hi[KD_NUM_MAX];
    kd_fmt_double(ev->quantile_levels[ev->pair_lo[j]], lo, sizeof lo);
    kd_fmt_double(ev->quantile_levels[ev->pair_hi[j]], hi, sizeof hi);
    snprintf(key, n, "%s-%s", lo, hi);
}

json_t *kd_eval_scores_json(const kr_evaluation *ev, const double *scores, const double *coverage,
                            bool direction, bool brier) {
    const int P = ev->horizon, H = P + 1;
    json_t *o = json_object(), *overall = json_object();
    int rc = o && overall ? 0 : -1;
    for (int m = 0; rc == 0 && m < KR_EVAL_METRICS; m++) {
        const double *v = scores + (size_t)m * H;
        if ((m == KR_EVAL_DIRECTION && !direction) || (m == KR_EVAL_BRIER && !brier))
            continue; /* does not apply to it */
        rc = kd_json_put(o, kr_eval_metric_names[m], kd_json_reals(v, P));
        if (rc == 0) rc = kd_json_put(overall, kr_eval_metric_names[m], kd_json_real(v[P]));
    }
    if (rc == 0 && coverage) {
        json_t *cov = json_object(), *cov_all = json_object();
        char key[2 * KD_NUM_MAX + 2];
        for (int j = 0; cov && cov_all && rc == 0 && j < ev->n_pairs; j++) {
            const double *v = coverage + (size_t)j * H;
            kd_eval_pair_key(ev, j, key, sizeof key);
            rc = kd_json_put(cov, key, kd_json_reals(v, P));
            if (rc == 0) rc = kd_json_put(cov_all, key, kd_json_real(v[P]));
        }
        if (rc == 0)
            rc = kd_json_put(o, "coverage", cov);
        else
            json_decref(cov);
        if (rc == 0)
            rc = kd_json_put(overall, "coverage", cov_all);
        else
            json_decref(cov_all);
    }
    if (rc == 0 && kd_json_put(o, "overall", overall) == 0) return o;
    if (rc) json_decref(overall);
    json_decref(o);
    return NULL;
}

/* One forecaster's scores: the metrics that apply to it, per step, and overall. */
