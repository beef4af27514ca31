/* series_json.c — a request of many series, parsed as that many solo requests (each the
 * shared fields plus one series' candles), and the answer that lists their responses. */
#include "series_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"

static const char *const element_fields[] = {"candles", "future_timestamps", NULL};

int kd_series_list(const json_t *body, const json_t **list, char *err, size_t errlen) {
    *list = kd_field(body, "series");
    if (!json_is_array(*list) || json_array_size(*list) == 0)
        return kd_wrong(*list, "series", "a non-empty array of {\"candles\": ...}", err, errlen);
    if (json_array_size(*list) > KD_MAX_SERIES)
        return kd_fail(err, errlen, "series: %zu series exceed the limit of %d",
                       json_array_size(*list), KD_MAX_SERIES);
    return (int)json_array_size(*list);
}

bool kd_is_series_request(const json_t *body) {
    return json_is_object(body) && json_object_get(body, "series") != NULL;
}

/* The top level: the /forecast options but future_timestamps (a series' own), and series. */
static const char *const *top_fields(void) {
    static const char *fields[34];
    if (!fields[0]) {
        const char *const *all = kd_forecast_option_names();
        int n = 0;
        fields[n++] = "series";
        for (int i = 0; all[i] && n < 33; i++)
            if (strcmp(all[i], "future_timestamps") != 0) fields[n++] = all[i];
    }
    return fields;
}

void kd_series_inputs_free(kd_forecast_input *in, int n) {
    for (int i = 0; in && i < n; i++)
        kd_forecast_input_free(&in[i]);
    free(in);
}

/* "series[i]." before a solo request's message. */
static int prefixed(int i, const char *msg, char *err, size_t errlen) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", msg);
    return kd_fail(err, errlen, "series[%d].%s", i, tmp);
}

int kd_series_request_parse(const json_t *body, int model_max_context,
                            const kd_forecast_limits *limits, kd_forecast_input **out, int *n,
                            char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    char where[48];
    if (kd_check_fields(body, "", top_fields(), err, errlen) < 0) return -1;
    const json_t *list;
    const int count = kd_series_list(body, &list, err, errlen);
    if (count < 0) return -1;
    kd_forecast_input *in = calloc((size_t)count, sizeof *in);
    json_t *solo = json_copy((json_t *)body); /* shallow: the shared fields, borrowed */
    if (!in || !solo || json_object_del(solo, "series") < 0) {
        free(in);
        json_decref(solo);
        return kd_fail(err, errlen, "series: out of memory for %d series", count);
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < count; i++) {
        const json_t *e = json_array_get(list, (size_t)i);
        char path[32], msg[512];
        snprintf(path, sizeof path, "series[%d]", i);
        snprintf(where, sizeof where, "series[%d]: ", i);
        if (!json_is_object(e)) {
            rc = kd_wrong(e, path, "an object {\"candles\": ...}", err, errlen);
            break;
        }
        if (kd_check_fields(e, where, element_fields, err, errlen) < 0) {
            rc = -1;
            break;
        }
        json_object_del(solo, "future_timestamps");
        if (json_object_set(solo, "candles",
                            json_object_get(e, "candles") ? json_object_get(e, "candles")
                                                          : json_null()) < 0 ||
            (json_object_get(e, "future_timestamps") &&
             json_object_set(solo, "future_timestamps", json_object_get(e, "future_timestamps")) <
                 0)) {
            rc = kd_fail(err, errlen, "series: out of memory");
            break;
        }
        if (kd_forecast_request_parse_limited(solo, model_max_context, limits, &in[i], msg,
                                              sizeof msg) < 0)
            rc = prefixed(i, msg, err, errlen);
        else
            *n = i + 1;
    }
    json_decref(solo);
    if (rc) {
        kd_series_inputs_free(in, *n);
        *n = 0;
        return -1;
    }
    *out = in;
    return 0;
}

json_t *kd_series_response_json(const kd_forecast_input *in, const kr_forecast_result *res, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, kd_forecast_response_json(&in[i], &res[i])) < 0) {
            json_decref(a);
            a = NULL;
        }
    return a ? json_pack("{s:o}", "series", a) : NULL;
}
