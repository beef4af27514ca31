/* tokens_json.c — parse token-level requests, write their responses. */
#include "tokens_json.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forecast_json.h"
#include "json_fields.h"

static const char *const generate_fields[] = {
    "session",       "tokens",      "timestamps", "stamps", "max_new_tokens", "future_timestamps",
    "future_stamps", "temperature", "top_k",      "top_p",  "seed",           "timeout_ms",
    "model",         NULL};
static const char *const detokenize_fields[] = {"tokens", "mean", "std", "model", NULL};

/* ---- tokens and stamps ------------------------------------------------------------------ */

static int get_array(const json_t *body, const char *key, int max, const json_t **out, char *err,
                     size_t errlen) {
    const json_t *v = kd_field(body, key);
    *out = v;
    if (!v) return 0;
    if (!json_is_array(v)) return kd_wrong(v, key, "an array", err, errlen);
    if (max > 0 && json_array_size(v) > (size_t)max)
        return kd_fail(err, errlen, "%s: %zu values exceed the limit of %d", key,
                       json_array_size(v), max);
    return 0;
}

/* [[s1, s2], ...] into s1[n], s2[n] (allocated). */
static int parse_pairs(const json_t *a, const char *key, const kd_token_limits *lim, int32_t **s1,
                       int32_t **s2, char *err, size_t errlen) {
    const size_t n = json_array_size(a);
    char path[KD_PATH_LEN], rule[2][48];
    snprintf(rule[0], sizeof rule[0], "an integer in 0..%d (s1)", lim->s1_vocab - 1);
    snprintf(rule[1], sizeof rule[1], "an integer in 0..%d (s2)", lim->s2_vocab - 1);
    *s1 = malloc((n ? n : 1) * sizeof **s1);
    *s2 = malloc((n ? n : 1) * sizeof **s2);
    if (!*s1 || !*s2) return kd_fail(err, errlen, "%s: out of memory for %zu tokens", key, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *pair = json_array_get(a, i);
        long long v[2];
        snprintf(path, sizeof path, "%s[%zu]", key, i);
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            return kd_wrong(pair, path, "a pair [s1, s2]", err, errlen);
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s[%zu][%d]", key, i, k);
            if (kd_get_int(json_array_get(pair, (size_t)k), path, 0,
                           (k ? lim->s2_vocab : lim->s1_vocab) - 1, rule[k], &v[k], err,
                           errlen) < 0)
                return -1;
        }
        (*s1)[i] = (int32_t)v[0];
        (*s2)[i] = (int32_t)v[1];
    }
    return 0;
}

/* [minute, hour, weekday, day, month] */
static int parse_stamp(const json_t *v, const char *path, kr_stamp *out, char *err, size_t errlen) {
    static const struct {
        const char *name;
        int lo, hi;
    } parts[5] = {
        {"minute", 0, 59}, {"hour", 0, 23}, {"weekday", 0, 6}, {"day", 1, 31}, {"month", 1, 12}};
    char p[KD_PATH_LEN + 8], rule[48];
    long long x[5];
    if (!json_is_array(v) || json_array_size(v) != 5)
        return kd_wrong(v, path, "[minute, hour, weekday, day, month]", err, errlen);
    for (int k = 0; k < 5; k++) {
        snprintf(p, sizeof p, "%s[%d]", path, k);
        snprintf(rule, sizeof rule, "an integer in %d..%d (%s)", parts[k].lo, parts[k].hi,
                 parts[k].name);
        if (kd_get_int(json_array_get(v, (size_t)k), p, parts[k].lo, parts[k].hi, rule, &x[k], err,
                       errlen) < 0)
            return -1;
    }
    *out = (kr_stamp){(int)x[0], (int)x[1], (int)x[2], (int)x[3], (int)x[4]};
    return 0;
}

/* The clock that the timestamps of one request share (see kd_align_timestamps): set by
 * the first list of timestamps, so that future timestamps follow the context's. */
typedef struct {
    bool set;
    int offset;   /* minutes: the context's last timestamp's */
    int64_t last; /* the context's last timestamp, on that clock */
} time_chain;

/* Timestamps as stamps, after the same checks as /forecast's: increasing as instants, the
 * future ones after the context. */
static int stamps_from_timestamps(const json_t *a, const char *key, int n, time_chain *chain,
                                  kr_stamp *out, char *err, size_t errlen) {
    int64_t *walls = malloc((size_t)(n ? n : 1) * sizeof *walls);
    int *offsets = malloc((size_t)(n ? n : 1) * sizeof *offsets), rc = 0;
    char path[KD_PATH_LEN], fmt[KD_PATH_LEN];
    kd_time_form form = {0};
    if (!walls || !offsets) rc = kd_fail(err, errlen, "%s: out of memory for %d stamps", key, n);
    for (int i = 0; rc == 0 && i < n; i++) {
        snprintf(path, sizeof path, "%s[%d]", key, i);
        rc = kd_get_timestamp(json_array_get(a, (size_t)i), path, &walls[i], &form, err, errlen);
        offsets[i] = kd_form_offset(&form);
    }
    snprintf(fmt, sizeof fmt, "%s[%%zu]", key);
    const int offset = chain->set ? chain->offset : kd_form_offset(&form);
    if (rc == 0 && n > 0)
        rc = kd_align_timestamps(walls, offsets, (size_t)n, offset,
                                 chain->set ? &chain->last : NULL, fmt, err, errlen);
    for (int i = 0; rc == 0 && i < n; i++)
        out[i] = kr_stamp_from_wall(walls[i]);
    if (rc == 0 && n > 0 && !chain->set) *chain = (time_chain){true, offset, walls[n - 1]};
    free(walls);
    free(offsets);
    return rc;
}

/* n stamps from `ts_key` (timestamps) or `st_key` (stamps): exactly one of them when n > 0,
 * with n entries. For messages: `unit` is what gets one stamp ("token"), `count` says where
 * n came from ("tokens has"). */
static int parse_stamps(const json_t *body, const char *ts_key, const char *st_key, int n,
                        const char *unit, const char *count, time_chain *chain, kr_stamp **out,
                        char *err, size_t errlen) {
    const json_t *ts = kd_field(body, ts_key), *st = kd_field(body, st_key);
    const json_t *a = ts ? ts : st;
    const char *key = ts ? ts_key : st_key;
    char path[KD_PATH_LEN];

    if (ts && st) return kd_fail(err, errlen, "%s and %s: give one, not both", ts_key, st_key);
    if (!a && n == 0) return 0;
    if (!a)
        return kd_fail(err, errlen, "%s: missing; give %s or %s, one per %s", ts_key, ts_key,
                       st_key, unit);
    if (!json_is_array(a)) return kd_wrong(a, key, "an array", err, errlen);
    if (json_array_size(a) != (size_t)n)
        return kd_fail(err, errlen, "%s: %zu value%s, but %s %d", key, json_array_size(a),
                       json_array_size(a) == 1 ? "" : "s", count, n);
    if (!(*out = malloc((size_t)(n ? n : 1) * sizeof **out)))
        return kd_fail(err, errlen, "%s: out of memory for %d stamps", key, n);
    if (ts) return stamps_from_timestamps(a, key, n, chain, *out, err, errlen);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s[%d]", key, i);
        if (parse_stamp(json_array_get(a, (size_t)i), path, &(*out)[i], err, errlen) < 0) return -1;
    }
    return 0;
}

/* ---- /generate ---------------------------------------------------------------------------- */

static int parse_session(const json_t *body, kd_generate_input *in, char *err, size_t errlen) {
    const json_t *v = kd_field(body, "session");
    if (!v) return 0;
    if (!json_is_string(v)) return kd_wrong(v, "session", "a session id string", err, errlen);
    in->has_session = true;
    snprintf(in->session, sizeof in->session, "%s", json_string_value(v));
    return 0;
}

int kd_generate_request_parse(const json_t *body, const kd_token_limits *lim, kd_generate_input *in,
                              char *err, size_t errlen) {
    const json_t *tokens;
    long long n_new = 0;
    memset(in, 0, sizeof *in);
    /* the same defaults as /forecast */
    in->sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
    if (kd_check_fields(body, "", generate_fields, err, errlen) < 0 ||
        parse_session(body, in, err, errlen) < 0 ||
        get_array(body, "tokens", lim->max_tokens, &tokens, err, errlen) < 0)
        return -1;
    if (tokens) {
        in->n_append = (int)json_array_size(tokens);
        if (parse_pairs(tokens, "tokens", lim, &in->s1, &in->s2, err, errlen) < 0) return -1;
    }
    time_chain chain = {0};
    if (parse_stamps(body, "timestamps", "stamps", in->n_append, "token", "tokens has", &chain,
                     &in->stamps, err, errlen) < 0 ||
        kd_opt_int(body, "max_new_tokens", 0, INT_MAX, "an integer >= 0", &n_new, err, errlen) < 0)
        return -1;
    in->n_new = (int)n_new;
    if (parse_stamps(body, "future_timestamps", "future_stamps", in->n_new, "new token",
                     "max_new_tokens is", &chain, &in->new_stamps, err, errlen) < 0 ||
        kd_sampling_parse(body, &in->sampling, &in->seed, err, errlen) < 0 ||
        kd_opt_int(body, "timeout_ms", 1, 86400000LL, "an integer in 1..86400000", &in->timeout_ms,
                   err, errlen) < 0)
        return -1;
    return 0;
}

int kd_generate_set_session(kd_generate_input *in, const char *id, char *err, size_t errlen) {
    if (strlen(id) > KD_SESSION_ARG_MAX)
        return kd_fail(err, errlen, "session id in the path: too long");
    if (in->has_session && strcmp(in->session, id) != 0)
        return kd_fail(err, errlen, "session: the body names another session than the path");
    in->has_session = true;
    snprintf(in->session, sizeof in->session, "%s", id);
    return 0;
}

void kd_generate_input_free(kd_generate_input *in) {
    free(in->s1);
    free(in->s2);
    free(in->stamps);
    free(in->new_stamps);
    memset(in, 0, sizeof *in);
}

/* ---- /detokenize --------------------------------------------------------------------------- */

static int parse_six(const json_t *body, const char *key, bool nonneg, float out[KR_D_IN],
                     char *err, size_t errlen) {
    const json_t *a = kd_field(body, key);
    char path[KD_PATH_LEN];
    if (!a || !json_is_array(a) || json_array_size(a) != KR_D_IN)
        return kd_wrong(a, key, "an array of 6 numbers (open, high, low, close, volume, amount)",
                        err, errlen);
    for (int c = 0; c < KR_D_IN; c++) {
        double x;
        snprintf(path, sizeof path, "%s[%d]", key, c);
        if (kd_get_number(json_array_get(a, (size_t)c), path, &x, err, errlen) < 0) return -1;
        if (!isfinite((float)x)) return kd_fail(err, errlen, "%s: outside float range", path);
        if (nonneg && x < 0) return kd_fail(err, errlen, "%s: must be >= 0, got %g", path, x);
        out[c] = (float)x;
    }
    return 0;
}

int kd_detokenize_request_parse(const json_t *body, const kd_token_limits *lim,
                                kd_detokenize_input *in, char *err, size_t errlen) {
    const json_t *tokens;
    memset(in, 0, sizeof *in);
    if (kd_check_fields(body, "", detokenize_fields, err, errlen) < 0 ||
        get_array(body, "tokens", lim->max_tokens, &tokens, err, errlen) < 0)
        return -1;
    if (!tokens || json_array_size(tokens) == 0)
        return kd_wrong(tokens, "tokens", "a non-empty array of pairs [s1, s2]", err, errlen);
    in->n = (int)json_array_size(tokens);
    if (parse_pairs(tokens, "tokens", lim, &in->s1, &in->s2, err, errlen) < 0 ||
        parse_six(body, "mean", false, in->mean, err, errlen) < 0 ||
        parse_six(body, "std", true, in->std, err, errlen) < 0)
        return -1;
    return 0;
}

void kd_detokenize_input_free(kd_detokenize_input *in) {
    free(in->s1);
    free(in->s2);
    memset(in, 0, sizeof *in);
}

/* ---- responses ------------------------------------------------------------------------------ */

json_t *kd_tokens_json(const int32_t *s1, const int32_t *s2, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_pack("[ii]", (int)s1[i], (int)s2[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *six(const float v[KR_D_IN]) {
    json_t *a = json_array();
    for (int c = 0; a && c < KR_D_IN; c++)
        if (json_array_append_new(a, isfinite(v[c]) ? json_real((double)v[c]) : json_null()) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *kd_tokenize_response_json(const int32_t *s1, const int32_t *s2, int n,
                                  const float mean[KR_D_IN], const float std[KR_D_IN]) {
    return json_pack("{s:o,s:o,s:o}", "tokens", kd_tokens_json(s1, s2, n), "mean", six(mean), "std",
                     six(std));
}

json_t *kd_detokenize_response_json(const double *out, int n) {
    return json_pack("{s:o}", "candles", kd_columns_json(out, n));
}
