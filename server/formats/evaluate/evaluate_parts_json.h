/* evaluate_parts_json.h — the parts of an evaluation's answer below the answer itself
 * (evaluate_json.c): the parsed request they are written from, what the raw, calibrated and
 * anomaly sections share (evaluate_parts_json.c), the calibrated section
 * (evaluate_calibrated_json.c) and the anomaly flags (evaluate_anomalies_json.c). */
#ifndef KD_EVALUATE_PARTS_JSON_H
#define KD_EVALUATE_PARTS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "candles_json.h"
#include "kronos.h"

/* A parsed request. It owns the candles that req points into. */
typedef struct {
    kr_evaluate_request req;
    kd_owned_candles candles;
    long long timeout_ms; /* the server's deadline for it; 0: request-timeout */
    bool return_origins;
    kr_calibration calibration; /* a given "calibration" object, which req points at */
} kd_evaluate_input;

/* A pair's key ("0.1-0.9"), and one forecaster's scores (per step and overall; coverage
 * NULL: none; direction, brier: whether they apply; NULL when out of memory). */
void kd_eval_pair_key(const kr_evaluation *ev, int j, char *key, size_t n);
json_t *kd_eval_scores_json(const kr_evaluation *ev, const double *scores, const double *coverage,
                            bool direction, bool brier);

/* The calibrated parts (when ev has them) added to the response r; -1 when out of memory. */
int kd_evaluate_calibrated_json(json_t *r, const kd_evaluate_input *in, const kr_evaluation *ev);
/* Origin k's calibrated close: {"quantiles": {"0.1": [P], ...}, "prob_close_up": [P]}. */
json_t *kd_evaluate_origin_calibrated_json(const kr_evaluation *ev, int k);
/* The anomaly flags (ev->anomalies, which must be set), or NULL when out of memory. */
json_t *kd_evaluate_anomalies_json(const kd_evaluate_input *in, const kr_evaluation *ev);

#endif
