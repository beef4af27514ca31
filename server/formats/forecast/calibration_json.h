/* calibration_json.h — the calibration object (kr_calibration) as JSON: what /evaluate
 * answers in "calibration" and what /forecast, a "series" request, a session forecast and
 * /evaluate take back in "calibration". Versioned, for a user to store, diff and send back:
 *
 *   {"format": "kronosd-calibration", "version": 2,     (1: close only, still read)
 *    "model": "fingerprint",                  the model fitted on (its fingerprint, hex)
 *    "horizon": P, "samples": S,              of the forecasts fitted on
 *    "origins": n,                            outcomes per step fitted on
 *    "methods": {"quantiles": "conformal-shift", "prob_close_up": "isotonic"},
 *    "quantiles": [levels],                   the levels a calibrated forecast answers
 *    "grid": [levels],                        quantiles and 0.01 .. 0.99, ascending
 *    "steps": [{"shift": [grid], "up_x": [m], "up_y": [m]}, ...P],
 *    "columns": {"open": [[grid], ...P], "high": ..., "low": ...}}   version 2, optional
 *
 * Reading checks types and sizes here (naming the field, "calibration.steps[2].shift: ...");
 * the object's rules and whether it fits a request are the core's (kr_calibration_check,
 * kr_calibration_match). */
#ifndef KD_CALIBRATION_JSON_H
#define KD_CALIBRATION_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "kronos.h"

/* v (an object) into *c (its arrays allocated; kr_calibration_free it either way). 0, or -1
 * with a message naming the field. */
int kd_calibration_parse(const json_t *v, kr_calibration *c, char *err, size_t errlen);
/* The object, or NULL when out of memory. */
json_t *kd_calibration_json(const kr_calibration *c);
/* {"version", "model", "origins", "methods"}: what calibrated a forecast. */
json_t *kd_calibration_summary_json(const kr_calibration *c);

#endif
