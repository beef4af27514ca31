/* forecast_json.h — the forecast request and response as JSON.
 *
 * Defined once and shared by `kronosd forecast` and `POST /forecast`. The request:
 *
 *   {"candles": CANDLES, "horizon": P,                       required
 *    "future_timestamps": [P timestamps],                    optional
 *    "samples": 1, "temperature": 1.0, "top_k": 0, "top_p": 0.9, "seed": 0,
 *    "max_context": N, "use_cache": true, "return_paths": false, "quantiles": [q, ...],
 *    "timeout_ms": T,                                         T: the server's deadline
 *    "normalization": {"mean": {"open": x, ...}, "std": {...}},  pinned statistics
 *    "calibration": {...}}                                   calibration_json.h's object
 *
 * CANDLES is columnar, {"timestamps": [...], "open": [...], "high": [...], "low": [...],
 * "close": [...], "volume"?: [...], "amount"?: [...]}, or a list of rows,
 * [{"timestamp": t, "open": o, ...}, ...] (the key "timestamps" is also accepted in a row).
 * A timestamp is an ISO 8601 string or Unix seconds (a JSON number); either way it is taken
 * as the wall clock written (see timefmt.h). Timestamps written with different zone offsets
 * are compared as instants: every one is put on the clock of the last context timestamp
 * (naive ones and Unix seconds count as UTC), then they must increase. The response writes
 * timestamps the way the last context timestamp was written; a horizon that would run past
 * year 9999 is refused. Numbers must fit float32, as the model computes in it. An unknown
 * field is an error naming it (and, for upstream Kronos's names, the field to use); a null
 * optional field counts as absent. Quantile levels must be distinct.
 */
#ifndef KD_FORECAST_JSON_H
#define KD_FORECAST_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calibration_json.h"
#include "candles_json.h"
#include "kronos.h"
#include "timefmt.h"

/* What a request may ask for; a limit <= 0 means unlimited. */
typedef struct {
    int max_candles;
    int max_horizon;
    int max_samples;
} kd_forecast_limits;

/* Generous limits for the one-shot command: 100000 candles, 10000 steps, 1000 samples. */
extern const kd_forecast_limits kd_forecast_default_limits;

/* "temperature", "top_k", "top_p", "seed" of body, validated; absent fields leave *s and
 * *seed as they are. Shared by every endpoint that samples. */
int kd_sampling_parse(const json_t *body, kr_sampling *s, uint64_t *seed, char *err, size_t errlen);

/* "samples" (within limits), "temperature", "top_k", "top_p", "seed", "max_context" and
 * "quantiles" of body, typed as /forecast types them (the values' rules are the core's);
 * absent fields leave r as it is. Shared by the requests that forecast (/evaluate). */
int kd_forecast_fields_parse(const json_t *body, const kd_forecast_limits *limits,
                             kr_forecast_request *r, char *err, size_t errlen);
/* A timestamp as a response writes it: the way f says the candles wrote theirs. NULL when
 * out of memory. */
json_t *kd_timestamp_json(int64_t wall, const kd_time_form *f);

/* A parsed request. It owns the arrays that req points into. */
typedef struct {
    kr_forecast_request req;
    kd_owned_candles candles;
    int64_t *future_timestamps; /* [horizon], or NULL */
    long long timeout_ms;       /* the server's deadline for it; 0: request-timeout */
    /* "calibration": the object the answer's close is calibrated by (its paths are then
     * computed, req.return_paths, and answered only when asked, show_paths), or NULL */
    kr_calibration *calibration;
    bool show_paths;
} kd_forecast_input;

/* A request body's common part: a JSON object with no field outside fields (NULL-ended)
 * and its "candles" (at least 2, at most max_candles) parsed into *candles. 0, or -1 with
 * a message. */
int kd_request_object_candles(const json_t *body, const char *const fields[], int max_candles,
                              kd_owned_candles *candles, char *err, size_t errlen);
/* Parses and validates a request with kd_forecast_default_limits. model_max_context bounds
 * "max_context" (<= 0: no bound). Returns 0, or -1 with a message in err that names the
 * field and what is wrong ("candles.close[12]: must be a number, got null"). On failure
 * *in holds nothing; kd_forecast_input_free is safe either way. */
int kd_forecast_request_parse(const json_t *body, int model_max_context, kd_forecast_input *in,
                              char *err, size_t errlen);
/* The same with the caller's limits (NULL: the defaults). */
int kd_forecast_request_parse_limited(const json_t *body, int model_max_context,
                                      const kd_forecast_limits *limits, kd_forecast_input *in,
                                      char *err, size_t errlen);
/* The same from candles parsed elsewhere (CSV) and the other fields in `options` (the
 * query parameters, as JSON values). Takes the candles: *candles is left empty. */
int kd_forecast_request_with_candles(const json_t *options, kd_owned_candles *candles,
                                     int model_max_context, const kd_forecast_limits *limits,
                                     kd_forecast_input *in, char *err, size_t errlen);
/* The request's fields other than "candles", NULL-terminated. */
const char *const *kd_forecast_option_names(void);
void kd_forecast_input_free(kd_forecast_input *in);

/* "normalization": {"mean": {"open": x, ..., "amount": x}, "std": {...}} (v: the field's
 * value, NULL or null when absent) into norm->pinned and its statistics: every column of
 * both, finite in float32, std >= 0. */
int kd_normalization_parse(const json_t *v, kr_norm *norm, char *err, size_t errlen);
/* The same object from statistics, or NULL when out of memory. */
json_t *kd_normalization_json(const float mean[KR_D_IN], const float std[KR_D_IN]);

/* The response for a finished forecast, or NULL when out of memory:
 *
 *   {"timestamps": [P], "mean": {"open": [P], ..., "amount": [P]}, "horizon": P,
 *    "samples": S, "normalization": {"mean": {...}, "std": {...}},  the statistics used
 *    "usage": {"context_candles": L, "generated_tokens": n,
 *    "cached_steps": n, "recomputed_steps": n, "elapsed_ms": x},
 *    "paths": [{"open": [P], ...}, ...S]         when res->paths
 *    "quantiles": {"0.1": {"open": [P], ...}}    when res->n_quantiles > 0; each key is
 *                                                the level's shortest round-trip decimal
 *    "prob_close_up": [P]}                       when res->prob_close_up
 *
 * With a calibration: "quantiles" is {"0.1": {"close": [P]}, ...} and "prob_close_up" [P]
 * calibrated (kr_calibrate_forecast), the raw ones in "raw": {"quantiles": {...},
 * "prob_close_up": [P]}, "calibrated": true and "calibration": {"version", "model",
 * "origins", "methods"}; "paths" only when asked for.
 *
 * A value that is not finite is written as null. */
json_t *kd_forecast_response_json(const kd_forecast_input *in, const kr_forecast_result *res);

/* {"open": [n], ..., "amount": [n]} from a [KR_D_IN][n] block (non-finite values as null),
 * or NULL when out of memory. */
json_t *kd_columns_json(const double *block, int n);

#endif
