/* evaluate_parts_json.h — the parts of an evaluation's answer that its raw, calibrated and
 * anomaly sections share (evaluate_json.c, evaluate_calibrated_json.c,
 * evaluate_anomalies_json.c, evaluate_series_json.c). */
#ifndef KD_EVALUATE_PARTS_JSON_H
#define KD_EVALUATE_PARTS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kronos.h"

/* A pair's key ("0.1-0.9"), and one forecaster's scores (per step and overall; coverage
 * NULL: none; direction, brier: whether they apply; NULL when out of memory). */
void kd_eval_pair_key(const kr_evaluation *ev, int j, char *key, size_t n);
json_t *kd_eval_scores_json(const kr_evaluation *ev, const double *scores, const double *coverage,
                            bool direction, bool brier);

#endif
