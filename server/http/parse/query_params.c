/* query_params.c — query parameters as the JSON values of request fields. */
#include "query_params.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"

/* A number, true, false or null as such; anything else as the string written. */
static json_t *scalar(const char *s, size_t n) {
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    if (v && (json_is_number(v) || json_is_boolean(v) || json_is_null(v))) return v;
    json_decref(v);
    return json_stringn(s, n);
}

static json_t *list(const char *s) {
    json_t *a = json_array();
    while (a && *s) {
        const size_t n = strcspn(s, ",");
        if (json_array_append_new(a, scalar(s, n)) < 0) {
            json_decref(a);
            return NULL;
        }
        s += n;
        if (*s == ',') s++;
    }
    return a;
}

int kd_query_check_bytes(const char *key, size_t key_len, const char *value, size_t value_len,
                         char *err, size_t errlen) {
    char q[KD_QUOTE_MAX * 2], why[64];
    const char *s[2] = {key, value};
    const size_t n[2] = {key_len, value ? value_len : 0};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < n[k]; i++) {
            const unsigned char c = (unsigned char)s[k][i];
            if (c < 0x20 || c == 0x7f) {
                kd_quote(key, q, sizeof q);
                kd_control_byte_reason(c, why, sizeof why);
                return kd_fail(err, errlen, "query parameter \"%s\": %s", q, why);
            }
        }
    return 0;
}

int kd_query_option(json_t *opts, const char *key, const char *value, const char *const known[],
                    char *err, size_t errlen) {
    char q[KD_QUOTE_MAX * 2];
    int i = 0;
    while (known[i] && strcmp(known[i], key) != 0)
        i++;
    if (!known[i]) return kd_unknown_name(key, "query parameter", "", known, err, errlen);
    if (json_object_get(opts, key)) {
        kd_quote(key, q, sizeof q);
        return kd_fail(err, errlen, "query parameter \"%s\": given twice", q);
    }
    const bool is_list = !strcmp(key, "quantiles") || !strcmp(key, "future_timestamps");
    const char *s = value ? value : "";
    json_t *v = is_list ? list(s) : scalar(s, strlen(s));
    if (!v || json_object_set_new(opts, key, v) < 0)
        return kd_fail(err, errlen, "query parameter \"%s\": out of memory", key);
    return 0;
}
