/* evaluate_impl.h — the evaluation floor's internals: the scores of one origin and step,
 * written once here so that the tests check them on hand-computed cases. Internal to core/;
 * the tests include it.
 *
 * The files of this floor, each using only those listed before it:
 *   eval_plan.c    the request contract: its rules, the origins, their forecast requests, cost
 *   eval_scores.c  the scores: per origin as each forecast ends, then per step and overall
 *   eval_run.c     kr_evaluate: every origin's forecast through the one driver (kr_run)
 *   eval_cross.c   cross-sectional scores of many series' evaluations at the same origins
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

#endif
