/* candles_json.c — a request's candles into columns, from a jansson value or from the
 * text a stand-in names (candles_json.h). Both read the fields in the same order, so that
 * the first thing wrong is the one reported, in the same words. */
#include "candles_json.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_body.h"
#include "json_fields.h"
#include "json_reader.h"

static const char *const columnar_fields[] = {"timestamps", "open",   "high",   "low",
                                              "close",      "volume", "amount", NULL};
static const char *const row_fields[] = {"timestamp", "timestamps", "open",   "high", "low",
                                         "close",     "volume",     "amount", NULL};
/* ---- candles ------------------------------------------------------------------------ */

static int check_count(size_t n, int min_count, int max_count, char *err, size_t errlen) {
    if (max_count > 0 && n > (size_t)max_count)
        return kd_fail(err, errlen, "candles: %zu candles exceed the limit of %d", n, max_count);
    if (n > INT_MAX) return kd_fail(err, errlen, "candles: %zu candles are too many", n);
    if (n < (size_t)min_count)
        return kd_fail(err, errlen, "candles: at least %d candle%s required, got %zu", min_count,
                       min_count == 1 ? " is" : "s are", n);
    return 0;
}

/* Volume without amount is fine (the core derives amount); amount alone would be dropped
 * silently upstream (both become 0), so it is refused. */
static int check_present(const bool present[KR_D_IN], const char *where, char *err, size_t errlen) {
    for (int c = 0; c < KR_VOLUME; c++)
        if (!present[c]) return kd_fail(err, errlen, "%s%s: missing", where, kr_column_names[c]);
    if (present[KR_AMOUNT] && !present[KR_VOLUME])
        return kd_fail(err, errlen, "%samount: given without volume", where);
    return 0;
}

static int alloc_arrays(kd_owned_candles *cd, size_t n, const bool present[KR_D_IN], char *err,
                        size_t errlen) {
    cd->timestamps = malloc((n ? n : 1) * sizeof *cd->timestamps);
    if (!cd->timestamps) return kd_fail(err, errlen, "candles: out of memory for %zu candles", n);
    for (int c = 0; c < KR_D_IN; c++) {
        if (!present[c]) continue;
        cd->columns[c] = malloc((n ? n : 1) * sizeof *cd->columns[c]);
        if (!cd->columns[c])
            return kd_fail(err, errlen, "candles: out of memory for %zu candles", n);
    }
    return 0;
}

/* The candles' timestamps on one clock, the last one's offset, checked in order. */
static int align_candles(kd_owned_candles *cd, const int *offsets, const char *path_fmt, char *err,
                         size_t errlen) {
    return kd_align_timestamps(cd->timestamps, offsets, (size_t)cd->n,
                               kd_form_offset(&cd->time_form), NULL, path_fmt, err, errlen);
}

/* {"timestamps": [...], "open": [...], ...} */
static int parse_columnar(const json_t *obj, int min_count, int max_count, kd_owned_candles *cd,
                          char *err, size_t errlen) {
    const json_t *ts = kd_field(obj, "timestamps"), *col[KR_D_IN];
    bool present[KR_D_IN];
    char path[KD_PATH_LEN];

    if (kd_check_fields(obj, "candles: ", columnar_fields, err, errlen) < 0) return -1;
    if (!ts) return kd_fail(err, errlen, "candles.timestamps: missing");
    if (!json_is_array(ts))
        return kd_wrong(ts, "candles.timestamps", "an array of timestamps", err, errlen);
    const size_t n = json_array_size(ts);
    if (check_count(n, min_count, max_count, err, errlen) < 0) return -1;
    cd->n = (int)n;
    for (int c = 0; c < KR_D_IN; c++) {
        col[c] = kd_field(obj, kr_column_names[c]);
        present[c] = col[c] != NULL;
        if (!col[c]) continue;
        snprintf(path, sizeof path, "candles.%s", kr_column_names[c]);
        if (!json_is_array(col[c]))
            return kd_wrong(col[c], path, "an array of numbers", err, errlen);
        if (json_array_size(col[c]) != n)
            return kd_fail(err, errlen, "%s: %zu value%s, but timestamps has %zu", path,
                           json_array_size(col[c]), json_array_size(col[c]) == 1 ? "" : "s", n);
    }
    if (check_present(present, "candles.", err, errlen) < 0) return -1;
    if (alloc_arrays(cd, n, present, err, errlen) < 0) return -1;

    int *offsets = malloc((n ? n : 1) * sizeof *offsets);
    if (!offsets) return kd_fail(err, errlen, "candles: out of memory for %zu candles", n);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        snprintf(path, sizeof path, "candles.timestamps[%zu]", i);
        rc = kd_get_timestamp(json_array_get(ts, i), path, &cd->timestamps[i], &cd->time_form, err,
                              errlen);
        offsets[i] = kd_form_offset(&cd->time_form);
    }
    if (rc == 0) rc = align_candles(cd, offsets, "candles.timestamps[%zu]", err, errlen);
    free(offsets);
    if (rc < 0) return -1;
    for (int c = 0; c < KR_D_IN; c++) {
        for (size_t i = 0; present[c] && i < n; i++) {
            snprintf(path, sizeof path, "candles.%s[%zu]", kr_column_names[c], i);
            if (kd_get_number(json_array_get(col[c], i), path, &cd->columns[c][i], err, errlen) < 0)
                return -1;
        }
    }
    return 0;
}

/* One row {"timestamp": t, "open": o, ...}; present[] comes from the first row. */
static int parse_row(const json_t *row, size_t i, const bool present[KR_D_IN], kd_owned_candles *cd,
                     int *offset, char *err, size_t errlen) {
    char path[KD_PATH_LEN];
    snprintf(path, sizeof path, "candles[%zu]", i);
    if (!json_is_object(row)) return kd_wrong(row, path, "an object", err, errlen);
    char where[KD_PATH_LEN + 2];
    snprintf(where, sizeof where, "%s: ", path);
    if (kd_check_fields(row, where, row_fields, err, errlen) < 0) return -1;

    const json_t *t1 = kd_field(row, "timestamp"), *t2 = kd_field(row, "timestamps");
    if (t1 && t2)
        return kd_fail(err, errlen, "%s: both \"timestamp\" and \"timestamps\" given", path);
    snprintf(path, sizeof path, "candles[%zu].timestamp%s", i, t2 ? "s" : "");
    if (!t1 && !t2) return kd_fail(err, errlen, "%s: missing", path);
    if (kd_get_timestamp(t1 ? t1 : t2, path, &cd->timestamps[i], &cd->time_form, err, errlen) < 0)
        return -1;
    *offset = kd_form_offset(&cd->time_form);

    for (int c = 0; c < KR_D_IN; c++) {
        const json_t *v = kd_field(row, kr_column_names[c]);
        snprintf(path, sizeof path, "candles[%zu].%s", i, kr_column_names[c]);
        if (!v && present[c])
            return kd_fail(err, errlen, "%s: missing, but candles[0] has it", path);
        if (v && !present[c])
            return kd_fail(err, errlen, "%s: given, but candles[0] has none", path);
        if (v && kd_get_number(v, path, &cd->columns[c][i], err, errlen) < 0) return -1;
    }
    return 0;
}

/* What the first row decides: it is an object, its columns are every row's; the arrays
 * and the offsets (*offsets, freed by the caller) for n candles. */
static int rows_begin(const json_t *first, size_t n, bool present[KR_D_IN], kd_owned_candles *cd,
                      int **offsets, char *err, size_t errlen) {
    if (!json_is_object(first)) return kd_wrong(first, "candles[0]", "an object", err, errlen);
    for (int c = 0; c < KR_D_IN; c++)
        present[c] = kd_field(first, kr_column_names[c]) != NULL;
    if (check_present(present, "candles[0].", err, errlen) < 0) return -1;
    if (alloc_arrays(cd, n, present, err, errlen) < 0) return -1;
    if (!(*offsets = malloc(n * sizeof **offsets)))
        return kd_fail(err, errlen, "candles: out of memory for %zu candles", n);
    return 0;
}

/* [{"timestamp": ..., "open": ..., ...}, ...] */
static int parse_rows(const json_t *rows, int min_count, int max_count, kd_owned_candles *cd,
                      char *err, size_t errlen) {
    const size_t n = json_array_size(rows);
    bool present[KR_D_IN];
    int *offsets = NULL, rc;

    if (check_count(n, min_count, max_count, err, errlen) < 0) return -1;
    if (n == 0) return 0;
    cd->n = (int)n;
    rc = rows_begin(json_array_get(rows, 0), n, present, cd, &offsets, err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = parse_row(json_array_get(rows, i), i, present, cd, &offsets[i], err, errlen);
    if (rc == 0) rc = align_candles(cd, offsets, "candles[%zu].timestamp", err, errlen);
    free(offsets);
    return rc;
}

/* ---- from text ------------------------------------------------------------------------ */

/* A value's text as the reader took it. */
typedef struct {
    const char *s;
    size_t n;
} span;

static int next_span(kd_jreader *r, span *sp) {
    kd_jr_peek(r);
    const size_t at = r->pos;
    if (kd_jr_skip(r) < 0) return -1;
    *sp = (span){r->s + at, r->pos - at};
    return 0;
}

/* The reader took this text when the body was read, so it cannot fail on it now. */
static int unreadable(const char *path, char *err, size_t errlen) {
    return kd_fail(err, errlen, "%s: not JSON the reader takes", path);
}

static bool is_null(span sp) {
    return sp.n == 4 && !memcmp(sp.s, "null", 4);
}

static bool starts_number(int c) {
    return c == '-' || (c >= '0' && c <= '9');
}

/* A value read through its shallow jansson value by the tree parser's own reader `get`,
 * for what the fast paths do not take and for every message. */
typedef int (*get_fn)(const json_t *v, const char *path, void *out, void *form, char *err,
                      size_t errlen);

static int slow(kd_jreader *r, size_t at, const char *path, get_fn get, void *out, void *form,
                char *err, size_t errlen) {
    span sp;
    r->pos = at;
    if (next_span(r, &sp) < 0) return unreadable(path, err, errlen);
    json_t *v = kd_body_shallow(sp.s, sp.n);
    if (!v) return kd_fail(err, errlen, "%s: out of memory", path);
    const int rc = get(v, path, out, form, err, errlen);
    json_decref(v);
    return rc;
}

static int get_timestamp(const json_t *v, const char *path, void *out, void *form, char *err,
                         size_t errlen) {
    return kd_get_timestamp(v, path, out, form, err, errlen);
}

static int get_number(const json_t *v, const char *path, void *out, void *form, char *err,
                      size_t errlen) {
    (void)form;
    return kd_get_number(v, path, out, err, errlen);
}

static int get_wrong(const json_t *v, const char *path, void *rule, void *form, char *err,
                     size_t errlen) {
    (void)form;
    return kd_wrong(v, path, rule, err, errlen);
}

/* kd_wrong for the value at sp. */
static int wrong_text(span sp, const char *path, const char *rule, char *err, size_t errlen) {
    kd_jreader r;
    kd_jr_init(&r, sp.s, sp.n);
    return slow(&r, 0, path, get_wrong, (void *)rule, NULL, err, errlen);
}

/* The next timestamp: an ISO string or Unix seconds read here, anything else as
 * kd_get_timestamp reads it. */
static int text_timestamp(kd_jreader *r, const char *path_fmt, size_t i, int64_t *wall,
                          kd_time_form *form, char *err, size_t errlen) {
    const int c = kd_jr_peek(r);
    const size_t at = r->pos;
    char buf[64], why[128], path[KD_PATH_LEN];
    size_t len;
    double x;
    bool is_int;
    kd_time_form f = {0};
    if (c == '"' && kd_jr_string(r, buf, sizeof buf, &len) == 0 && len < sizeof buf &&
        kd_parse_timestamp(buf, wall, &f.tz_offset_min, &f.has_tz, why, sizeof why) == 0) {
        *form = f;
        return 0;
    }
    r->pos = at;
    if (starts_number(c) && kd_jr_number(r, &x, &is_int) == 0 &&
        kd_wall_from_unix(x, wall, why, sizeof why) == 0) {
        f.unix_seconds = true;
        *form = f;
        return 0;
    }
    snprintf(path, sizeof path, path_fmt, i);
    return slow(r, at, path, get_timestamp, wall, form, err, errlen);
}

/* The next value of column col: a number read here, anything else as kd_get_number. */
static int text_number(kd_jreader *r, const char *col, size_t i, double *out, char *err,
                       size_t errlen) {
    const int c = kd_jr_peek(r);
    const size_t at = r->pos;
    char why[128], path[KD_PATH_LEN];
    double x;
    bool is_int;
    if (starts_number(c) && kd_jr_number(r, &x, &is_int) == 0 &&
        kr_candle_value_check(x, why, sizeof why) == 0) {
        *out = x;
        return 0;
    }
    snprintf(path, sizeof path, "candles.%s[%zu]", col, i);
    return slow(r, at, path, get_number, out, NULL, err, errlen);
}

static size_t count_elements(span sp) {
    kd_jreader r;
    bool first = true;
    size_t n = 0;
    kd_jr_init(&r, sp.s, sp.n);
    if (kd_jr_open(&r, '[') < 0) return 0;
    while (kd_jr_more(&r, ']', &first) == 1 && kd_jr_skip(&r) == 0)
        n++;
    return n;
}

/* The members of the columnar object: f[0] timestamps, f[1 + c] column c (s NULL when
 * absent or null); the first unknown field is the error. */
static int columnar_members(span obj, span f[KR_D_IN + 1], char *err, size_t errlen) {
    kd_jreader r;
    bool first = true;
    int more;
    kd_jr_init(&r, obj.s, obj.n);
    if (kd_jr_open(&r, '{') < 0) return unreadable("candles", err, errlen);
    while ((more = kd_jr_more(&r, '}', &first)) == 1) {
        char *key = kd_jr_key(&r);
        span sp;
        int k = 0;
        if (!key) return kd_fail(err, errlen, "candles: out of memory or not JSON");
        while (columnar_fields[k] && strcmp(columnar_fields[k], key) != 0)
            k++;
        if (!columnar_fields[k]) {
            kd_unknown_name(key, "field", "candles: ", columnar_fields, err, errlen);
            free(key);
            return -1;
        }
        free(key);
        if (next_span(&r, &sp) < 0) return unreadable("candles", err, errlen);
        f[k] = is_null(sp) ? (span){NULL, 0} : sp;
    }
    return more == 0 ? 0 : unreadable("candles", err, errlen);
}

/* The n values of the array at sp, each by one of the fast readers. */
static int text_timestamps(span sp, kd_owned_candles *cd, int *offsets, char *err, size_t errlen) {
    kd_jreader r;
    bool first = true;
    kd_jr_init(&r, sp.s, sp.n);
    if (kd_jr_open(&r, '[') < 0) return unreadable("candles.timestamps", err, errlen);
    for (size_t i = 0; i < (size_t)cd->n; i++) {
        if (kd_jr_more(&r, ']', &first) != 1) return unreadable("candles.timestamps", err, errlen);
        if (text_timestamp(&r, "candles.timestamps[%zu]", i, &cd->timestamps[i], &cd->time_form,
                           err, errlen) < 0)
            return -1;
        offsets[i] = kd_form_offset(&cd->time_form);
    }
    return 0;
}

static int text_column(span sp, int c, kd_owned_candles *cd, char *err, size_t errlen) {
    kd_jreader r;
    bool first = true;
    kd_jr_init(&r, sp.s, sp.n);
    if (kd_jr_open(&r, '[') < 0) return unreadable(kr_column_names[c], err, errlen);
    for (size_t i = 0; i < (size_t)cd->n; i++) {
        if (kd_jr_more(&r, ']', &first) != 1) return unreadable(kr_column_names[c], err, errlen);
        if (text_number(&r, kr_column_names[c], i, &cd->columns[c][i], err, errlen) < 0) return -1;
    }
    return 0;
}

/* parse_columnar's checks, in its order, on text. */
static int text_columnar(span obj, int min_count, int max_count, kd_owned_candles *cd, char *err,
                         size_t errlen) {
    span f[KR_D_IN + 1] = {{0}};
    bool present[KR_D_IN];
    char path[KD_PATH_LEN];

    if (columnar_members(obj, f, err, errlen) < 0) return -1;
    if (!f[0].s) return kd_fail(err, errlen, "candles.timestamps: missing");
    if (f[0].s[0] != '[')
        return wrong_text(f[0], "candles.timestamps", "an array of timestamps", err, errlen);
    const size_t n = count_elements(f[0]);
    if (check_count(n, min_count, max_count, err, errlen) < 0) return -1;
    cd->n = (int)n;
    for (int c = 0; c < KR_D_IN; c++) {
        const span col = f[1 + c];
        present[c] = col.s != NULL;
        if (!col.s) continue;
        snprintf(path, sizeof path, "candles.%s", kr_column_names[c]);
        if (col.s[0] != '[') return wrong_text(col, path, "an array of numbers", err, errlen);
        const size_t m = count_elements(col);
        if (m != n)
            return kd_fail(err, errlen, "%s: %zu value%s, but timestamps has %zu", path, m,
                           m == 1 ? "" : "s", n);
    }
    if (check_present(present, "candles.", err, errlen) < 0) return -1;
    if (alloc_arrays(cd, n, present, err, errlen) < 0) return -1;

    int *offsets = malloc((n ? n : 1) * sizeof *offsets);
    if (!offsets) return kd_fail(err, errlen, "candles: out of memory for %zu candles", n);
    int rc = text_timestamps(f[0], cd, offsets, err, errlen);
    if (rc == 0) rc = align_candles(cd, offsets, "candles.timestamps[%zu]", err, errlen);
    free(offsets);
    for (int c = 0; rc == 0 && c < KR_D_IN; c++)
        if (present[c]) rc = text_column(f[1 + c], c, cd, err, errlen);
    return rc;
}

/* A row as parse_row reads it: an object of its members' shallow values (or the row's own
 * shallow value when it is not an object). */
static json_t *shallow_row(span sp) {
    kd_jreader r;
    bool first = true;
    int more;
    if (sp.s[0] != '{') return kd_body_shallow(sp.s, sp.n);
    json_t *o = json_object();
    kd_jr_init(&r, sp.s, sp.n);
    if (!o || kd_jr_open(&r, '{') < 0) {
        json_decref(o);
        return NULL;
    }
    while ((more = kd_jr_more(&r, '}', &first)) == 1) {
        char *key = kd_jr_key(&r);
        span v;
        const int rc = key && next_span(&r, &v) == 0
                           ? json_object_set_new(o, key, kd_body_shallow(v.s, v.n))
                           : -1;
        free(key);
        if (rc < 0) break;
    }
    if (more == 0) return o;
    json_decref(o);
    return NULL;
}

/* parse_rows on text, a row's small tree at a time. */
static int text_rows(span arr, int min_count, int max_count, kd_owned_candles *cd, char *err,
                     size_t errlen) {
    const size_t n = count_elements(arr);
    bool present[KR_D_IN], first = true;
    int *offsets = NULL, rc = 0;
    kd_jreader r;
    span sp;

    if (check_count(n, min_count, max_count, err, errlen) < 0) return -1;
    if (n == 0) return 0;
    cd->n = (int)n;
    kd_jr_init(&r, arr.s, arr.n);
    if (kd_jr_open(&r, '[') < 0) return unreadable("candles", err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (kd_jr_more(&r, ']', &first) != 1 || next_span(&r, &sp) < 0) {
            rc = unreadable("candles", err, errlen);
            break;
        }
        json_t *row = shallow_row(sp);
        if (!row) {
            rc = kd_fail(err, errlen, "candles[%zu]: out of memory", i);
            break;
        }
        if (i == 0) rc = rows_begin(row, n, present, cd, &offsets, err, errlen);
        if (rc == 0) rc = parse_row(row, i, present, cd, &offsets[i], err, errlen);
        json_decref(row);
    }
    if (rc == 0) rc = align_candles(cd, offsets, "candles[%zu].timestamp", err, errlen);
    free(offsets);
    return rc;
}

int kd_candles_parse(const json_t *v, int min_count, int max_count, kd_owned_candles *out,
                     char *err, size_t errlen) {
    const char *text;
    size_t len;
    int rc;
    memset(out, 0, sizeof *out);
    if (!v || json_is_null(v)) return kd_fail(err, errlen, "candles: missing");
    if (kd_body_text_of(v, &text, &len))
        rc = len && text[0] == '{'
                 ? text_columnar((span){text, len}, min_count, max_count, out, err, errlen)
                 : text_rows((span){text, len}, min_count, max_count, out, err, errlen);
    else if (json_is_object(v))
        rc = parse_columnar(v, min_count, max_count, out, err, errlen);
    else if (json_is_array(v))
        rc = parse_rows(v, min_count, max_count, out, err, errlen);
    else
        rc = kd_wrong(v, "candles", "an object of columns or an array of candle objects", err,
                      errlen);
    if (rc < 0) kd_candles_free(out);
    return rc;
}

void kd_candles_free(kd_owned_candles *c) {
    if (!c) return;
    free(c->timestamps);
    for (int k = 0; k < KR_D_IN; k++)
        free(c->columns[k]);
    memset(c, 0, sizeof *c);
}

void kd_candles_link(const kd_owned_candles *c, kr_candles *out) {
    out->n = c->n;
    out->timestamps = c->timestamps;
    for (int k = 0; k < KR_D_IN; k++)
        out->columns[k] = c->columns[k];
}
