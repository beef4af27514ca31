/* evaluate_series_json.h — many aligned series in one walk-forward evaluation (POST
 * /evaluate with "series"), and its answer with their cross-sectional scores:
 *
 *   {"series": [{"candles": CANDLES}, ...],                    at least 2 series
 *    "cross_section": {"top_k": k},                            optional; k in 1..n/2,
 *                                                              default a fifth, at least 1
 *    the other /evaluate fields (lookback, horizon, stride, ..., return_origins), shared}
 *
 * Each series is the solo request made of its candles and the shared fields (so its answer
 * is that request's); errors in a series' candles name it ("series[2].candles.close[7]: ").
 * The top-level "top_k" stays the sampling field; the cross-section's k is
 * cross_section.top_k. The answer:
 *
 *   {"series": [<the /evaluate answer of each series>, ...],
 *    "cross_section": {"series": n, "origins": N, "horizon": P, "top_k": k,
 *      "ic": [P], "rank_ic": [P], "hit_rate": [P], "top_bottom_spread": [P],
 *      "ic_mean": x, "ic_std": x, "ic_ir": x, "ic_count": i, "ic_undefined": i,
 *      "rank_ic_mean": x, "rank_ic_std": x, "rank_ic_ir": x, "rank_ic_count": i,
 *      "rank_ic_undefined": i,
 *      "per_step": {"ic_std": [P], "ic_ir": [P], "ic_count": [P], "rank_ic_std": [P],
 *                   "rank_ic_ir": [P], "rank_ic_count": [P]},
 *      "by_origin": [{"timestamp": t, "ic": [P], "rank_ic": [P], "hit_rate": [P],
 *                     "top_bottom_spread": [P]}, ...]}}     by_origin with return_origins
 *
 * ic, rank_ic: the mean per step of the defined values over origins; the scalars pool every
 * origin and step (kr_cross_section in kronos.h); an undefined value is null.
 */
#ifndef KD_EVALUATE_SERIES_JSON_H
#define KD_EVALUATE_SERIES_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "evaluate_json.h"

/* A parsed series request: one solo evaluation input a series. */
typedef struct {
    kd_evaluate_input *in; /* [n] */
    int n;
    int top_k; /* 0: the default */
} kd_evaluate_series_input;

/* Parses a JSON body with "series"; 0, or -1 with a message naming the field (*out then
 * holds nothing; kd_evaluate_series_input_free is safe either way). */
int kd_evaluate_series_parse(const json_t *body, const kd_forecast_limits *limits,
                             kd_evaluate_series_input *out, char *err, size_t errlen);
void kd_evaluate_series_input_free(kd_evaluate_series_input *s);

/* {"series": [...], "cross_section": {...}} of the finished evaluations (each series'
 * answer as kd_evaluate_response_json's), or NULL when out of memory. */
json_t *kd_evaluate_series_response_json(const kd_evaluate_series_input *s,
                                         const kr_evaluate_plan *plans, const kr_evaluation *evs,
                                         const kr_cross_section *cs);
/* The "cross_section" object alone (above), by_origin when the series asked for return_origins;
 * timestamps written in series 0's form. NULL when out of memory. */
json_t *kd_cross_section_json(const kd_evaluate_input *in0, const kr_evaluation *ev0,
                              const kr_cross_section *cs);

#endif
