/* kronos_evaluate.h — walk-forward evaluation of forecasts against what came, and
 * cross-sectional scores of many series at the same origins. Part of the API kronos.h gathers; its
 * conventions are there. */
#ifndef KRONOS_EVALUATE_H
#define KRONOS_EVALUATE_H

#include "kronos_calibration.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- walk-forward evaluation -------------------------------------------------------------- */

/* Forecasts from many origins of one series, scored against what happened and against two
 * naive baselines. An origin is the index of its first forecast row: origin o forecasts
 * candles[o, o + horizon) and is scored on their closes.
 *
 * KR_EVAL_WINDOW: origin o is exactly kr_forecast of candles[o - lookback, o) with its own
 * statistics and future_timestamps = the actual timestamps of candles[o, o + horizon).
 * KR_EVAL_LIVE: what a candle series would have said: statistics pinned from the first
 * origin's window (or norm when pinned), the context growing from that window to o (sliding
 * past max_context) — kr_forecast of candles[first_origin - lookback, o) with those
 * statistics pinned, which a series created with the first window and appended up to o
 * answers bit for bit. */
typedef enum { KR_EVAL_WINDOW, KR_EVAL_LIVE } kr_eval_mode;
typedef enum { KR_CALIB_NONE, KR_CALIB_ROLLING, KR_CALIB_GIVEN } kr_calib_mode;

typedef struct {
    kr_candles candles; /* the whole series */
    int lookback;       /* >= 2 candles of context per origin */
    int horizon;        /* >= 1 steps forecast and scored from each origin */
    int stride;         /* candles between origins; 0: horizon */
    int first_origin;   /* -1: lookback */
    int last_origin;    /* -1: the last origin with horizon actuals */
    int samples;        /* >= 1 paths per origin */
    kr_sampling sampling;
    uint64_t seed;
    int max_context; /* as kr_forecast_request's */
    int n_quantiles;
    double quantiles[KR_MAX_QUANTILES]; /* the levels scored; symmetric pairs give coverage */
    kr_eval_mode mode;
    kr_norm norm;      /* KR_EVAL_LIVE only: statistics to pin instead of the first window's */
    bool keep_origins; /* keep each origin's close paths (kr_evaluation.paths) */
    kr_cancel cancel;
    /* Beside the raw model, the calibrated forecaster (kr_calibration): KR_CALIB_ROLLING
     * calibrates each origin from the outcomes known before it (origin j's step h, candle
     * o_j + h, only where o_j + h < o), scoring the origins with at least calibration_warmup
     * such outcomes at every step, and fits an object on every origin; KR_CALIB_GIVEN
     * applies calibration unchanged to every origin. model_id: the caller's identifier of
     * the model, written into a fitted object and matched against a given one (NULL: a
     * given one's model is not checked). */
    kr_calib_mode calibration_mode;
    int calibration_warmup; /* >= 1; default 50 */
    const kr_calibration *calibration;
    const char *model_id;
    /* Anomaly flags: with anomalies, each origin-step whose actual close fell outside the band
     * anomaly_lo..anomaly_hi, which must be one of the symmetric pairs of quantiles
     * (kr_evaluation.anomalies). */
    bool anomalies;
    double anomaly_lo, anomaly_hi;
} kr_evaluate_request;

/* Defaults: stride = horizon, first and last origin as above, samples 1, sampling and seed
 * as kr_forecast_request_init, quantiles 0.1, 0.5, 0.9, window mode. */
void kr_evaluate_request_init(kr_evaluate_request *req);

/* What an evaluation takes, worked out before any model work: every field checked once
 * (KR_E_INVALID naming the field; each origin's forecast is planned as kr_forecast_plan_make
 * would), the origins, and their cost. */
typedef struct {
    int origins, stride, first_origin, last_origin;
    double flops;                      /* the sum of the origins' */
    size_t pool_bytes;                 /* the most that one origin holds */
    float mean[KR_D_IN], std[KR_D_IN]; /* KR_EVAL_LIVE: the statistics pinned */
} kr_evaluate_plan;

int kr_evaluate_plan_make(const kr_model *m, const kr_evaluate_request *req, kr_evaluate_plan *plan,
                          kr_error *err);
/* The forecast request of origin k (0-based; origin first_origin + k * stride): it points
 * into req's candles, and asks for the paths (which the scores need). */
void kr_evaluate_origin_request(const kr_evaluate_request *req, const kr_evaluate_plan *plan, int k,
                                kr_forecast_request *out);

/* Scores, per step and overall (index horizon: over every origin and step together). */
enum {
    KR_EVAL_MAE,
    KR_EVAL_RMSE,
    KR_EVAL_MAPE,
    KR_EVAL_DIRECTION,
    KR_EVAL_BRIER,
    KR_EVAL_CRPS,
    KR_EVAL_METRICS
};
enum { KR_EVAL_MODEL, KR_EVAL_PERSISTENCE, KR_EVAL_RANDOM_WALK, KR_EVAL_FORECASTERS };
#define KR_EVAL_PIT_BINS 10
extern const char *const kr_eval_metric_names[KR_EVAL_METRICS];         /* "mae" .. "crps" */
extern const char *const kr_eval_forecaster_names[KR_EVAL_FORECASTERS]; /* "model", ... */

typedef struct {
    int origins, horizon, samples, n_quantiles, n_pairs;
    kr_eval_mode mode;
    double quantile_levels[KR_MAX_QUANTILES];
    /* symmetric pairs of quantile levels (lo + hi = 1), outermost first: level indexes */
    int pair_lo[KR_MAX_QUANTILES / 2], pair_hi[KR_MAX_QUANTILES / 2];
    /* [forecaster][metric][horizon + 1]; NAN where a metric does not apply (persistence:
     * direction, Brier; random walk: direction) */
    double *scores;
    /* [forecaster][pair][horizon + 1]: share of actual closes within the pair's levels; NAN
     * for persistence */
    double *coverage;
    /* [baseline: 0 persistence, 1 random walk][0 MAE, 1 CRPS][horizon + 1]: 1 - model /
     * baseline */
    double *skill;
    double pit[KR_EVAL_PIT_BINS]; /* shares of origin-steps by the share of paths below */
    /* per origin */
    int *origin_index;   /* [origins] */
    int64_t *timestamps; /* [origins][horizon]: the actual rows' */
    double *last_close;  /* [origins] */
    double *actual;      /* [origins][horizon] closes */
    /* the forecasts' closes: [origins][horizon], [origins][n_quantiles][horizon],
     * [origins][horizon]; paths [origins][samples][horizon] with keep_origins, else NULL */
    double *mean, *quantiles, *prob_close_up, *paths;
    struct {
        long long generated_tokens;
        double flops, elapsed_ms;
        kr_precision weights, kv; /* the model's modes that produced it */
    } usage;
    struct kr_eval_acc *acc; /* opaque: the per-origin scores gathered until kr_evaluation_finish */
    struct kr_eval_calibrated *calibrated; /* with a calibration mode, else NULL */
    struct kr_anomalies *anomalies;        /* with kr_evaluate_request.anomalies, else NULL */
} kr_evaluation;

/* The calibrated forecaster's scores (kr_evaluate_request.calibration_mode). Its CRPS is
 * the quantile form, 2 x the mean pinball loss over the fine grid 0.01 .. 0.99; its point
 * forecast the mean of those quantiles; its PIT the actual's level interpolated linearly
 * within the calibrated grid (the grid's first level / 2 below it, (1 + the last) / 2
 * above, the middle level of a run of equal quantiles). */
enum { KR_CAL_MODEL, KR_CAL_MODEL_SCORED, KR_CAL_CALIBRATED, KR_CAL_KINDS };
typedef struct kr_eval_calibrated {
    int scored;       /* origins scored: the last `scored` of them */
    int first_scored; /* the index (0-based) of the first; origins when none */
    /* [0 the raw model on the scored origins, 1 calibrated][metric][horizon + 1] and
     * [0, 1][pair][horizon + 1], as kr_evaluation.scores and coverage */
    double *scores, *coverage;
    double *crps_quantile_model;  /* [horizon + 1]: the raw quantile-form CRPS, scored origins */
    double pit[KR_EVAL_PIT_BINS]; /* the calibrated PIT's histogram */
    /* [KR_CAL_*]: the model on every origin, the model on the scored origins, calibrated */
    double pit_ks[KR_CAL_KINDS]; /* Kolmogorov-Smirnov distance of the PIT from uniform */
    /* reliability of P(up) in KR_EVAL_PIT_BINS equal bins of [0, 1] (the last closed) */
    long rel_count[KR_CAL_KINDS][KR_EVAL_PIT_BINS];
    double rel_prob[KR_CAL_KINDS][KR_EVAL_PIT_BINS], rel_up[KR_CAL_KINDS][KR_EVAL_PIT_BINS];
    /* per origin: [origins][n_quantiles][horizon], [origins][horizon]; NAN where unscored */
    double *quantiles, *prob_close_up;
    double *pit_at; /* [origins][horizon]: the calibrated PIT; NAN where unscored */
    /* with fitted.has_columns, [0 raw, 1 calibrated][KR_CALIB_COLS][pair][horizon + 1]: each
     * column's coverage on the scored origins (raw: the paths' linear quantiles), else NULL */
    double *col_coverage;
    /* with fitted.has_columns, [KR_CALIB_COLS][origins][n_quantiles][horizon]: each origin's
     * calibrated column quantiles; NAN where unscored; else NULL */
    double *col_quantiles;
    kr_calibration fitted; /* rolling: fitted on every origin; given: the one applied */
    void *acc;             /* each origin's sorted close paths until kr_evaluation_finish */
} kr_eval_calibrated;

/* The origin-steps whose actual close fell outside the request's anomaly band, set by
 * kr_evaluation_finish. Calibrated evaluations flag against the calibrated bands and PIT,
 * checking only the scored origins (kr_eval_calibrated.first_scored on: the origins of the
 * warm-up are not checked); others against the paths' quantiles (kr_evaluation.quantiles)
 * and the share of paths below the actual (ties half). Outside a band is strictly below its
 * lower level's value or strictly above its upper's (coverage counts the bounds in). */
typedef struct {
    int origin, step; /* the origin's index k among the evaluation's (0-based), step (0-based) */
    double pit, lower, upper; /* the PIT, the band's bounds */
    unsigned outside;         /* bit j: outside pair j (kr_evaluation.pair_lo/hi) */
} kr_anomaly;
typedef struct kr_anomalies {
    int pair;        /* the band's index among the evaluation's pairs */
    bool calibrated; /* flagged against the calibrated forecaster */
    long checked;    /* origin-steps checked */
    int count;       /* of them flagged: points[count], by origin then step */
    kr_anomaly *points;
} kr_anomalies;

/* An evaluation's buffers for plan's origins; then each origin's forecast added (in any
 * order, each once), then the scores. */
int kr_evaluation_init(const kr_evaluate_request *req, const kr_evaluate_plan *plan,
                       kr_evaluation *ev, kr_error *err);
int kr_evaluation_add(kr_evaluation *ev, const kr_evaluate_request *req, int k,
                      const kr_forecast_result *res, kr_error *err);
int kr_evaluation_finish(kr_evaluation *ev, const kr_evaluate_request *req, kr_error *err);
void kr_evaluation_free(kr_evaluation *ev);

/* The whole evaluation, every origin's forecast run at once through one scheduler (pool as
 * kr_forecast's), then scored. */
int kr_evaluate(const kr_model *m, kr_pool *pool, const kr_evaluate_request *req, kr_evaluation *ev,
                kr_error *err);

/* ---- cross-sectional scores: many series evaluated at the same origin times ----------------- */

/* Series are aligned when each has the same number of origins and, at every origin, the same
 * timestamps at the last context candle and at each of the horizon actual candles (the
 * candles a return is computed from); the last close before every origin must be non-zero
 * (a return's base). Checked before any model work with the cross-section's k: 0 for the
 * default (a fifth of the series, at least 1), else 1..n/2 so that the top and the bottom
 * do not overlap. At least 2 series. KR_E_INVALID naming the series, the candle and the
 * origin ("series[2].candles.timestamps[133]: ..."). */
int kr_cross_section_check(const kr_evaluate_request *reqs, const kr_evaluate_plan *plans, int n,
                           int top_k, kr_error *err);

/* Per origin time k and step h, across the n series: the forecast return r_f = mean close at
 * h / last close - 1 and the realised return r_a = actual close at h / last close - 1;
 *   ic       Pearson correlation of r_f and r_a;
 *   rank_ic  Spearman: Pearson of their ranks, ties given their average rank;
 *            both undefined (NAN) when r_f or r_a is the same in every series;
 *   hit      the share of series with sign(r_f) == sign(r_a) (sign 0 its own);
 *   spread   series ordered by r_f ascending (ties by series index): the mean r_a of the last
 *            top_k minus that of the first top_k.
 * Over origins, per step h and (index horizon) over every origin and step together: the mean
 * of the defined ICs, their sample standard deviation (n - 1; NAN below 2 of them), the IR
 * mean / std (NAN when std is 0 or NAN), how many were defined; the mean hit and spread. */
typedef struct {
    int series, origins, horizon, top_k;
    double *ic, *rank_ic, *hit, *spread; /* [origins][horizon] */
    /* [horizon + 1] */
    double *ic_mean, *ic_std, *ic_ir, *rank_ic_mean, *rank_ic_std, *rank_ic_ir;
    double *hit_rate, *top_bottom_spread;
    int *ic_count, *rank_ic_count;
} kr_cross_section;

/* The scores of the n finished evaluations evs[n] (aligned, as kr_cross_section_check
 * says); top_k 0 for the default. -1 with err when their shapes differ or out of memory. */
int kr_cross_section_score(const kr_evaluation *evs, int n, int top_k, kr_cross_section *cs,
                           kr_error *err);
void kr_cross_section_free(kr_cross_section *cs);

#ifdef __cplusplus
}
#endif
#endif
