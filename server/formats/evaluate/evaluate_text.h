/* evaluate_text.h — an evaluation's answer as a text table for a terminal (kronosd evaluate
 * --table): the overall scores of each forecaster side by side, the raw model against the
 * calibrated one on the same origins when the evaluation calibrated, then the PIT's KS
 * distances. */
#ifndef KD_EVALUATE_TEXT_H
#define KD_EVALUATE_TEXT_H

#include <jansson.h>

/* The table of resp (kd_evaluate_response_json's answer), or NULL when out of memory. */
char *kd_evaluate_table(const json_t *resp);

#endif
