/* evaluate_json.h — the walk-forward evaluation request and response as JSON (POST
 * /evaluate; the core's contract is kr_evaluate_plan_make). The request:
 *
 *   {"candles": CANDLES, "lookback": L, "horizon": P,            required
 *    "stride": P, "first_origin": L, "last_origin": n - P,       the origins
 *    "samples": 1, "temperature": 1.0, "top_k": 0, "top_p": 0.9, "seed": 0,
 *    "max_context": N, "quantiles": [0.1, 0.5, 0.9],             as /forecast
 *    "mode": "window" | "live", "normalization": {...},          live: statistics pinned
 *    "return_origins": false, "timeout_ms": T,
 *    "anomalies": {"band": "0.1-0.9"}}                           a symmetric pair of quantiles
 *
 * CANDLES is any /forecast form (forecast_json.h); with a text/csv body the other fields
 * come as query parameters. The response (metrics on close; each per-step array has P
 * entries, "overall" pools every origin and step):
 *
 *   {"origins": n, "horizon": P, "samples": S, "mode": "window", "lookback": L,
 *    "stride": s, "first_origin": o, "last_origin": o,
 *    "model": {"mae": [P], "rmse": [P], "mape": [P], "direction_accuracy": [P],
 *              "brier": [P], "crps": [P], "coverage": {"0.1-0.9": [P]}, "overall": {...}},
 *    "persistence": {"mae", "rmse", "mape", "crps", "overall"},
 *    "random_walk": {"mae", "rmse", "mape", "brier", "crps", "coverage", "overall"},
 *    "skill": {"persistence": {"mae": [P], "crps": [P], "overall": {...}}, "random_walk": ...},
 *    "pit_histogram": [10],
 *    "normalization": {...},                                     live mode: the pinned one
 *    "usage": {"generated_tokens": n, "planned_gflop": x, "elapsed_ms": x},  the plans'
 *                                                 estimate (kr_forecast_plan.flops), summed
 *    "by_origin": [{"origin": o, "timestamp": t, "timestamps": [P],   with return_origins
 *                   "close": {"last": x, "actual": [P], "mean": [P],
 *                             "quantiles": {"0.1": [P], ...}, "paths": [[P], ...S]},
 *                   "prob_close_up": [P]}, ...],                 paths only when S > 1
 *    "anomalies": {"band": "0.1-0.9", "calibrated": b, "count": n, "checked": m,
 *                  "rate": n / m, "points": [{"origin": o, "step": h (1-based),
 *                  "timestamp": t, "actual": x, "pit": u, "lower": x, "upper": x,
 *                  "outside": ["0.05-0.95", "0.1-0.9"]}, ...]}}     with "anomalies"
 *
 * A value that is not finite (a MAPE over zero actuals, a skill over a zero baseline) is
 * written as null. Many aligned series in one request: evaluate_series_json.h.
 */
#ifndef KD_EVALUATE_JSON_H
#define KD_EVALUATE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "evaluate_parts_json.h"
#include "forecast_json.h"

/* Parses a JSON body; 0, or -1 with a message naming the field (*in then holds nothing;
 * kd_evaluate_input_free is safe either way). limits: NULL for the defaults. */
int kd_evaluate_request_parse(const json_t *body, const kd_forecast_limits *limits,
                              kd_evaluate_input *in, char *err, size_t errlen);
/* The same from candles parsed elsewhere (CSV), which it takes, and the other fields in
 * options (the query parameters as JSON values). */
int kd_evaluate_request_with_candles(const json_t *options, kd_owned_candles *candles,
                                     const kd_forecast_limits *limits, kd_evaluate_input *in,
                                     char *err, size_t errlen);
/* The request's fields other than "candles", NULL-terminated. */
const char *const *kd_evaluate_option_names(void);
void kd_evaluate_input_free(kd_evaluate_input *in);

/* The response (above) of a finished evaluation, or NULL when out of memory. */
json_t *kd_evaluate_response_json(const kd_evaluate_input *in, const kr_evaluate_plan *plan,
                                  const kr_evaluation *ev);

#endif
