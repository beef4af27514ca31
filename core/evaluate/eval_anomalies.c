/* eval_anomalies.c — anomaly flags of a scored evaluation (kr_anomalies, kronos.h): the
 * origin-steps whose actual close fell outside the request's band, with the PIT, the band's
 * bounds and every pair the actual fell outside of; against the calibrated forecaster's bands
 * when the evaluation is calibrated (its scored origins only), else the paths' quantiles. */
#include "evaluate_impl.h"

#include <math.h>
#include <stdlib.h>

int kr_eval_pair_index(const kr_evaluation *ev, double lo, double hi) {
    for (int j = 0; j < ev->n_pairs; j++)
        if (fabs(ev->quantile_levels[ev->pair_lo[j]] - lo) < 1e-9 &&
            fabs(ev->quantile_levels[ev->pair_hi[j]] - hi) < 1e-9)
            return j;
    return -1;
}

void kr_eval_anomalies_free(kr_evaluation *ev) {
    if (!ev->anomalies) return;
    free(ev->anomalies->points);
    free(ev->anomalies);
    ev->anomalies = NULL;
}

/* The pairs origin k's step h fell outside of (bit j: pair j), from quantiles q laid out as
 * kr_evaluation.quantiles. */
static unsigned outside_of(const kr_evaluation *ev, const double *q, int k, int h) {
    const int P = ev->horizon, Q = ev->n_quantiles;
    const double y = ev->actual[(size_t)k * P + h];
    unsigned bits = 0;
    for (int j = 0; j < ev->n_pairs; j++) {
        const double lo = q[((size_t)k * Q + ev->pair_lo[j]) * P + h];
        const double hi = q[((size_t)k * Q + ev->pair_hi[j]) * P + h];
        if (y < lo || y > hi) bits |= 1u << j;
    }
    return bits;
}

int kr_eval_anomalies_finish(kr_evaluation *ev, const kr_evaluate_request *req, const double *pit,
                             kr_error *err) {
    if (!req->anomalies) return 0;
    const int pair = kr_eval_pair_index(ev, req->anomaly_lo, req->anomaly_hi);
    if (pair < 0) /* the plan checked it; an evaluation made otherwise may not have */
        return kr_fail_code(err, KR_E_INVALID,
                            "anomalies.band: %g-%g is not a symmetric pair of the quantiles",
                            req->anomaly_lo, req->anomaly_hi);
    const kr_eval_calibrated *c = ev->calibrated;
    const double *q = c ? c->quantiles : ev->quantiles;
    const double *u = c ? c->pit_at : pit;
    const int k0 = c ? c->first_scored : 0, P = ev->horizon, Q = ev->n_quantiles;
    int count = 0;
    for (int k = k0; k < ev->origins; k++)
        for (int h = 0; h < P; h++)
            count += (outside_of(ev, q, k, h) >> pair) & 1u;
    kr_anomalies *a = calloc(1, sizeof *a);
    if (a) a->points = malloc((size_t)(count ? count : 1) * sizeof *a->points);
    if (!a || !a->points) {
        free(a);
        return kr_fail_code(err, KR_E_NO_MEMORY, "evaluate: out of memory listing %d anomalies",
                            count);
    }
    a->pair = pair;
    a->calibrated = c != NULL;
    a->checked = (long)(ev->origins - k0) * P;
    for (int k = k0; k < ev->origins; k++)
        for (int h = 0; h < P; h++) {
            const unsigned bits = outside_of(ev, q, k, h);
            if (!((bits >> pair) & 1u)) continue;
            a->points[a->count++] =
                (kr_anomaly){.origin = k,
                             .step = h,
                             .pit = u[(size_t)k * P + h],
                             .lower = q[((size_t)k * Q + ev->pair_lo[pair]) * P + h],
                             .upper = q[((size_t)k * Q + ev->pair_hi[pair]) * P + h],
                             .outside = bits};
        }
    kr_eval_anomalies_free(ev);
    ev->anomalies = a;
    return 0;
}
