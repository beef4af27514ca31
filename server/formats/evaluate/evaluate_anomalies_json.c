/* evaluate_anomalies_json.c — the anomaly flags of an evaluation's answer (evaluate_json.h):
 * the band, what was checked, and each origin-step outside it with its PIT, the band's
 * bounds and every pair the actual fell outside of. */
#include "evaluate_json.h"

#include <math.h>

static int put(json_t *o, const char *key, json_t *v) {
    return o && v && json_object_set_new(o, key, v) == 0 ? 0 : (json_decref(v), -1);
}

/* o with list as its last member when rc is 0, else NULL; both are released on failure. */
static json_t *with_list(json_t *o, int rc, const char *key, json_t *list) {
    if (rc != 0) json_decref(list);
    if (rc == 0 && put(o, key, list) == 0) return o;
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
        rc = put(o, "origin", json_integer(ev->origin_index[p->origin])) ||
             put(o, "step", json_integer(p->step + 1)) ||
             put(o, "timestamp", kd_timestamp_json(ev->timestamps[at], &in->candles.time_form)) ||
             put(o, "actual", kd_eval_real(ev->actual[at])) ||
             put(o, "pit", kd_eval_real(p->pit)) || put(o, "lower", kd_eval_real(p->lower)) ||
             put(o, "upper", kd_eval_real(p->upper));
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
        rc = put(o, "band", json_string(band)) ||
             put(o, "calibrated", json_boolean(a->calibrated)) ||
             put(o, "count", json_integer(a->count)) ||
             put(o, "checked", json_integer(a->checked)) ||
             put(o, "rate", kd_eval_real(a->checked ? (double)a->count / a->checked : NAN));
    return with_list(o, rc, "points", points);
}
