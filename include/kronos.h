/* kronos.h — public API of the Kronos decoder library (core/).
 *
 * The library loads a Kronos tokenizer + predictor in the released Hugging Face layout
 * and computes what the upstream Python implementation computes. It knows nothing of
 * HTTP or of request JSON; the server and the one-shot command translate to these calls.
 *
 * Conventions: functions that can fail return 0 on success and -1 on failure, with a
 * message in a kr_error saying what went wrong and where. A loaded model is read-only and
 * may be shared by any number of threads.
 */
#ifndef KRONOS_H
#define KRONOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KR_VERSION "0.1.0"
#define KR_ERR_MAX 512
#define KR_D_IN    6 /* open, high, low, close, volume, amount */

typedef struct {
    char msg[KR_ERR_MAX];
} kr_error;

/* Formats a message into err (if err is not NULL) and returns -1. */
int kr_fail(kr_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- model ------------------------------------------------------------------------- */

typedef struct {
    int d_in, d_model, n_heads, ff_dim;
    int n_enc_layers, n_dec_layers; /* as in config.json: blocks = n - 1 */
    int s1_bits, s2_bits;
} kr_tokenizer_config;

typedef struct {
    int d_model, n_layers, n_heads, ff_dim;
    int s1_bits, s2_bits;
    bool learn_te;
    bool kv_shift;
} kr_predictor_config;

typedef struct kr_model kr_model;

typedef struct {
    const char *tokenizer_dir; /* holds config.json + model.safetensors */
    const char *predictor_dir;
    int max_context; /* the released model's window (512 or 2048); 0 means 512 */
} kr_model_paths;

kr_model *kr_model_load(const kr_model_paths *paths, kr_error *err);
void kr_model_free(kr_model *m);

const kr_tokenizer_config *kr_model_tokenizer_config(const kr_model *m);
const kr_predictor_config *kr_model_predictor_config(const kr_model *m);
int kr_model_max_context(const kr_model *m);
size_t kr_model_param_count(const kr_model *m); /* weights used at inference, both parts */

/* ---- time stamps --------------------------------------------------------------------- */

/* The five calendar features of one candle, as upstream's calc_time_stamps makes them. */
typedef struct {
    int minute;  /* 0-59 */
    int hour;    /* 0-23 */
    int weekday; /* Monday = 0 */
    int day;     /* 1-31 */
    int month;   /* 1-12 */
} kr_stamp;

/* `wall` counts seconds since 1970-01-01T00:00:00 of the wall-clock fields as written
 * (no zone conversion). */
kr_stamp kr_stamp_from_wall(int64_t wall);
/* 0 if every field is in range, else -1 with a message naming the field. */
int kr_stamp_check(const kr_stamp *s, kr_error *err);

/* ---- tokenizer ----------------------------------------------------------------------- */

/* x: [n][d_in] normalised candles -> s1[n], s2[n]. Causal over all n candles. */
int kr_tokenizer_encode(const kr_model *m, const float *x, int n, int32_t *s1, int32_t *s2,
                        kr_error *err);
/* token pairs -> out: [n][d_in] normalised candles. */
int kr_tokenizer_decode(const kr_model *m, const int32_t *s1, const int32_t *s2, int n, float *out,
                        kr_error *err);

/* ---- predictor, uncached reference ------------------------------------------------------ */

/* Runs the predictor over a window of n token pairs (positions 0..n-1).
 * s1_logits: [2^s1_bits] at the last position. context (optional): [n][d_model], the
 * normalised hidden states that kr_predictor_s2_logits needs. */
int kr_predictor_window(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *s1_logits, float *context,
                        kr_error *err);
/* s2 logits [2^s2_bits] for a chosen s1, from the context of a window of n positions. */
int kr_predictor_s2_logits(const kr_model *m, const float *context, int n, int32_t s1,
                           float *s2_logits, kr_error *err);

/* ---- sampling ---------------------------------------------------------------------------- */

typedef struct {
    double temperature; /* > 0 */
    int top_k;          /* 0 = off; when > 0, top_p is ignored */
    double top_p;       /* (0, 1]; 1 = off */
} kr_sampling;

/* 0 if the settings are valid, else -1 with a message naming the field. */
int kr_sampling_check(const kr_sampling *s, kr_error *err);

/* xoshiro256** seeded through splitmix64: the same seed gives the same stream everywhere. */
typedef struct {
    uint64_t s[4];
} kr_rng;

void kr_rng_seed(kr_rng *rng, uint64_t seed);
uint64_t kr_rng_next(kr_rng *rng);
double kr_rng_uniform(kr_rng *rng); /* [0, 1) with 53 random bits */

/* Filters logits[n] in place with upstream's rules (temperature, then top-k or top-p),
 * leaving -INFINITY on dropped tokens. */
void kr_sampling_filter(float *logits, int n, const kr_sampling *s);
/* Draws one token from logits[n] (modified in place: filtered, then probabilities). */
int32_t kr_sample(float *logits, int n, const kr_sampling *s, kr_rng *rng);

/* ---- normalisation ------------------------------------------------------------------------ */

/* Upstream's per-column normalisation of x[n][6] raw float32 candles, as numpy computes it
 * on float32 arrays: mean and population std per column, xn = clip((x - mean) / (std +
 * 1e-5), -5, 5). */
int kr_normalise(const float *x, int n, float *xn, float mean[KR_D_IN], float std[KR_D_IN],
                 kr_error *err);

/* ---- forecast ---------------------------------------------------------------------------- */

enum { KR_OPEN, KR_HIGH, KR_LOW, KR_CLOSE, KR_VOLUME, KR_AMOUNT };
extern const char *const kr_column_names[KR_D_IN];

#define KR_MAX_QUANTILES 32

typedef struct {
    int n_context;                    /* L >= 2 */
    const int64_t *timestamps;        /* [L] wall-clock seconds, strictly increasing */
    const double *columns[KR_D_IN];   /* open..close required; volume, amount may be NULL */
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
} kr_forecast_request;

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
    struct {
        int context_candles;
        int generated_tokens; /* pairs generated, all paths */
        int cached_steps;     /* steps served from the KV cache */
        int recomputed_steps; /* steps that recomputed the window */
        double elapsed_ms;
    } usage;
} kr_forecast_result;

int kr_forecast(const kr_model *m, const kr_forecast_request *req, kr_forecast_result *res,
                kr_error *err);
void kr_forecast_result_free(kr_forecast_result *res);

#ifdef __cplusplus
}
#endif
#endif
