/* calib_online_json.c — a live session's online calibration and an append's anomalies as
 * JSON (calib_online_json.h). */
#include "calib_online_json.h"

#include <math.h>
#include <stdio.h>

#include "numfmt.h"
#include "json_out.h"

static void pair_key(const kr_calib_online_stats *st, int j, char *key, size_t n) {
    char lo[KD_NUM_MAX], hi[KD_NUM_MAX];
    kd_fmt_double(st->pair_lo[j], lo, sizeof lo);
    kd_fmt_double(st->pair_hi[j], hi, sizeof hi);
    snprintf(key, n, "%s-%s", lo, hi);
}

json_t *kd_calib_online_json(const kr_calib_online_stats *st, bool from_object) {
    json_t *cov = json_object();
    char key[2 * KD_NUM_MAX + 2];
    for (int j = 0; cov && j < st->n_pairs; j++) {
        pair_key(st, j, key, sizeof key);
        if (json_object_set_new(cov, key, kd_json_real(st->coverage[j])) < 0) {
            json_decref(cov);
            cov = NULL;
        }
    }
    if (!cov) return NULL;
    return json_pack("{s:s,s:I,s:o,s:o,s:o}", "mode", from_object ? "object" : "online", "resolved",
                     (json_int_t)st->resolved, "coverage", cov, "pit_ks", kd_json_real(st->pit_ks),
                     "brier", kd_json_real(st->brier));
}

json_t *kd_calib_anomaly_json(json_t *timestamp, const kr_online_outcome *out,
                              const kr_calib_online_stats *st) {
    json_t *outside = json_array();
    char key[2 * KD_NUM_MAX + 2];
    for (int j = 0; outside && j < st->n_pairs; j++) {
        if (!(out->outside >> j & 1u)) continue;
        pair_key(st, j, key, sizeof key);
        if (json_array_append_new(outside, json_string(key)) < 0) {
            json_decref(outside);
            outside = NULL;
        }
    }
    if (!outside || !timestamp) {
        json_decref(outside);
        json_decref(timestamp);
        return NULL;
    }
    return json_pack("{s:o,s:i,s:f,s:o}", "timestamp", timestamp, "step", out->step + 1, "pit",
                     out->pit, "outside", outside);
}
