/* evaluate_text.c — an evaluation's answer as a text table (evaluate_text.h). */
#include "evaluate_text.h"

#include <stdio.h>
#include <string.h>

#include "strbuf.h"

static const char *const metrics[] = {"mae",   "rmse", "mape",          "direction_accuracy",
                                      "brier", "crps", "crps_quantile", NULL};
static const char *const heads[] = {"mae", "rmse", "mape%", "direction", "brier", "crps", "crps_q"};

static void cell(kd_strbuf *b, const json_t *v) {
    char s[32];
    if (json_is_number(v))
        snprintf(s, sizeof s, " %10.5g", json_number_value(v));
    else
        snprintf(s, sizeof s, " %10s", "-");
    kd_strbuf_puts(b, s);
}

/* One forecaster's row: its overall metrics, then each band's coverage. */
static void row(kd_strbuf *b, const char *name, const json_t *overall, const json_t *pairs) {
    char s[64];
    snprintf(s, sizeof s, "%-13s", name);
    kd_strbuf_puts(b, s);
    for (int m = 0; metrics[m]; m++)
        cell(b, json_object_get(overall, metrics[m]));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)pairs, key, v) {
        cell(b, json_object_get(json_object_get(overall, "coverage"), key));
    }
    kd_strbuf_puts(b, "\n");
}

char *kd_evaluate_table(const json_t *resp) {
    kd_strbuf b = {0};
    char s[160];
    const json_t *pairs = json_object_get(json_object_get(resp, "model"), "coverage");
    snprintf(s, sizeof s,
             "%lld origins, horizon %lld, %lld paths (overall: every origin and step)\n",
             (long long)json_integer_value(json_object_get(resp, "origins")),
             (long long)json_integer_value(json_object_get(resp, "horizon")),
             (long long)json_integer_value(json_object_get(resp, "samples")));
    kd_strbuf_puts(&b, s);
    kd_strbuf_puts(&b, "             ");
    for (int m = 0; metrics[m]; m++) {
        snprintf(s, sizeof s, " %10s", heads[m]);
        kd_strbuf_puts(&b, s);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)pairs, key, v) {
        snprintf(s, sizeof s, " %10.10s", key);
        kd_strbuf_puts(&b, s);
    }
    kd_strbuf_puts(&b, "\n");
    static const char *const rows[] = {"model",        "persistence", "random_walk",
                                       "model_scored", "calibrated",  NULL};
    for (int r = 0; rows[r]; r++) {
        const json_t *f = json_object_get(resp, rows[r]);
        if (f) row(&b, rows[r], json_object_get(f, "overall"), pairs);
    }
    const json_t *ks = json_object_get(resp, "pit_ks");
    if (ks) {
        const json_t *first = json_object_get(resp, "first_scored_origin");
        if (json_is_integer(first))
            snprintf(s, sizeof s,
                     "model_scored and calibrated: the %lld origins from origin %lld (%s)\n",
                     (long long)json_integer_value(json_object_get(resp, "scored_origins")),
                     (long long)json_integer_value(first),
                     json_string_value(json_object_get(resp, "calibration_mode")));
        else
            snprintf(s, sizeof s, "no origin scored calibrated (the warm-up needs more)\n");
        kd_strbuf_puts(&b, s);
        kd_strbuf_puts(&b, "PIT KS distance:");
        static const char *const kinds[] = {"model", "model_scored", "calibrated", NULL};
        for (int k = 0; kinds[k]; k++) {
            const json_t *d = json_object_get(ks, kinds[k]);
            if (json_is_number(d))
                snprintf(s, sizeof s, " %s %.4g", kinds[k], json_number_value(d));
            else
                snprintf(s, sizeof s, " %s -", kinds[k]);
            kd_strbuf_puts(&b, s);
        }
        kd_strbuf_puts(&b, "\n");
    }
    return kd_strbuf_take(&b);
}
