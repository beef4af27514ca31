/* body_diff.h — a request body parsed twice, as the daemon reads it (json_body.h: candles
 * from the text) and as one jansson tree, and the two answers compared: the same refusal
 * and message, or the same candles. Shared by test_formats and the fuzz_json_body target. */
#ifndef KD_BODY_DIFF_H
#define KD_BODY_DIFF_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "evaluate_json.h"
#include "forecast_json.h"
#include "json_body.h"
#include "series_json.h"

static int diff_candles(const kd_owned_candles *a, const kd_owned_candles *b) {
    if (a->n != b->n || memcmp(&a->time_form, &b->time_form, sizeof a->time_form)) return -1;
    if (a->n && memcmp(a->timestamps, b->timestamps, (size_t)a->n * sizeof *a->timestamps))
        return -1;
    for (int c = 0; c < KR_D_IN; c++) {
        if (!a->columns[c] != !b->columns[c]) return -1;
        if (a->columns[c] && a->n &&
            memcmp(a->columns[c], b->columns[c], (size_t)a->n * sizeof *a->columns[c]))
            return -1;
    }
    return 0;
}

/* 0 when both readings agree, else -1 with what differs in why. */
static int kd_body_diff(const char *text, size_t len, char *why, size_t whylen) {
    static const kd_forecast_limits lim = {2000, 256, 16};
    json_error_t je1, je2;
    json_t *lean = kd_body_parse(text, len, &je1);
    json_t *tree = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je2);
    char e1[512], e2[512];
    int rc = 0;
    if (!lean || !tree) {
        if (lean || tree || je1.line != je2.line || je1.column != je2.column ||
            strcmp(je1.text, je2.text))
            rc = -1,
            snprintf(why, whylen, "JSON: %s / %s", lean ? "ok" : je1.text, tree ? "ok" : je2.text);
        json_decref(lean);
        json_decref(tree);
        return rc;
    }
    kd_forecast_input f1, f2;
    int r1 = kd_forecast_request_parse_limited(lean, 512, &lim, &f1, e1, sizeof e1);
    int r2 = kd_forecast_request_parse_limited(tree, 512, &lim, &f2, e2, sizeof e2);
    if (r1 != r2 || (r1 && strcmp(e1, e2)) || (!r1 && diff_candles(&f1.candles, &f2.candles)))
        rc = -1, snprintf(why, whylen, "forecast: %s / %s", r1 ? e1 : "ok", r2 ? e2 : "ok");
    kd_forecast_input_free(&f1);
    kd_forecast_input_free(&f2);

    kd_evaluate_input v1, v2;
    r1 = kd_evaluate_request_parse(lean, &lim, &v1, e1, sizeof e1);
    r2 = kd_evaluate_request_parse(tree, &lim, &v2, e2, sizeof e2);
    if (rc == 0 &&
        (r1 != r2 || (r1 && strcmp(e1, e2)) || (!r1 && diff_candles(&v1.candles, &v2.candles))))
        rc = -1, snprintf(why, whylen, "evaluate: %s / %s", r1 ? e1 : "ok", r2 ? e2 : "ok");
    kd_evaluate_input_free(&v1);
    kd_evaluate_input_free(&v2);

    kd_forecast_input *s1 = NULL, *s2 = NULL;
    int n1 = 0, n2 = 0;
    if (kd_is_series_request(lean) != kd_is_series_request(tree)) {
        rc = -1, snprintf(why, whylen, "series: one reading has it");
    } else if (kd_is_series_request(tree)) {
        r1 = kd_series_request_parse(lean, 512, &lim, &s1, &n1, e1, sizeof e1);
        r2 = kd_series_request_parse(tree, 512, &lim, &s2, &n2, e2, sizeof e2);
        int same = r1 == r2 && n1 == n2 && (!r1 || !strcmp(e1, e2));
        for (int i = 0; same && i < n1; i++)
            same = diff_candles(&s1[i].candles, &s2[i].candles) == 0;
        if (rc == 0 && !same)
            rc = -1, snprintf(why, whylen, "series: %s / %s", r1 ? e1 : "ok", r2 ? e2 : "ok");
        kd_series_inputs_free(s1, n1);
        kd_series_inputs_free(s2, n2);
    }

    kd_owned_candles c1, c2;
    r1 = kd_candles_parse(json_object_get(lean, "candles"), 1, 0, &c1, e1, sizeof e1);
    r2 = kd_candles_parse(json_object_get(tree, "candles"), 1, 0, &c2, e2, sizeof e2);
    if (rc == 0 && (r1 != r2 || (r1 && strcmp(e1, e2)) || (!r1 && diff_candles(&c1, &c2))))
        rc = -1, snprintf(why, whylen, "candles: %s / %s", r1 ? e1 : "ok", r2 ? e2 : "ok");
    kd_candles_free(&c1);
    kd_candles_free(&c2);
    json_decref(lean);
    json_decref(tree);
    return rc;
}

#endif
