/* evaluate_impl.h — the evaluation floor's internals: the scores of one origin and step,
 * written once here so that the tests check them on hand-computed cases. Internal to core/;
 * the tests include it.
 *
 * The files of this floor, each using only those listed before it:
 *   eval_plan.c        the request contract: its rules, the origins, their forecast requests,
 *                      cost
 *   calib_math.c       calibration's arithmetic: conformal ranks, grids, PIT, PAV, KS
 *   calibration.c      the calibration object: its rules, its match to a request, a forecast
 *                      calibrated by it
 *   eval_sums.c        the score sums over origin-steps, and the scores they give
 *   eval_scores.c      the scores: per origin as each forecast ends, then per step and overall
 *   eval_calibrated.c  the calibrated forecaster's scores: rolling (no look-ahead) or a given
 *                      object, and the object fitted on every origin
 *   eval_anomalies.c   the origin-steps outside a chosen band (raw or calibrated)
 *   calib_online.c     online calibration of a live series: kept forecasts resolved as
 *                      their candles arrive, adaptive conformal inference
 *   eval_run.c         kr_evaluate: every origin's forecast through the one driver (kr_run)
 *   eval_cross.c       cross-sectional scores of many series' evaluations at the same origins
 */
#ifndef KR_EVALUATE_IMPL_H
#define KR_EVALUATE_IMPL_H

#include "kronos.h"

/* The ensemble CRPS of x[n] (sorted ascending) against y: mean|X - y| - mean|X - X'| / 2
 * over all n^2 pairs (properscoring's crps_ensemble), in O(n) on sorted x. */
double kr_crps_ensemble_sorted(const double *x, int n, double y);
/* The CRPS of a Gaussian N(mu, sd^2) against y, in closed form; |y - mu| when sd is 0. */
double kr_crps_gaussian(double mu, double sd, double y);
/* The share of x[n] (sorted ascending) below y, ties counted half. */
double kr_share_below_sorted(const double *x, int n, double y);
/* The standard normal CDF. */
double kr_normal_cdf(double z);
/* The population standard deviation of the log-returns of close[0..n) (n - 1 returns), or
 * NAN when a close is not > 0 or n < 2. */
double kr_log_return_sd(const double *close, int n);

/* A value and its index, ordered by value then index. */
typedef struct {
    double v;
    int i;
} kr_keyed;
/* The 1-based ranks of x[n] into rank[n], tied values given their average rank (scipy's
 * rankdata "average"); scratch holds n. */
void kr_average_ranks(const double *x, int n, kr_keyed *scratch, double *rank);
/* The Pearson correlation of x[n] and y[n]; NAN when n < 2 or either is constant (every
 * value equal). */
double kr_pearson(const double *x, const double *y, int n);

/* ---- calibration (kronos.h states the rules) ---- */

/* The 1-based rank of a level's conformal quantile among n scores. */
int kr_conformal_rank(int n, double tau);
/* numpy's linear quantile of sorted[n] at tau. */
double kr_quantile_linear(const double *sorted, int n, double tau);
/* raw[G] + last * shift[G], sorted ascending into out[G]. */
void kr_calib_shifted(const double *raw, int G, double last, const double *shift, double *out);
/* The first index of the ascending a[n] whose value is >= v (lower), > v (upper); n: none. */
int kr_lower_bound(const double *a, int n, double v);
int kr_upper_bound(const double *a, int n, double v);
/* One outcome into the distinct raw P(up) values ux[n] (ascending), their counts uw and sums
 * of up us: x inserted if new, then counted. Returns the new n; a new x is left out when n
 * is cap already. */
int kr_up_points_add(double *ux, double *uw, double *us, int n, int cap, double x, double up);
/* The level of y within the ascending grid q[G] of levels[G]. */
double kr_pit_in_grid(const double *q, const double *levels, int G, double y);
/* 2 x the mean pinball loss of q[G] at levels[G] against y. */
double kr_crps_quantile(const double *q, const double *levels, int G, double y);
/* Pool-adjacent-violators over n points in x order with weights w[n] (> 0) and sums of y
 * sum_y[n]: the fitted non-decreasing values in fit[n]; scratch holds 3n doubles. Returns
 * the number of blocks. */
int kr_pav(const double *w, const double *sum_y, int n, double *fit, double *scratch);
/* The P(up) map of points x[n] (increasing), y[n] at p (linear between, the end's outside). */
double kr_isotonic_at(const double *x, const double *y, int n, double p);
/* PAV over the distinct raw values x[n] (increasing), clamped (kronos.h): out_x, out_y [n]. */
int kr_isotonic_fit(const double *x, const double *w, const double *sum_y, int n, double *out_x,
                    double *out_y, double *scratch);
/* The Kolmogorov-Smirnov distance of u[n] from uniform on [0, 1] (u is sorted in place). */
double kr_ks_uniform(double *u, int n);
/* Whether a level is one of the fine grid's (i / 100, i in 1..99, as the grid makes it). */
bool kr_calib_is_fine(double level);
/* The index of a level in c's grid, or -1. */
int kr_calib_level_index(const kr_calibration *c, double level);
/* One step of a forecast calibrated by c: the raw grid from the sorted paths, the calibrated
 * grid, the calibrated P(up). raw_grid and cal_grid hold c->n_grid. */
void kr_calib_step(const kr_calibration *c, int h, const double *sorted, int S, double last,
                   double raw_p_up, double *raw_grid, double *cal_grid, double *p_up);
/* The same for column kr_calib_columns[j] (c->has_columns): its raw and calibrated grids. */
void kr_calib_column_step(const kr_calibration *c, int j, int h, const double *sorted, int S,
                          double last, double *raw_grid, double *cal_grid);

/* ---- the evaluation's score sums, shared by the raw and the calibrated scores ---- */

typedef struct {
    double abs, sq, ape, hit, brier, crps, covered[KR_MAX_QUANTILES / 2];
    long n, n_ape;
} kr_eval_sums;

enum { KR_SUMS_DIRECTION = 1, KR_SUMS_BRIER = 2, KR_SUMS_COVERAGE = 4 };
void kr_eval_sums_add(kr_eval_sums *s, double point, double last, double y, double p_up,
                      double crps, const double *covered, int n_pairs);
/* The sums' scores at step h (of H = horizon + 1) into scores[metric][H] and
 * coverage[pair][H]; what: the KR_SUMS_* that apply (else NAN). */
void kr_eval_sums_write(const kr_eval_sums *s, unsigned what, int n_pairs, int H, int h,
                        double *scores, double *coverage);

/* The calibrated scores' side of an evaluation: buffers at init, each origin's sorted close
 * paths of step h as it is added, the scores at finish (after the raw ones: crps and pit are
 * the raw model's per origin and step). */
int kr_eval_calibrated_init(kr_evaluation *ev, const kr_evaluate_request *req, kr_error *err);
void kr_eval_calibrated_add(kr_evaluation *ev, int k, int h, const double *sorted);
/* Origin k's open, high and low paths, sorted per step, when the calibration has columns. */
void kr_eval_calibrated_add_columns(kr_evaluation *ev, int k, const kr_forecast_result *res);
int kr_eval_calibrated_finish(kr_evaluation *ev, const kr_evaluate_request *req, const double *crps,
                              const double *pit, kr_error *err);
void kr_eval_calibrated_free(kr_evaluation *ev);

/* ---- anomaly flags (kr_anomalies) ---- */

/* The index of the request's pair lo..hi among ev's pairs (levels matched within 1e-9), or
 * -1. */
int kr_eval_pair_index(const kr_evaluation *ev, double lo, double hi);
/* ev->anomalies from a scored evaluation (after the calibrated scores, when calibrated):
 * pit[origins][horizon] is the raw model's share of paths below the actual. */
int kr_eval_anomalies_finish(kr_evaluation *ev, const kr_evaluate_request *req, const double *pit,
                             kr_error *err);
void kr_eval_anomalies_free(kr_evaluation *ev);

#endif
