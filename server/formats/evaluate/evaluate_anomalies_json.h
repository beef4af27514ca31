/* evaluate_anomalies_json.h — the anomaly flags of an evaluation's answer
 * (evaluate_anomalies_json.c), written into the answer evaluate_json.c builds. */
#ifndef KD_EVALUATE_ANOMALIES_JSON_H
#define KD_EVALUATE_ANOMALIES_JSON_H

#include <jansson.h>

#include "evaluate_input.h"

/* The anomaly flags (ev->anomalies, which must be set), or NULL when out of memory. */
json_t *kd_evaluate_anomalies_json(const kd_evaluate_input *in, const kr_evaluation *ev);

#endif
