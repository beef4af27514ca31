/* kronos_forecast.h — forecasts from candles, and candle series (live sessions) that hold them
 * ready. Part of the API kronos.h gathers; its conventions are there. */
#ifndef KRONOS_FORECAST_H
#define KRONOS_FORECAST_H

#include "kronos_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- forecast ---------------------------------------------------------------------------- */

#define KR_MAX_QUANTILES 32

typedef struct {
    kr_candles context;               /* L = context.n >= 2 candles */
    int horizon;                      /* P >= 1 */
    const int64_t *future_timestamps; /* [P], or NULL: continue at the last interval */
    int samples;                      /* >= 1 */
    kr_sampling sampling;
    uint64_t seed;
    int max_context; /* 0 = the model's; else 1..model's */
    bool use_cache;  /* false: the plain reference path */
    bool return_paths;
    int n_quantiles;
    double quantiles[KR_MAX_QUANTILES]; /* each in [0, 1] */
    kr_cancel cancel;
    kr_norm norm; /* the context's own statistics unless pinned */
    /* The planned work of the whole request this forecast is a part of (an evaluation's
     * origins): the scheduler classes it light or heavy by that, so that a heavy request
     * split into small forecasts never passes for light. 0: its own. */
    double class_flops;
} kr_forecast_request;

/* What a forecast request will take, worked out before any model work: kr_forecast_plan
 * checks every field once (KR_E_INVALID naming the field, KR_E_TOO_LARGE for what this
 * model can never serve) and says what the request costs, so that a server can refuse
 * what will never fit and queue the rest by cost. The forecast itself runs this plan. */
typedef struct {
    int max_context;      /* the window's length limit in effect */
    int cached_steps;     /* steps decoded on the KV cache (the window still starts at 0) */
    int recomputed_steps; /* steps whose window slid and is recomputed */
    size_t pool_bytes;    /* KV pool bytes held at most (the cached path) */
    double flops;         /* compute of the products, estimated from the shapes */
} kr_forecast_plan;

int kr_forecast_plan_make(const kr_model *m, const kr_forecast_request *req, kr_forecast_plan *plan,
                          kr_error *err);

/* Candles -> normalised (with norm's statistics when pinned; norm may be NULL), encoded
 * token pairs s1[n], s2[n], with the normalisation used. */
int kr_tokenize_candles(const kr_model *m, const kr_candles *candles, const kr_norm *norm,
                        int32_t *s1, int32_t *s2, float mean[KR_D_IN], float std[KR_D_IN],
                        kr_error *err);
/* Token pairs -> candles out[KR_D_IN][n] in the units of mean/std (what
 * kr_tokenize_candles returned): decoded, then y * (std + 1e-5) + mean. */
int kr_detokenize(const kr_model *m, const int32_t *s1, const int32_t *s2, int n,
                  const float mean[KR_D_IN], const float std[KR_D_IN], double *out, kr_error *err);

/* Default sampling and options, as upstream's predict(): T=1, top_k=0, top_p=0.9, 1 path. */
void kr_forecast_request_init(kr_forecast_request *req);

typedef struct {
    int horizon, samples, n_quantiles;
    int64_t *timestamps; /* [horizon] wall-clock seconds of the forecast rows */
    double *mean;        /* [KR_D_IN][horizon] */
    double *paths;       /* [samples][KR_D_IN][horizon] when return_paths, else NULL */
    double *quantiles;   /* [n_quantiles][KR_D_IN][horizon], or NULL */
    double quantile_levels[KR_MAX_QUANTILES];
    double *prob_close_up; /* [horizon]: share of paths whose close > last observed close */
    float norm_mean[KR_D_IN], norm_std[KR_D_IN]; /* the normalisation used */
    struct {
        int context_candles;
        int generated_tokens; /* pairs generated, all paths */
        int cached_steps;     /* steps served from the KV cache */
        int recomputed_steps; /* steps that recomputed the window */
        double elapsed_ms;
        kr_precision weights, kv; /* the model's modes that produced it */
    } usage;
} kr_forecast_result;

/* Runs a forecast with caches from `pool`, or from a private pool sized for the request
 * when pool is NULL. */
int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *req,
                kr_forecast_result *res, kr_error *err);
void kr_forecast_result_free(kr_forecast_result *res);
/* n forecasts at once: each one's context on its own, then every path of all of them
 * decoded in lockstep, one batched step for all (a request's numbers do not depend on the
 * others: each row's arithmetic is its own). errs[i] says how request i ended (code KR_OK:
 * success); one that fails or is cancelled leaves the others running. Returns 0 when all
 * succeeded, -1 when any failed. */
int kr_forecast_batch(const kr_model *m, kr_pool *pool, const kr_forecast_request *const *reqs,
                      int n, kr_forecast_result *res, kr_error *errs);

/* ---- candle series (live sessions) ------------------------------------------------------ */

/* A growing series of candles held ready to forecast: its raw candles, statistics fixed at
 * creation, the tokenizer encoder's cache (every encoder layer's keys and values of the
 * candles so far, so that appended candles are encoded against them and never by
 * re-encoding the series) with every candle's tokens, and a predictor cache (from the pool)
 * holding the window a forecast's first step would prefill: the last max_context tokens.
 * A forecast from the series (kr_sched_add_forecast_series) forks that cache and equals, bit
 * for bit, kr_forecast on the same candles with the series' statistics pinned.
 * A series is used by one thread at a time. */
typedef struct kr_series kr_series;

/* The series of these candles (at least 1), its statistics norm's when pinned (norm may be
 * NULL), else those of these candles. max_candles: the most the series may ever hold (0: no
 * limit; beyond it appends fail with KR_E_TOO_LARGE). */
kr_series *kr_series_create(const kr_model *m, kr_pool *pool, const kr_candles *candles,
                            const kr_norm *norm, int max_candles, kr_error *err);
/* The same series without a predictor cache: creating it and appending to it run no
 * predictor rows, and a forecast from it fills its first window itself, under the step
 * budget of the scheduler that runs it (the same answer). For a caller that grows a series
 * on the scheduler's own thread, where a refilled window would hold up every other request. */
kr_series *kr_series_create_cacheless(const kr_model *m, kr_pool *pool, const kr_candles *candles,
                                      const kr_norm *norm, int max_candles, kr_error *err);
/* What a series' candles must meet, checked without building anything, so that candles
 * kept elsewhere (a session journal) are held to the rules a live request is held to. The
 * series' side of an append: its length, last timestamp and which columns it has. */
typedef struct {
    int n;
    int64_t last_timestamp;
    bool has[KR_D_IN];
    int max_candles; /* 0: no limit */
} kr_series_shape;

/* kr_series_create's checks of candles and norm (KR_E_INVALID naming the field,
 * KR_E_TOO_LARGE past max_candles); the statistics' finiteness is checked at creation. */
int kr_series_check_create(const kr_candles *candles, const kr_norm *norm, int max_candles,
                           kr_error *err);
/* kr_series_append's checks of candles against a series of that shape. */
int kr_series_check_append(const kr_series_shape *shape, const kr_candles *candles, kr_error *err);
/* Token pairs and time stamps as the model takes them (KR_E_INVALID naming the pair). */
int kr_model_check_tokens(const kr_model *m, const int32_t *s1, const int32_t *s2,
                          const kr_stamp *stamps, int n, kr_error *err);

/* Appends candles (the same columns as the series has; timestamps after its last). On
 * failure the series is as it was. */
int kr_series_append(kr_series *s, const kr_candles *candles, kr_error *err);
/* The same after moving the series' clock by shift seconds: the candles' timestamps are on
 * a clock shift seconds ahead of the series' (another zone offset), and a stateless
 * forecast of the whole series puts every timestamp on the last one's clock, so the
 * series' timestamps move with it (and its predictor cache is refilled: the time features
 * change). shift 0 is kr_series_append. On failure the series is as it was. */
int kr_series_append_shifted(kr_series *s, const kr_candles *candles, int64_t shift, kr_error *err);
/* The model work (FLOPs of the products, as kr_forecast_plan estimates a forecast's) of
 * appending k candles now, reclock: at another clock (kr_series_append_shifted). Past
 * max_context each append prefills the whole window again (positions start at 0 in every
 * window), so a one-candle append then costs a window's prefill. */
double kr_series_append_flops(const kr_series *s, int k, bool reclock);
/* The compute kr_series_create spends on n candles (an estimate from the shapes, as the
 * plan's): what building a series held as its candles alone costs. */
double kr_series_create_flops(const kr_model *m, int n);
/* The most candles the series may hold from now on (0: no limit); it already holds what it
 * holds. A reloaded limit applies to a live series from its next append. */
void kr_series_set_max_candles(kr_series *s, int max_candles);
void kr_series_free(kr_series *s);
int kr_series_length(const kr_series *s);
int64_t kr_series_last_timestamp(const kr_series *s);
void kr_series_stats(const kr_series *s, float mean[KR_D_IN], float std[KR_D_IN]);
/* Memory held: the series' own (candles, tokens, encoder cache) and its predictor cache's
 * pool bytes. */
size_t kr_series_bytes(const kr_series *s);
/* Of that, the series' own memory, outside the pool: its candles, tokens and the tokenizer's
 * encoder and decoder caches. */
size_t kr_series_heap_bytes(const kr_series *s);
/* What a series of n candles (every column) holds at most: its own memory, returned, and its
 * predictor cache's pool bytes in *pool_bytes (either may be 0: n <= 0). A server plans room
 * with it before the work. */
size_t kr_series_bytes_for(const kr_model *m, int n, size_t *pool_bytes);
/* Points req's context at the series' candles and pins its statistics: the stateless
 * request that a forecast from the series equals. The other fields are left. */
void kr_series_request(const kr_series *s, kr_forecast_request *req);

#ifdef __cplusplus
}
#endif
#endif
