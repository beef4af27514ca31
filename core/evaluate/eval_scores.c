/* eval_scores.c — an evaluation's scores: each origin's forecast taken in as it ends (its
 * closes kept, its CRPS and PIT values computed from its paths, which are then no longer
 * needed), then per step and overall, for the model and the two baselines:
 *
 *   persistence   the last close at every step, a point forecast: CRPS = |error|;
 *   random walk   Gaussian on price, zero drift, sd = last close * sigma * sqrt(step), sigma
 *                 the population sd of the lookback's close log-returns: closed-form CRPS
 *                 and coverage, Brier with p = 0.5.
 *
 * Definitions (the issue's, on close): MAE, RMSE, MAPE (percent, over non-zero actuals) of
 * the mean; direction accuracy, the share of origins where sign(mean - last) equals
 * sign(actual - last); Brier, the mean of (prob_close_up - [actual > last])^2; CRPS, the
 * ensemble estimator; coverage, the share of actuals within a symmetric pair of quantile
 * levels (ends included); skill, 1 - model / baseline. "Overall" pools every origin and
 * step (for all but RMSE, the mean of the per-step values). */
#include "evaluate_impl.h"
#include "base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const kr_eval_metric_names[KR_EVAL_METRICS] = {
    "mae", "rmse", "mape", "direction_accuracy", "brier", "crps"};
const char *const kr_eval_forecaster_names[KR_EVAL_FORECASTERS] = {"model", "persistence",
                                                                   "random_walk"};

/* ---- one origin and step -------------------------------------------------------------------- */

double kr_crps_ensemble_sorted(const double *x, int n, double y) {
    /* sum_ij |x_i - x_j| = 2 sum_i (2i - n + 1) x_(i) on sorted x */
    double abs_err = 0, spread = 0;
    for (int i = 0; i < n; i++) {
        abs_err += fabs(x[i] - y);
        spread += (2.0 * i - n + 1) * x[i];
    }
    return abs_err / n - spread / ((double)n * n);
}

double kr_normal_cdf(double z) {
    return 0.5 * erfc(-z / sqrt(2.0));
}

double kr_crps_gaussian(double mu, double sd, double y) {
    if (isnan(sd)) return NAN;
    if (sd <= 0) return fabs(y - mu);
    const double z = (y - mu) / sd, pdf = exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
    return sd * (z * (2.0 * kr_normal_cdf(z) - 1.0) + 2.0 * pdf - 1.0 / sqrt(M_PI));
}

double kr_share_below_sorted(const double *x, int n, double y) {
    int below = 0, ties = 0;
    for (int i = 0; i < n; i++) {
        below += x[i] < y;
        ties += x[i] == y;
    }
    return (below + 0.5 * ties) / n;
}

double kr_log_return_sd(const double *close, int n) {
    if (n < 2) return NAN;
    double sum = 0, sq = 0;
    for (int i = 1; i < n; i++) {
        if (!(close[i] > 0 && close[i - 1] > 0)) return NAN;
        sum += log(close[i] / close[i - 1]);
    }
    const double mean = sum / (n - 1);
    for (int i = 1; i < n; i++) {
        const double d = log(close[i] / close[i - 1]) - mean;
        sq += d * d;
    }
    return sqrt(sq / (n - 1));
}

/* ---- the evaluation's buffers -----------------------------------------------------------------
 */

/* kronos.h's struct kr_eval_acc, complete only here */
typedef struct kr_eval_acc {
    double *crps, *pit; /* [origins][horizon]: the model's, from the paths */
    double *sorted;     /* [samples]: one step's closes */
    bool *added;        /* [origins] */
    int n_added;
} accumulators;

/* The accumulators, then the evaluation's arrays: one allocation, which ev->acc heads
 * (kr_carve's layout; base NULL: only the size is summed). The paths only when kept. */
static size_t eval_layout(kr_evaluation *ev, char *base, size_t N, size_t P, size_t S, size_t Q,
                          bool keep_paths) {
    const size_t H = P + 1, pairs = (size_t)(ev->n_pairs ? ev->n_pairs : 1), D = sizeof(double);
    void *a = NULL, *crps = NULL, *pit = NULL, *sorted = NULL, *added = NULL;
    size_t at = kr_carve(base, 0, &a, sizeof(accumulators));
    at = kr_carve(base, at, &crps, N * P * D);
    at = kr_carve(base, at, &pit, N * P * D);
    at = kr_carve(base, at, &sorted, S * D);
    at = kr_carve(base, at, &added, N * sizeof(bool));
    at = kr_carve(base, at, (void **)&ev->scores, KR_EVAL_FORECASTERS * KR_EVAL_METRICS * H * D);
    at = kr_carve(base, at, (void **)&ev->coverage, KR_EVAL_FORECASTERS * pairs * H * D);
    at = kr_carve(base, at, (void **)&ev->skill, 2 * 2 * H * D);
    at = kr_carve(base, at, (void **)&ev->origin_index, N * sizeof *ev->origin_index);
    at = kr_carve(base, at, (void **)&ev->timestamps, N * P * sizeof *ev->timestamps);
    at = kr_carve(base, at, (void **)&ev->last_close, N * D);
    at = kr_carve(base, at, (void **)&ev->actual, N * P * D);
    at = kr_carve(base, at, (void **)&ev->mean, N * P * D);
    at = kr_carve(base, at, (void **)&ev->quantiles, (Q ? Q : 1) * N * P * D);
    at = kr_carve(base, at, (void **)&ev->prob_close_up, N * P * D);
    if (keep_paths) at = kr_carve(base, at, (void **)&ev->paths, N * S * P * D);
    if (base) {
        accumulators *acc = ev->acc = a;
        *acc = (accumulators){.crps = crps, .pit = pit, .sorted = sorted, .added = added};
        memset(added, 0, N * sizeof(bool));
    }
    return at;
}

void kr_evaluation_free(kr_evaluation *ev) {
    if (!ev) return;
    kr_eval_calibrated_free(ev);
    kr_eval_anomalies_free(ev);
    free(ev->acc); /* and every array of ev's own (eval_layout) */
    memset(ev, 0, sizeof *ev);
}

/* Symmetric pairs of levels (lo + hi = 1, lo < hi), outermost first. */
static void find_pairs(kr_evaluation *ev) {
    ev->n_pairs = 0;
    for (int i = 0; i < ev->n_quantiles; i++)
        for (int j = 0; j < ev->n_quantiles; j++) {
            const double lo = ev->quantile_levels[i], hi = ev->quantile_levels[j];
            if (lo < hi && fabs(lo + hi - 1.0) < 1e-9) {
                int at = ev->n_pairs++;
                while (at > 0 && ev->quantile_levels[ev->pair_lo[at - 1]] > lo) {
                    ev->pair_lo[at] = ev->pair_lo[at - 1];
                    ev->pair_hi[at] = ev->pair_hi[at - 1];
                    at--;
                }
                ev->pair_lo[at] = i;
                ev->pair_hi[at] = j;
            }
        }
}

int kr_evaluation_init(const kr_evaluate_request *req, const kr_evaluate_plan *plan,
                       kr_evaluation *ev, kr_error *err) {
    memset(ev, 0, sizeof *ev);
    const size_t N = (size_t)plan->origins, P = (size_t)req->horizon, S = (size_t)req->samples;
    const size_t Q = (size_t)req->n_quantiles;
    ev->origins = plan->origins;
    ev->horizon = req->horizon;
    ev->samples = req->samples;
    ev->mode = req->mode;
    ev->n_quantiles = req->n_quantiles;
    memcpy(ev->quantile_levels, req->quantiles, sizeof ev->quantile_levels);
    find_pairs(ev);
    char *mem = malloc(eval_layout(ev, NULL, N, P, S, Q, req->keep_origins));
    if (!mem) {
        kr_evaluation_free(ev);
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "evaluate: out of memory for %d origins of %d steps and %d paths",
                            plan->origins, req->horizon, req->samples);
    }
    eval_layout(ev, mem, N, P, S, Q, req->keep_origins);
    const double *close = req->candles.columns[KR_CLOSE];
    for (size_t k = 0; k < N; k++) {
        const int o = plan->first_origin + (int)k * plan->stride;
        ev->origin_index[k] = o;
        ev->last_close[k] = close[o - 1];
        for (size_t h = 0; h < P; h++) {
            ev->actual[k * P + h] = close[o + h];
            ev->timestamps[k * P + h] = req->candles.timestamps[o + h];
        }
    }
    ev->usage.flops = plan->flops;
    if (kr_eval_calibrated_init(ev, req, err)) {
        kr_evaluation_free(ev);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int kr_evaluation_add(kr_evaluation *ev, const kr_evaluate_request *req, int k,
                      const kr_forecast_result *res, kr_error *err) {
    (void)req;
    accumulators *a = ev->acc;
    const int P = ev->horizon, S = ev->samples, Q = ev->n_quantiles;
    if (k < 0 || k >= ev->origins || a->added[k])
        return kr_fail(err, "evaluate: origin %d added twice or out of range", k);
    if (res->horizon != P || res->samples != S || res->n_quantiles != Q || !res->paths)
        return kr_fail(err, "evaluate: origin %d's forecast is not the one planned", k);
    for (int h = 0; h < P; h++) {
        const size_t at = (size_t)k * P + h;
        ev->mean[at] = res->mean[(size_t)KR_CLOSE * P + h];
        ev->prob_close_up[at] = res->prob_close_up[h];
        for (int q = 0; q < Q; q++)
            ev->quantiles[((size_t)k * Q + q) * P + h] =
                res->quantiles[((size_t)q * KR_D_IN + KR_CLOSE) * P + h];
        for (int p = 0; p < S; p++) {
            const double x = res->paths[((size_t)p * KR_D_IN + KR_CLOSE) * P + h];
            a->sorted[p] = x;
            if (ev->paths) ev->paths[((size_t)k * S + p) * P + h] = x;
        }
        qsort(a->sorted, (size_t)S, sizeof(double), cmp_double);
        a->crps[at] = kr_crps_ensemble_sorted(a->sorted, S, ev->actual[at]);
        a->pit[at] = kr_share_below_sorted(a->sorted, S, ev->actual[at]);
        if (ev->calibrated) kr_eval_calibrated_add(ev, k, h, a->sorted);
    }
    if (ev->calibrated) kr_eval_calibrated_add_columns(ev, k, res);
    ev->usage.generated_tokens += res->usage.generated_tokens;
    a->added[k] = true;
    a->n_added++;
    return 0;
}

/* ---- per step and overall
 * ------------------------------------------------------------------------- */

static void write_sums(kr_evaluation *ev, int f, int h, const kr_eval_sums *s) {
    const int H = ev->horizon + 1;
    const unsigned what = f == KR_EVAL_MODEL ? KR_SUMS_DIRECTION | KR_SUMS_BRIER | KR_SUMS_COVERAGE
                          : f == KR_EVAL_PERSISTENCE ? 0
                                                     : KR_SUMS_BRIER | KR_SUMS_COVERAGE;
    kr_eval_sums_write(s, what, ev->n_pairs, H, h, ev->scores + (size_t)f * KR_EVAL_METRICS * H,
                       ev->coverage + (size_t)f * ev->n_pairs * H);
}

static double skill_of(double model, double baseline) {
    return baseline > 0 || baseline < 0 ? 1.0 - model / baseline : NAN;
}

int kr_evaluation_finish(kr_evaluation *ev, const kr_evaluate_request *req, kr_error *err) {
    accumulators *a = ev->acc;
    const int N = ev->origins, P = ev->horizon, Q = ev->n_quantiles, H = P + 1;
    if (a->n_added != N)
        return kr_fail(err, "evaluate: %d of %d origins' forecasts were added", a->n_added, N);
    kr_eval_sums *s = calloc((size_t)KR_EVAL_FORECASTERS * H, sizeof *s);
    if (!s) return kr_fail_code(err, KR_E_NO_MEMORY, "evaluate: out of memory scoring");
    memset(ev->pit, 0, sizeof ev->pit);
    const double *close = req->candles.columns[KR_CLOSE];
    for (int k = 0; k < N; k++) {
        const double last = ev->last_close[k];
        const double sigma =
            kr_log_return_sd(close + ev->origin_index[k] - req->lookback, req->lookback);
        for (int h = 0; h < P; h++) {
            const size_t at = (size_t)k * P + h;
            const double y = ev->actual[at], sd = last * sigma * sqrt(h + 1.0);
            double cov_m[KR_MAX_QUANTILES / 2], cov_rw[KR_MAX_QUANTILES / 2];
            /* where the actual falls in the random walk's distribution; a point mass (a
             * flat lookback) puts an actual equal to it within every pair */
            const double u = isnan(sd) ? NAN
                             : sd > 0  ? kr_normal_cdf((y - last) / sd)
                                       : (y > last) + 0.5 * (y == last);
            for (int j = 0; j < ev->n_pairs; j++) {
                const double lo = ev->quantiles[((size_t)k * Q + ev->pair_lo[j]) * P + h];
                const double hi = ev->quantiles[((size_t)k * Q + ev->pair_hi[j]) * P + h];
                const double qlo = ev->quantile_levels[ev->pair_lo[j]];
                const double qhi = ev->quantile_levels[ev->pair_hi[j]];
                cov_m[j] = lo <= y && y <= hi;
                cov_rw[j] = isnan(u) ? NAN : (qlo <= u && u <= qhi) || (sd == 0 && y == last);
            }
            for (int t = 0; t < 2; t++) { /* the step's sums, then all steps' */
                kr_eval_sums *m = &s[(size_t)KR_EVAL_MODEL * H + (t ? P : h)];
                kr_eval_sums *pe = &s[(size_t)KR_EVAL_PERSISTENCE * H + (t ? P : h)];
                kr_eval_sums *rw = &s[(size_t)KR_EVAL_RANDOM_WALK * H + (t ? P : h)];
                kr_eval_sums_add(m, ev->mean[at], last, y, ev->prob_close_up[at], a->crps[at],
                                 cov_m, ev->n_pairs);
                kr_eval_sums_add(pe, last, last, y, 0, fabs(y - last), cov_m, 0);
                kr_eval_sums_add(rw, last, last, y, 0.5, kr_crps_gaussian(last, sd, y), cov_rw,
                                 ev->n_pairs);
            }
            int bin = (int)floor(a->pit[at] * KR_EVAL_PIT_BINS);
            ev->pit[bin < KR_EVAL_PIT_BINS ? bin : KR_EVAL_PIT_BINS - 1] += 1;
        }
    }
    for (int f = 0; f < KR_EVAL_FORECASTERS; f++)
        for (int h = 0; h < H; h++)
            write_sums(ev, f, h, &s[(size_t)f * H + h]);
    free(s);
    for (int b = 0; b < 2; b++)       /* persistence, random walk */
        for (int m = 0; m < 2; m++) { /* MAE, CRPS */
            const int metric = m ? KR_EVAL_CRPS : KR_EVAL_MAE;
            const double *model =
                ev->scores + ((size_t)KR_EVAL_MODEL * KR_EVAL_METRICS + metric) * H;
            const double *base = ev->scores + ((size_t)(b + 1) * KR_EVAL_METRICS + metric) * H;
            for (int h = 0; h < H; h++)
                ev->skill[((size_t)b * 2 + m) * H + h] = skill_of(model[h], base[h]);
        }
    for (int i = 0; i < KR_EVAL_PIT_BINS; i++)
        ev->pit[i] /= (double)N * P;
    if (kr_eval_calibrated_finish(ev, req, a->crps, a->pit, err)) return -1;
    return kr_eval_anomalies_finish(ev, req, a->pit, err);
}
