/* evaluate_calibrated_json.h — the calibrated forecaster's part of an evaluation's answer
 * (evaluate_calibrated_json.c), written into the answer evaluate_json.c builds. */
#ifndef KD_EVALUATE_CALIBRATED_JSON_H
#define KD_EVALUATE_CALIBRATED_JSON_H

#include <jansson.h>

#include "evaluate_input.h"

/* The calibrated parts (when ev has them) added to the response r; -1 when out of memory. */
int kd_evaluate_calibrated_json(json_t *r, const kd_evaluate_input *in, const kr_evaluation *ev);
/* Origin k's calibrated close: {"quantiles": {"0.1": [P], ...}, "prob_close_up": [P]}. */
json_t *kd_evaluate_origin_calibrated_json(const kr_evaluation *ev, int k);

#endif
