/* eval_sums.c — an evaluation's score sums over origin-steps and the scores they give
 * (kr_eval_sums, evaluate_impl.h): written once for the raw forecasters' scores
 * (eval_scores.c) and the calibrated one's (eval_calibrated.c). */
#include "evaluate_impl.h"

#include <math.h>

static int sign(double x) {
    return (x > 0) - (x < 0);
}

void kr_eval_sums_add(kr_eval_sums *s, double point, double last, double y, double p_up,
                      double crps, const double *covered, int n_pairs) {
    const double e = point - y;
    s->abs += fabs(e);
    s->sq += e * e;
    if (y != 0) {
        s->ape += fabs(e / y);
        s->n_ape++;
    }
    s->hit += sign(point - last) == sign(y - last);
    s->brier += (p_up - (y > last)) * (p_up - (y > last));
    s->crps += crps;
    for (int j = 0; j < n_pairs; j++)
        s->covered[j] += covered[j];
    s->n++;
}

void kr_eval_sums_write(const kr_eval_sums *s, unsigned what, int n_pairs, int H, int h,
                        double *scores, double *coverage) {
    scores[KR_EVAL_MAE * H + h] = s->abs / s->n;
    scores[KR_EVAL_RMSE * H + h] = sqrt(s->sq / s->n);
    scores[KR_EVAL_MAPE * H + h] = s->n_ape ? 100.0 * s->ape / s->n_ape : NAN;
    scores[KR_EVAL_DIRECTION * H + h] = what & KR_SUMS_DIRECTION ? s->hit / s->n : NAN;
    scores[KR_EVAL_BRIER * H + h] = what & KR_SUMS_BRIER ? s->brier / s->n : NAN;
    scores[KR_EVAL_CRPS * H + h] = s->crps / s->n;
    for (int j = 0; j < n_pairs; j++)
        coverage[(size_t)j * H + h] = what & KR_SUMS_COVERAGE ? s->covered[j] / s->n : NAN;
}
