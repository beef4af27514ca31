/* json_fields.c — reading request fields with messages that name them. */
#include "json_fields.h"
#include "kronos.h"
#include "numfmt.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const size_t k = s[0] < 0x80             ? 1
                     : (s[0] & 0xE0) == 0xC0 ? 2
                     : (s[0] & 0xF0) == 0xE0 ? 3
                     : (s[0] & 0xF8) == 0xF0 ? 4
                                             : 0;
    if (k == 0 || k > n || (k == 2 && s[0] < 0xC2)) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

void kd_utf8_clean(char *s) {
    unsigned char *u = (unsigned char *)s;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        const size_t k = utf8_len(u + i, len - i);
        if (k == 0)
            u[i++] = '?';
        else
            i += k;
    }
}

/* At most KD_QUOTE_MAX bytes, cut between characters; control characters, quotes,
 * backslashes and bytes that are not UTF-8 (a CSV body is not validated) become '?', so
 * that a message stays one clean line of valid JSON text whatever the client sent. */
void kd_quote(const char *s, char *out, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    const size_t len = strlen(s);
    size_t i = 0, j = 0;
    if (n == 0) return;
    while (i < len && i < KD_QUOTE_MAX) {
        size_t k = utf8_len(u + i, len - i);
        if (k > 1 && (i + k > KD_QUOTE_MAX || j + k >= n)) break;
        if (k <= 1 && j + 1 >= n) break;
        if (k == 0 || u[i] < 0x20 || u[i] == 0x7f || u[i] == '"' || u[i] == '\\') {
            out[j++] = '?';
            i++;
            continue;
        }
        memcpy(out + j, s + i, k);
        i += k;
        j += k;
    }
    out[j] = '\0';
    if (i < len && j + 4 < n) strcat(out, "...");
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
    case JSON_REAL: { /* shortest, and written as a real: 1e3 is not the integer 1000 */
        char num[KD_NUM_MAX];
        kd_fmt_double(json_real_value(v), num, sizeof num);
        snprintf(buf, n, "%s%s", num, strpbrk(num, ".eEin") ? "" : ".0");
        return buf;
    }
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
    char why[128]; /* the core's rule, the same for CSV cells (candles_csv.c) */
    if (kr_candle_value_check(x, why, sizeof why)) return kd_fail(err, errlen, "%s: %s", path, why);
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

bool kd_any_number(double x) {
    return isfinite(x);
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

/* Names people bring from upstream Kronos (KronosPredictor.predict), pandas and other
 * servers, and what kronosd calls them. */
static const struct {
    const char *name, *use;
} hints[] = {
    {"pred_len", "horizon"},
    {"prediction_length", "horizon"},
    {"T", "temperature"},
    {"temp", "temperature"},
    {"sample_count", "samples"},
    {"num_samples", "samples"},
    {"n_samples", "samples"},
    {"x_timestamp", "candles.timestamps"},
    {"y_timestamp", "future_timestamps"},
    {"df", "candles"},
    {"x_df", "candles"},
    {"data", "candles"},
    {"lookback", "max_context (or send fewer candles)"},
    {"quantile", "quantiles"},
    {"return_samples", "return_paths"},
    {"max_tokens", "max_new_tokens"},
    {"n_predict", "max_new_tokens"},
    {"vol", "volume"},
    {"amt", "amount"},
    {"time", "timestamps"},
    {"datetime", "timestamps"},
};

int kd_unknown_name(const char *name, const char *what, const char *where,
                    const char *const known[], char *err, size_t errlen) {
    char q[KD_QUOTE_MAX * 2], list[512];
    size_t used = 0;
    kd_quote(name, q, sizeof q);
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++)
        if (strcmp(hints[i].name, name) == 0)
            return kd_fail(err, errlen, "%sunknown %s \"%s\"; use %s instead", where, what, q,
                           hints[i].use);
    if (!known[0])
        return kd_fail(err, errlen, "%sunknown %s \"%s\"; this endpoint takes none", where, what,
                       q);
    list[0] = '\0';
    for (int i = 0; known[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
    return kd_fail(err, errlen, "%sunknown %s \"%s\"; the %ss are: %s", where, what, q, what, list);
}

int kd_check_fields(const json_t *obj, const char *where, const char *const known[], char *err,
                    size_t errlen) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int i = 0;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (!known[i]) return kd_unknown_name(key, "field", where, known, err, errlen);
    }
    return 0;
}

int kd_form_offset(const kd_time_form *f) {
    return f && f->has_tz ? f->tz_offset_min : 0;
}

static void name_by_format(const void *ctx, size_t i, char *out, size_t n) {
    snprintf(out, n, (const char *)ctx, i);
}

int kd_align_timestamps(int64_t *walls, const int *offsets, size_t n, int target_offset,
                        const int64_t *after, const char *path_fmt, char *err, size_t errlen) {
    return kd_align_timestamps_named(walls, offsets, n, target_offset, after, name_by_format,
                                     path_fmt, err, errlen);
}

int kd_align_timestamps_named(int64_t *walls, const int *offsets, size_t n, int target_offset,
                              const int64_t *after, kd_entry_name name, const void *ctx, char *err,
                              size_t errlen) {
    char path[KD_PATH_LEN], when[KD_TIMESTAMP_MAX];
    for (size_t i = 0; i < n; i++) {
        const int64_t w = walls[i] + (int64_t)(target_offset - offsets[i]) * 60;
        name(ctx, i, path, sizeof path);
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

bool kd_is_json_number(const char *s) {
    const char *p = s;
    if (*p == '-') p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        p += strspn(p, "0123456789");
    else
        return false;
    if (*p == '.') {
        p++;
        const size_t d = strspn(p, "0123456789");
        if (!d) return false;
        p += d;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        const size_t d = strspn(p, "0123456789");
        if (!d) return false;
        p += d;
    }
    return *p == '\0';
}

void kd_control_byte_reason(unsigned char c, char *out, size_t n) {
    snprintf(out, n, "a control byte (0x%02x) is not allowed", c);
}
