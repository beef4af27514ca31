/* evaluate_anomalies_json.c — the anomaly flags of an evaluation's answer
 * (evaluate_parts_json.h): the band, what was checked, and each origin-step outside it with its
 * PIT, the band's bounds and every pair the actual fell outside of. */
#include "evaluate_parts_json.h"
#include "forecast_json.h"
#include "json_out.h"

#include <math.h>

/* o with list as its last member when rc is 0, else NULL; both are released on failure. */
static json_t *with_list(json_t *o, int rc, const char *key, json_t *list) {
    if (rc != 0) json_decref(list);
    if (rc == 0 && kd_json_put(o, key, list) == 0) return o;
    json_decref(o);
    return NULL;
}

static json_t *point_json(const kd_evaluate_input *in, const kr_evaluation *ev,
                          const kr_anomaly *p) {
    const size_t at = (size_t)p->origin * ev->horizon + p->step;
    json_t *o = json_object(), *outside = json_array();
    int rc = o && outside ? 0 : -1;
    char key[64];
    for (int j = 0; rc == 0 && j < ev->n_pairs; j++)
        if ((p->outside >> j) & 1u) {
            kd_eval_pair_key(ev, j, key, sizeof key);
            rc = json_array_append_new(outside, json_string(key));
        }
    if (rc == 0)
        rc = kd_json_put(o, "origin", json_integer(ev->origin_index[p->origin])) ||
             kd_json_put(o, "step", json_integer(p->step + 1)) ||
             kd_json_put(o, "timestamp",
                         kd_timestamp_json(ev->timestamps[at], &in->candles.time_form)) ||
             kd_json_put(o, "actual", kd_json_real(ev->actual[at])) ||
             kd_json_put(o, "pit", kd_json_real(p->pit)) ||
             kd_json_put(o, "lower", kd_json_real(p->lower)) ||
             kd_json_put(o, "upper", kd_json_real(p->upper));
    return with_list(o, rc, "outside", outside);
}

json_t *kd_evaluate_anomalies_json(const kd_evaluate_input *in, const kr_evaluation *ev) {
    const kr_anomalies *a = ev->anomalies;
    char band[64];
    kd_eval_pair_key(ev, a->pair, band, sizeof band);
    json_t *o = json_object(), *points = json_array();
    int rc = o && points ? 0 : -1;
    for (int i = 0; rc == 0 && i < a->count; i++)
        rc = json_array_append_new(points, point_json(in, ev, &a->points[i]));
    if (rc == 0)
        rc = kd_json_put(o, "band", json_string(band)) ||
             kd_json_put(o, "calibrated", json_boolean(a->calibrated)) ||
             kd_json_put(o, "count", json_integer(a->count)) ||
             kd_json_put(o, "checked", json_integer(a->checked)) ||
             kd_json_put(o, "rate", kd_json_real(a->checked ? (double)a->count / a->checked : NAN));
    return with_list(o, rc, "points", points);
}
