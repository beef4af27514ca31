/* evaluate_series_json.c — an evaluation request of many series, parsed as that many solo
 * requests (each the shared fields plus one series' candles), and the answer that lists
 * their answers beside the cross-sectional scores (evaluate_series_json.h). */
#include "evaluate_series_json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candles_json.h"
#include "json_fields.h"
#include "series_json.h"
#include "json_out.h"

static const char *const element_fields[] = {"candles", NULL};
static const char *const cross_fields[] = {"top_k", NULL};

void kd_evaluate_series_input_free(kd_evaluate_series_input *s) {
    if (!s) return;
    for (int i = 0; s->in && i < s->n; i++)
        kd_evaluate_input_free(&s->in[i]);
    free(s->in);
    memset(s, 0, sizeof *s);
}

/* "series[i]." before a message about that series' own field. */
static int prefixed(int i, const char *msg, char *err, size_t errlen) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", msg);
    return kd_fail(err, errlen, "series[%d].%s", i, tmp);
}

static int parse_cross(const json_t *body, int *top_k, char *err, size_t errlen) {
    const json_t *c = kd_field(body, "cross_section");
    long long k = 0;
    *top_k = 0;
    if (!c) return 0;
    if (!json_is_object(c))
        return kd_wrong(c, "cross_section", "an object {\"top_k\": k}", err, errlen);
    if (kd_check_fields(c, "cross_section: ", cross_fields, err, errlen) < 0) return -1;
    const json_t *v = kd_field(c, "top_k");
    if (v &&
        kd_get_int(v, "cross_section.top_k", 1, INT_MAX, "an integer >= 1", &k, err, errlen) < 0)
        return -1;
    *top_k = (int)k;
    return 0;
}

/* The top level: /evaluate's options (all but candles, each series' own), series and
 * cross_section. */
static int check_top_fields(const json_t *body, char *err, size_t errlen) {
    const char *fields[48] = {"series", "cross_section"};
    const char *const *options = kd_evaluate_option_names();
    int n = 2;
    for (int i = 0; options[i] && n < 47; i++)
        fields[n++] = options[i];
    fields[n] = NULL;
    return kd_check_fields(body, "", fields, err, errlen);
}

/* Series i: its candles, then the shared options (whose messages name no series). */
static int parse_one(const json_t *e, int i, const json_t *options, const kd_forecast_limits *lim,
                     kd_evaluate_input *in, char *err, size_t errlen) {
    char path[32], where[48], msg[512];
    snprintf(path, sizeof path, "series[%d]", i);
    snprintf(where, sizeof where, "series[%d]: ", i);
    if (!json_is_object(e)) return kd_wrong(e, path, "an object {\"candles\": ...}", err, errlen);
    if (kd_check_fields(e, where, element_fields, err, errlen) < 0) return -1;
    kd_owned_candles candles;
    if (kd_candles_parse(kd_field(e, "candles"), 2, lim->max_candles, &candles, msg, sizeof msg) <
        0)
        return prefixed(i, msg, err, errlen);
    return kd_evaluate_request_with_candles(options, &candles, lim, in, err, errlen);
}

int kd_evaluate_series_parse(const json_t *body, const kd_forecast_limits *limits,
                             kd_evaluate_series_input *out, char *err, size_t errlen) {
    const kd_forecast_limits *lim = limits ? limits : &kd_forecast_default_limits;
    memset(out, 0, sizeof *out);
    if (check_top_fields(body, err, errlen) < 0 || parse_cross(body, &out->top_k, err, errlen) < 0)
        return -1;
    const json_t *list;
    const int count = kd_series_list(body, &list, err, errlen);
    if (count < 0) return -1;
    json_t *options = json_copy((json_t *)body); /* shallow: the shared fields, borrowed */
    out->in = calloc((size_t)count, sizeof *out->in);
    if (!out->in || !options || json_object_del(options, "series") < 0) {
        json_decref(options);
        kd_evaluate_series_input_free(out);
        return kd_fail(err, errlen, "series: out of memory for %d series", count);
    }
    json_object_del(options, "cross_section");
    int rc = 0;
    for (int i = 0; rc == 0 && i < count; i++)
        if ((rc = parse_one(json_array_get(list, (size_t)i), i, options, lim, &out->in[i], err,
                            errlen)) == 0)
            out->n = i + 1;
    json_decref(options);
    if (rc) kd_evaluate_series_input_free(out);
    return rc;
}

/* ---- response ------------------------------------------------------------------------------- */

static json_t *per_step(const kr_cross_section *cs) {
    const int P = cs->horizon;
    json_t *o = json_object();
    if (kd_json_put(o, "ic_std", kd_json_reals(cs->ic_std, P)) ||
        kd_json_put(o, "ic_ir", kd_json_reals(cs->ic_ir, P)) ||
        kd_json_put(o, "ic_count", kd_json_ints(cs->ic_count, P)) ||
        kd_json_put(o, "rank_ic_std", kd_json_reals(cs->rank_ic_std, P)) ||
        kd_json_put(o, "rank_ic_ir", kd_json_reals(cs->rank_ic_ir, P)) ||
        kd_json_put(o, "rank_ic_count", kd_json_ints(cs->rank_ic_count, P))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *by_origin(const kd_evaluate_input *in0, const kr_evaluation *ev0,
                         const kr_cross_section *cs) {
    const int P = cs->horizon;
    json_t *a = json_array();
    for (int k = 0; a && k < cs->origins; k++) {
        const size_t at = (size_t)k * P;
        json_t *o = json_object();
        if (kd_json_put(o, "timestamp",
                        kd_timestamp_json(ev0->timestamps[at], &in0->candles.time_form)) ||
            kd_json_put(o, "ic", kd_json_reals(cs->ic + at, P)) ||
            kd_json_put(o, "rank_ic", kd_json_reals(cs->rank_ic + at, P)) ||
            kd_json_put(o, "hit_rate", kd_json_reals(cs->hit + at, P)) ||
            kd_json_put(o, "top_bottom_spread", kd_json_reals(cs->spread + at, P)) ||
            json_array_append_new(a, o) < 0) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *kd_cross_section_json(const kd_evaluate_input *in0, const kr_evaluation *ev0,
                              const kr_cross_section *cs) {
    const int P = cs->horizon, N = cs->origins;
    json_t *o = json_object();
    int rc = kd_json_put(o, "series", json_integer(cs->series)) ||
             kd_json_put(o, "origins", json_integer(N)) ||
             kd_json_put(o, "horizon", json_integer(P)) ||
             kd_json_put(o, "top_k", json_integer(cs->top_k)) ||
             kd_json_put(o, "ic", kd_json_reals(cs->ic_mean, P)) ||
             kd_json_put(o, "rank_ic", kd_json_reals(cs->rank_ic_mean, P)) ||
             kd_json_put(o, "hit_rate", kd_json_reals(cs->hit_rate, P)) ||
             kd_json_put(o, "top_bottom_spread", kd_json_reals(cs->top_bottom_spread, P)) ||
             kd_json_put(o, "ic_mean", kd_json_real(cs->ic_mean[P])) ||
             kd_json_put(o, "ic_std", kd_json_real(cs->ic_std[P])) ||
             kd_json_put(o, "ic_ir", kd_json_real(cs->ic_ir[P])) ||
             kd_json_put(o, "ic_count", json_integer(cs->ic_count[P])) ||
             kd_json_put(o, "ic_undefined", json_integer((json_int_t)N * P - cs->ic_count[P])) ||
             kd_json_put(o, "rank_ic_mean", kd_json_real(cs->rank_ic_mean[P])) ||
             kd_json_put(o, "rank_ic_std", kd_json_real(cs->rank_ic_std[P])) ||
             kd_json_put(o, "rank_ic_ir", kd_json_real(cs->rank_ic_ir[P])) ||
             kd_json_put(o, "rank_ic_count", json_integer(cs->rank_ic_count[P])) ||
             kd_json_put(o, "rank_ic_undefined",
                         json_integer((json_int_t)N * P - cs->rank_ic_count[P])) ||
             kd_json_put(o, "per_step", per_step(cs));
    if (rc == 0 && in0->return_origins) rc = kd_json_put(o, "by_origin", by_origin(in0, ev0, cs));
    if (rc == 0) return o;
    json_decref(o);
    return NULL;
}

json_t *kd_evaluate_series_response_json(const kd_evaluate_series_input *s,
                                         const kr_evaluate_plan *plans, const kr_evaluation *evs,
                                         const kr_cross_section *cs) {
    json_t *a = json_array();
    for (int i = 0; a && i < s->n; i++)
        if (json_array_append_new(a, kd_evaluate_response_json(&s->in[i], &plans[i], &evs[i])) <
            0) {
            json_decref(a);
            return NULL;
        }
    json_t *r = json_object();
    if (kd_json_put(r, "series", a) ||
        kd_json_put(r, "cross_section", kd_cross_section_json(&s->in[0], &evs[0], cs))) {
        json_decref(r);
        return NULL;
    }
    return r;
}
