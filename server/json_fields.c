/* json_fields.c — reading request fields with messages that name them. */
#include "json_fields.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int kd_fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Cut on a UTF-8 boundary; control characters, quotes and backslashes become '?' so that a
 * message stays one clean line whatever the client sent. */
void kd_quote(const char *s, char *out, size_t n) {
    size_t len = strlen(s), k = len > KD_QUOTE_MAX ? KD_QUOTE_MAX : len, j = 0;
    if (n == 0) return;
    while (k > 0 && k < len && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    for (size_t i = 0; i < k && j + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[j++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    out[j] = '\0';
    if (k < len && j + 4 < n) strcat(out, "...");
}

const char *kd_describe(const json_t *v, char *buf, size_t n) {
    char q[KD_QUOTE_MAX * 2];
    switch (json_typeof(v)) {
    case JSON_STRING:
        kd_quote(json_string_value(v), q, sizeof q);
        snprintf(buf, n, "the string \"%s\"", q);
        return buf;
    case JSON_INTEGER:
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    case JSON_REAL:
        snprintf(buf, n, "%g", json_real_value(v));
        return buf;
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    }
    return "an unknown value";
}

int kd_wrong(const json_t *v, const char *path, const char *rule, char *err, size_t errlen) {
    char d[KD_DESC_LEN];
    if (!v) return kd_fail(err, errlen, "%s: missing; must be %s", path, rule);
    return kd_fail(err, errlen, "%s: must be %s, got %s", path, rule, kd_describe(v, d, sizeof d));
}

const json_t *kd_field(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

int kd_get_number(const json_t *v, const char *path, double *out, char *err, size_t errlen) {
    if (!json_is_number(v)) return kd_wrong(v, path, "a number", err, errlen);
    const double x = json_number_value(v);
    /* Strict JSON cannot carry these, but a caller may build a json_t by other means. */
    if (isnan(x)) return kd_fail(err, errlen, "%s: NaN is not allowed", path);
    if (isinf(x)) return kd_fail(err, errlen, "%s: infinity is not allowed", path);
    /* the model computes in float32, where this would become infinity */
    if (fabs(x) > FLT_MAX)
        return kd_fail(err, errlen, "%s: %g is outside the float32 range (magnitude up to %.6g)",
                       path, x, (double)FLT_MAX);
    *out = x;
    return 0;
}

int kd_get_int(const json_t *v, const char *path, long long lo, long long hi, const char *rule,
               long long *out, char *err, size_t errlen) {
    if (!json_is_integer(v)) return kd_wrong(v, path, rule, err, errlen);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) return kd_wrong(v, path, rule, err, errlen);
    *out = x;
    return 0;
}

int kd_opt_int(const json_t *body, const char *key, long long lo, long long hi, const char *rule,
               long long *out, char *err, size_t errlen) {
    const json_t *v = kd_field(body, key);
    return v ? kd_get_int(v, key, lo, hi, rule, out, err, errlen) : 0;
}

int kd_opt_real(const json_t *body, const char *key, bool (*ok)(double), const char *rule,
                double *out, char *err, size_t errlen) {
    const json_t *v = kd_field(body, key);
    if (!v) return 0;
    if (!json_is_number(v) || !ok(json_number_value(v))) return kd_wrong(v, key, rule, err, errlen);
    const double x = json_number_value(v);
    if (fabs(x) > FLT_MAX || (x != 0 && (float)x == 0))
        return kd_fail(err, errlen, "%s: %g is outside the float32 range the model computes in",
                       key, x);
    *out = x;
    return 0;
}

int kd_opt_bool(const json_t *body, const char *key, bool *out, char *err, size_t errlen) {
    const json_t *v = kd_field(body, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return kd_wrong(v, key, "true or false", err, errlen);
    *out = json_is_true(v);
    return 0;
}

bool kd_positive_finite(double x) {
    return isfinite(x) && x > 0;
}

bool kd_in_open_unit(double x) {
    return x > 0 && x <= 1;
}

bool kd_in_unit(double x) {
    return x >= 0 && x <= 1;
}

int kd_get_timestamp(const json_t *v, const char *path, int64_t *wall, kd_time_form *form,
                     char *err, size_t errlen) {
    char why[128], q[KD_QUOTE_MAX * 2];
    kd_time_form f = {0};
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (kd_parse_timestamp(s, wall, &f.tz_offset_min, &f.has_tz, why, sizeof why) < 0) {
            kd_quote(s, q, sizeof q);
            return kd_fail(err, errlen, "%s: \"%s\" is not a valid timestamp (%s)", path, q, why);
        }
    } else if (json_is_number(v)) {
        if (kd_wall_from_unix(json_number_value(v), wall, why, sizeof why) < 0)
            return kd_fail(err, errlen, "%s: %s", path, why);
        f.unix_seconds = true;
    } else {
        return kd_wrong(v, path, "a timestamp (an ISO 8601 string or Unix seconds)", err, errlen);
    }
    if (form) *form = f;
    return 0;
}

int kd_form_offset(const kd_time_form *f) {
    return f && f->has_tz ? f->tz_offset_min : 0;
}

int kd_align_timestamps(int64_t *walls, const int *offsets, size_t n, int target_offset,
                        const int64_t *after, const char *path_fmt, char *err, size_t errlen) {
    char path[KD_PATH_LEN], when[KD_TIMESTAMP_MAX];
    for (size_t i = 0; i < n; i++) {
        const int64_t w = walls[i] + (int64_t)(target_offset - offsets[i]) * 60;
        snprintf(path, sizeof path, path_fmt, i);
        if (w < KD_WALL_MIN || w > KD_WALL_MAX) {
            kd_format_timestamp(walls[i], offsets[i], true, when, sizeof when);
            return kd_fail(err, errlen,
                           "%s: %s falls outside years 0000-9999 at offset %+03d:%02d, the "
                           "offset of the last timestamp (which the response uses)",
                           path, when, target_offset / 60, abs(target_offset) % 60);
        }
        if (i == 0 && after && w <= *after)
            return kd_fail(err, errlen, "%s: not after the last context timestamp", path);
        if (i > 0 && w <= walls[i - 1])
            return kd_fail(err, errlen,
                           "%s: not after the previous timestamp (compared as instants)", path);
        walls[i] = w;
    }
    return 0;
}
