/* kronos_calibration.h — calibrating a forecast's close (and open, high, low): a calibration
 * learned walk-forward, and a live series' online one. Part of the API kronos.h gathers; its
 * conventions are there. */
#ifndef KRONOS_CALIBRATION_H
#define KRONOS_CALIBRATION_H

#include "kronos_forecast.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- calibration of a forecast's close (and open, high, low) ------------------------------ */

/* A calibration maps a forecast's raw close paths to calibrated quantiles and a calibrated
 * P(up), per horizon step, learned from outcomes (kr_evaluate with a calibration). Methods:
 *
 *   quantiles  per step and level tau of a grid (the levels asked for and 0.01 .. 0.99): a
 *              one-sided split-conformal shift of the paths' own tau-quantile (numpy's linear
 *              rule), in units of the last close: score e = (actual - q_tau) / last close;
 *              shift = the k-th smallest score, k = floor((n + 1) tau) below tau = 0.5 and
 *              ceil((n + 1) tau) from it (clamped to 1..n; (n + 1) tau rounded to 9
 *              decimals first); q'_tau = q_tau + last close * shift, then the grid sorted
 *              ascending (monotone rearrangement);
 *   P(up)      isotonic regression (pool-adjacent-violators) of [actual > last close] on the
 *              raw P(up) per step: points (x ascending, y non-decreasing), a raw value
 *              between two points interpolated linearly, outside them the end point's;
 *              each fitted y clamped to [1 / (n + 2), (n + 1) / (n + 2)].
 *
 *   columns    (version 2, has_columns) open, high and low (kr_calib_columns) by the
 *              quantiles' method on their own paths and actuals, scores still in units of
 *              the last close; volume and amount are not calibrated.
 *
 * An online update (adaptive conformal inference) may move the shifts and points of an
 * object between forecasts; applying one is the same function whatever fitted it. Version 1
 * objects (close only) are still read. */
#define KR_CALIB_VERSION 2
#define KR_CALIB_COLS    3 /* open, high, low */
extern const int kr_calib_columns[KR_CALIB_COLS];
#define KR_CALIB_FINE     99 /* the fine grid: 0.01, 0.02, ..., 0.99 */
#define KR_CALIB_MAX_GRID (KR_CALIB_FINE + KR_MAX_QUANTILES)
#define KR_CALIB_MODEL    64 /* room for the model's identifier */

typedef struct {
    int version;                /* KR_CALIB_VERSION */
    char model[KR_CALIB_MODEL]; /* the identifier of the model fitted on (the caller's) */
    int horizon, samples;       /* of the forecasts fitted on */
    int n_levels;               /* the levels a forecast answers, as the request asked */
    double levels[KR_MAX_QUANTILES];
    int n_grid; /* every level calibrated: levels and the fine grid, ascending */
    double grid[KR_CALIB_MAX_GRID];
    int fitted;          /* outcomes per step fitted on */
    double *shift;       /* [horizon][n_grid] */
    int up_cap;          /* room for points per step (0 at alloc: samples + 1) */
    int *up_n;           /* [horizon] points of P(up)'s map */
    double *up_x, *up_y; /* [horizon][up_cap] */
    bool has_columns;    /* open, high, low calibrated too (version 2 only) */
    double *col_shift;   /* [KR_CALIB_COLS][horizon][n_grid] with has_columns, else NULL */
} kr_calibration;

/* The grid of levels: levels[n] and 0.01 .. 0.99, ascending, each once; its size. */
int kr_calibration_grid(const double *levels, int n, double grid[KR_CALIB_MAX_GRID]);
/* An empty calibration for horizon steps, samples paths and these levels (the grid made,
 * every shift 0 and every P(up) map the identity; version 2, close only). */
int kr_calibration_init(kr_calibration *c, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err);
/* The arrays of c for its horizon, n_grid, up_cap (0: samples + 1) and has_columns, zeroed:
 * what a reader of a stored object fills in before kr_calibration_check. */
int kr_calibration_alloc(kr_calibration *c, kr_error *err);
void kr_calibration_free(kr_calibration *c);
int kr_calibration_copy(kr_calibration *dst, const kr_calibration *src, kr_error *err);
/* Every rule an object must meet (KR_E_INVALID naming the field, "calibration.grid[3]: ..."):
 * the version, sizes, the grid as kr_calibration_grid makes it, finite shifts, P(up) points
 * within [0, 1], x increasing, y non-decreasing. */
int kr_calibration_check(const kr_calibration *c, kr_error *err);
/* Whether c calibrates forecasts of this model (its identifier; NULL: not checked),
 * horizon, samples and levels (KR_E_INVALID naming the field of c that does not match; the
 * levels compared at float32 precision, as answers write them). */
int kr_calibration_match(const kr_calibration *c, const char *model, int horizon, int samples,
                         const double *levels, int n_levels, kr_error *err);

/* A forecast's close, calibrated: quantiles at c's levels and P(up), per step. */
typedef struct {
    int horizon, n_levels;
    double levels[KR_MAX_QUANTILES];
    double *quantiles;     /* [n_levels][horizon] */
    double *prob_close_up; /* [horizon] */
    double *col_quantiles; /* [KR_CALIB_COLS][n_levels][horizon] with c->has_columns, else NULL */
} kr_calibrated;

/* The forecast res of req (made with return_paths) calibrated by c; c must match it
 * (kr_calibration_match). The same numbers an evaluation with c gives that origin. */
int kr_calibrate_forecast(const kr_calibration *c, const kr_forecast_request *req,
                          const kr_forecast_result *res, kr_calibrated *out, kr_error *err);
void kr_calibrated_free(kr_calibrated *out);

/* ---- online calibration of a live series ----------------------------------------------- */

/* A live series that calibrates its own forecasts: each forecast is kept (its raw close grid
 * and P(up), from the series' length at the time, its origin) until the candles it forecast
 * arrive; candle origin + h resolves its step h. Per step h and grid level tau:
 *
 *   score      e = (actual - q_tau) / last close, as the offline object's, over the last
 *              KR_ONLINE_WINDOW outcomes of the step;
 *   shift      the k-th smallest score, k = kr_conformal rank of n and tau_t (floor((n + 1)
 *              tau_t) below 0.5, ceil from it, clamped to 1..n); the starting object's shift
 *              (0 without one) until the step has KR_ONLINE_WARMUP outcomes;
 *   tau_t      adaptive conformal inference (Gibbs and Candes, 2021): starts at tau, and each
 *              outcome of a forecast issued past the warm-up moves it by
 *              tau_{t+1} = tau_t + KR_ONLINE_GAMMA (tau - [actual <= q'_tau]), q'_tau the
 *              level's calibrated quantile that forecast issued (before rearrangement);
 *   P(up)      isotonic regression of every outcome at the step, as the offline object's (the
 *              starting object's map until the warm-up is over).
 *
 * The current object (kr_calib_online_current) calibrates the next forecast exactly as a
 * given object would (kr_calibrate_forecast). Everything is deterministic arithmetic on the
 * kept forecasts and the closes, so replaying them gives the same object bit for bit. */
#define KR_ONLINE_GAMMA  0.005
#define KR_ONLINE_WINDOW 250
#define KR_ONLINE_WARMUP 20

typedef struct kr_calib_online kr_calib_online;

/* Online calibration starting from start (copied; NULL: every shift 0, P(up) the identity,
 * its shape set by the first forecast). NULL with err when out of memory or start breaks a
 * rule (kr_calibration_check). */
kr_calib_online *kr_calib_online_new(const kr_calibration *start, kr_error *err);
void kr_calib_online_free(kr_calib_online *o);
/* Whether a forecast of this model, horizon, samples and levels fits (KR_E_INVALID naming
 * the request's field otherwise); the first one sets the shape of one started without an
 * object. */
int kr_calib_online_fit(kr_calib_online *o, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err);
/* Whether the shape is set (by a starting object or a first forecast). */
bool kr_calib_online_shaped(const kr_calib_online *o);
/* The object the next forecast is calibrated by (shaped only; changed by keep and resolve). */
const kr_calibration *kr_calib_online_current(const kr_calib_online *o);
/* The close paths of res sorted per step: out[horizon][samples]. */
void kr_forecast_sorted_close(const kr_forecast_result *res, double *out);
/* A fitted forecast from origin (the series' length when made) kept until resolved: its sorted
 * close paths [horizon][samples], raw P(up) [horizon] and the last close before it. It
 * replaces an unresolved forecast from the same origin. */
int kr_calib_online_keep(kr_calib_online *o, long origin, double last_close, const double *sorted,
                         const double *p_up, kr_error *err);

/* What the candle at one index told: the most recent kept forecast of it (the smallest
 * step), its PIT within that forecast's calibrated grid and the symmetric pairs of its levels
 * it fell outside (bit j: pair j of kr_calib_online_stats, strictly below or above). */
typedef struct {
    bool covered; /* a kept forecast had forecast this candle */
    int step;     /* 0-based step of that forecast */
    double pit;
    unsigned outside;
} kr_online_outcome;

/* The candle at index (0-based in the series) closed at close: every kept forecast of it
 * resolved (PIT, coverage, P(up) outcome), the calibration updated. -1 when out of memory
 * (err), and then the state is as before only at the steps not yet updated. */
int kr_calib_online_resolve(kr_calib_online *o, long index, double close, kr_online_outcome *out,
                            kr_error *err);

typedef struct {
    bool shaped;
    long resolved; /* forecast-steps resolved */
    int n_pairs;   /* symmetric pairs of the levels, outermost first */
    double pair_lo[KR_MAX_QUANTILES / 2], pair_hi[KR_MAX_QUANTILES / 2];
    double coverage[KR_MAX_QUANTILES / 2]; /* share within the calibrated pair, bounds in */
    double pit_ks;                         /* KS distance of the PITs from uniform; NAN at 0 */
    double brier;                          /* of the calibrated P(up); NAN at 0 */
    size_t bytes;                          /* what the state holds */
} kr_calib_online_stats;

void kr_calib_online_stats_get(const kr_calib_online *o, kr_calib_online_stats *st);

#ifdef __cplusplus
}
#endif
#endif
