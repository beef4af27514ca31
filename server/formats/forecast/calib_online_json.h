/* calib_online_json.h — a live candle session's online calibration as JSON: what its GET
 * answers in "calibration" and what an append answers in "anomalies".
 *
 *   "calibration": {"mode": "online" | "object", "resolved": n,
 *                   "coverage": {"0.1-0.9": x, ...}, "pit_ks": x, "brier": x}
 *   "anomalies": [{"timestamp": t, "step": h, "pit": p, "outside": ["0.1-0.9", ...]}, ...]
 */
#ifndef KD_CALIB_ONLINE_JSON_H
#define KD_CALIB_ONLINE_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "kronos.h"

/* The session's running statistics; from_object: it started from a calibration object.
 * NULL when out of memory. */
json_t *kd_calib_online_json(const kr_calib_online_stats *st, bool from_object);
/* One appended candle that a kept forecast had covered: its timestamp (already as the
 * answer writes it; taken), the forecast's 1-based step, its PIT and the bands it fell
 * outside (bit j: st's pair j). NULL when out of memory. */
json_t *kd_calib_anomaly_json(json_t *timestamp, const kr_online_outcome *out,
                              const kr_calib_online_stats *st);

#endif
