/* candles_csv.c — parse CSV candles, write forecast rows as CSV. */
#include "candles_csv.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json_fields.h"
#include "numfmt.h"
#include "strbuf.h"
#include "timefmt.h"

#define FIELD_MAX   128 /* longer than any timestamp or number */
#define COLUMNS_MAX 64
#define COL_SKIP    (-2) /* an unnamed index column */
#define COL_TIME    (-1)

/* ---- reading ------------------------------------------------------------------------ */

typedef struct {
    const char *p, *end;
    int line;   /* of the record being read, 1-based */
    int column; /* of the field being read, 1-based */
    char *err;
    size_t errlen;
} reader;

static int fail_at(reader *r, const char *fmt, const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b);
    return kd_fail(r->err, r->errlen, "CSV line %d, column %d%s", r->line, r->column, msg);
}

/* One field into out[FIELD_MAX]; *last says whether it ended its record. */
static int read_field(reader *r, char *out, bool *last) {
    size_t n = 0;
    const int start = r->line; /* where an unclosed quote opened */
    bool quoted = r->p < r->end && *r->p == '"';
    if (quoted) r->p++;
    for (;;) {
        if (r->p >= r->end) {
            if (quoted) {
                r->line = start;
                return fail_at(r, ": a quoted value is not closed%s%s", "", "");
            }
            *last = true;
            break;
        }
        char c = *r->p;
        if (quoted && c == '"') {
            if (r->p + 1 < r->end && r->p[1] == '"') {
                r->p++; /* "" is one quote */
            } else {
                quoted = false;
                r->p++;
                continue;
            }
        } else if (!quoted && (c == ',' || c == '\n' || c == '\r')) {
            r->p++;
            *last = c != ',';
            if (c == '\r' && r->p < r->end && *r->p == '\n') r->p++;
            break;
        } else if (c == '\n') {
            r->line++; /* inside quotes */
        }
        /* a NUL or other control byte would cut the value short where C reads it: refused,
         * as JSON refuses them in strings (a tab is whitespace, trimmed below) */
        if (((unsigned char)c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
            char why[64];
            kd_control_byte_reason((unsigned char)c, why, sizeof why);
            return fail_at(r, ": %s%s", why, "");
        }
        if (n + 1 >= FIELD_MAX) return fail_at(r, ": a value longer than %s bytes%s", "127", "");
        out[n++] = c;
        r->p++;
    }
    /* trim the spaces some writers put around values */
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t'))
        n--;
    out[n] = '\0';
    size_t lead = strspn(out, " \t");
    if (lead) memmove(out, out + lead, n - lead + 1);
    return 0;
}

static bool blank_line(const reader *r) {
    return r->p < r->end && (*r->p == '\n' || *r->p == '\r');
}

static void skip_line_end(reader *r) {
    if (r->p < r->end && *r->p == '\r') r->p++;
    if (r->p < r->end && *r->p == '\n') r->p++;
}

/* ---- the header --------------------------------------------------------------------- */

static const char *const column_names[] = {"timestamps", "open",   "high",   "low",
                                           "close",      "volume", "amount", NULL};

static int role_of(const char *name) {
    if (!strcasecmp(name, "timestamps") || !strcasecmp(name, "timestamp") ||
        !strcasecmp(name, "date"))
        return COL_TIME;
    for (int c = 0; c < KR_D_IN; c++)
        if (!strcasecmp(name, kr_column_names[c])) return c;
    return COL_SKIP - 1; /* unknown */
}

typedef struct {
    int n;
    int role[COLUMNS_MAX];
    char name[COLUMNS_MAX][FIELD_MAX];
    bool present[KR_D_IN];
} header;

static int read_header(reader *r, header *h) {
    bool last = false, has_time = false;
    char where[48];
    memset(h, 0, sizeof *h);
    while (!last) {
        if (h->n == COLUMNS_MAX)
            return kd_fail(r->err, r->errlen, "CSV line 1: more than %d columns", COLUMNS_MAX);
        r->column = h->n + 1;
        char *name = h->name[h->n];
        if (read_field(r, name, &last) < 0) return -1;
        int role = role_of(name);
        if (h->n == 0 && (!*name || !strncmp(name, "Unnamed:", 8))) role = COL_SKIP;
        snprintf(where, sizeof where, "CSV line 1, column %d: ", h->n + 1);
        if (role < COL_SKIP) {
            if (!*name)
                return kd_fail(r->err, r->errlen,
                               "%sa column with no name (only the first column, an index, may "
                               "have none)",
                               where);
            return kd_unknown_name(name, "column", where, column_names, r->err, r->errlen);
        }
        if ((role == COL_TIME && has_time) || (role >= 0 && h->present[role]))
            return kd_fail(r->err, r->errlen, "%s%s: a second %s column", where, name,
                           role == COL_TIME ? "timestamp" : kr_column_names[role]);
        if (role == COL_TIME) has_time = true;
        if (role >= 0) h->present[role] = true;
        h->role[h->n++] = role;
    }
    if (!has_time)
        return kd_fail(r->err, r->errlen,
                       "CSV line 1: no timestamps column (name one timestamps, timestamp or date)");
    for (int c = 0; c < KR_VOLUME; c++)
        if (!h->present[c])
            return kd_fail(r->err, r->errlen,
                           "CSV line 1: no %s column (open, high, low and close are required)",
                           kr_column_names[c]);
    if (h->present[KR_AMOUNT] && !h->present[KR_VOLUME])
        return kd_fail(r->err, r->errlen, "CSV line 1: an amount column without volume");
    return 0;
}

/* ---- rows --------------------------------------------------------------------------- */

static int grow(kd_owned_candles *cd, const header *h, size_t *cap, int **offsets, int **lines,
                char *err, size_t errlen) {
    size_t c2 = *cap ? *cap * 2 : 256;
    int64_t *t = realloc(cd->timestamps, c2 * sizeof *t);
    if (!t) return kd_fail(err, errlen, "CSV: out of memory for %zu candles", c2);
    cd->timestamps = t;
    int *o = realloc(*offsets, c2 * sizeof *o);
    if (!o) return kd_fail(err, errlen, "CSV: out of memory for %zu candles", c2);
    *offsets = o;
    int *l = realloc(*lines, c2 * sizeof *l);
    if (!l) return kd_fail(err, errlen, "CSV: out of memory for %zu candles", c2);
    *lines = l;
    for (int c = 0; c < KR_D_IN; c++) {
        if (!h->present[c]) continue;
        double *x = realloc(cd->columns[c], c2 * sizeof *x);
        if (!x) return kd_fail(err, errlen, "CSV: out of memory for %zu candles", c2);
        cd->columns[c] = x;
    }
    *cap = c2;
    return 0;
}

/* A timestamp cell: a number as JSON writes one is Unix seconds, anything else ISO 8601 —
 * the two forms a JSON timestamp takes, read by the same functions. */
static int read_time(reader *r, const char *f, const char *name, int64_t *wall,
                     kd_time_form *form) {
    char why[128], q[KD_QUOTE_MAX * 2], msg[256];
    kd_time_form tf = {0};
    if (kd_is_json_number(f)) {
        tf.unix_seconds = true;
        if (kd_wall_from_unix(strtod(f, NULL), wall, why, sizeof why) < 0)
            return fail_at(r, " (%s): %s", name, why);
    } else if (kd_parse_timestamp(f, wall, &tf.tz_offset_min, &tf.has_tz, why, sizeof why) < 0) {
        kd_quote(f, q, sizeof q);
        snprintf(msg, sizeof msg, "\"%s\" is not a valid timestamp (%s)", q, why);
        return fail_at(r, " (%s): %s", name, msg);
    }
    *form = tf;
    return 0;
}

/* A value cell: a number as JSON writes one (no hex, inf or nan), then the core's rule for
 * candle values (kr_candle_value_check), as a JSON body's numbers get. */
static int read_number(reader *r, const char *f, const char *name, double *out) {
    char q[KD_QUOTE_MAX * 2], msg[256];
    if (!*f) return fail_at(r, " (%s): empty; every candle needs a value%s", name, "");
    char *end;
    const double spelled = strtod(f, &end); /* "nan", "inf": the core's reason for them */
    if (!kd_is_json_number(f) && !*end && kr_candle_value_check(spelled, msg, sizeof msg))
        return fail_at(r, " (%s): %s", name, msg);
    if (!kd_is_json_number(f)) {
        kd_quote(f, q, sizeof q);
        snprintf(msg, sizeof msg, "must be a number, got \"%s\"", q);
        return fail_at(r, " (%s): %s", name, msg);
    }
    const double x = strtod(f, NULL);
    if (kr_candle_value_check(x, msg, sizeof msg)) return fail_at(r, " (%s): %s", name, msg);
    *out = x;
    return 0;
}

/* Where each row's timestamp was, for messages after the rows are read. */
typedef struct {
    int *line;
    int column;
    const char *name;
} time_cells;

static void name_time_cell(const void *ctx, size_t i, char *out, size_t n) {
    const time_cells *t = ctx;
    snprintf(out, n, "CSV line %d, column %d (%s)", t->line[i], t->column, t->name);
}

static int read_row(reader *r, const header *h, kd_owned_candles *cd, size_t i, int *offset) {
    char f[FIELD_MAX], msg[96];
    bool last = false;
    int k = 0;
    for (; !last; k++) {
        r->column = k + 1;
        if (k == h->n) {
            snprintf(msg, sizeof msg, ": more values than the header's %d columns", h->n);
            return fail_at(r, "%s%s", msg, "");
        }
        if (read_field(r, f, &last) < 0) return -1;
        const int role = h->role[k];
        if (role == COL_TIME) {
            if (read_time(r, f, h->name[k], &cd->timestamps[i], &cd->time_form) < 0) return -1;
            *offset = kd_form_offset(&cd->time_form); /* ordered once all are read */
        } else if (role >= 0 && read_number(r, f, h->name[k], &cd->columns[role][i]) < 0) {
            return -1;
        }
    }
    if (k < h->n) {
        snprintf(msg, sizeof msg, ": %d values, but the header has %d columns", k, h->n);
        return fail_at(r, "%s%s", msg, "");
    }
    return 0;
}

int kd_candles_csv_parse(const char *text, size_t len, int min_count, int max_count,
                         kd_owned_candles *out, char *err, size_t errlen) {
    reader r = {text, text + len, 1, 1, err, errlen};
    header *h = malloc(sizeof *h);
    size_t n = 0, cap = 0;
    int rc = -1, *offsets = NULL, *lines = NULL;
    memset(out, 0, sizeof *out);
    if (!h) return kd_fail(err, errlen, "CSV: out of memory");
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) r.p += 3; /* a BOM, from spreadsheets */
    if (r.p >= r.end) {
        kd_fail(err, errlen, "CSV: empty; expected a header row and candles");
        goto done;
    }
    if (read_header(&r, h) < 0) goto done;
    for (r.line = 2; r.p < r.end; r.line++) {
        if (blank_line(&r)) {
            skip_line_end(&r);
            continue;
        }
        if (max_count > 0 && n >= (size_t)max_count) {
            kd_fail(err, errlen, "CSV line %d: more than the limit of %d candles", r.line,
                    max_count);
            goto done;
        }
        if (n == cap && grow(out, h, &cap, &offsets, &lines, err, errlen) < 0) goto done;
        lines[n] = r.line;
        if (read_row(&r, h, out, n, &offsets[n]) < 0) goto done;
        n++;
    }
    /* on one clock, that of the last row, and in order as instants: the JSON rule */
    time_cells cells = {lines, 1, "timestamps"};
    for (int k = 0; k < h->n; k++)
        if (h->role[k] == COL_TIME) cells.column = k + 1, cells.name = h->name[k];
    if (n > 0 &&
        kd_align_timestamps_named(out->timestamps, offsets, n, kd_form_offset(&out->time_form),
                                  NULL, name_time_cell, &cells, err, errlen) < 0)
        goto done;
    if (n < (size_t)min_count) {
        kd_fail(err, errlen, "CSV: at least %d candle%s required, got %zu", min_count,
                min_count == 1 ? " is" : "s are", n);
        goto done;
    }
    if (n == 0 && grow(out, h, &cap, &offsets, &lines, err, errlen) < 0) goto done;
    out->n = (int)n;
    rc = 0;
done:
    free(offsets);
    free(lines);
    free(h);
    if (rc < 0) kd_candles_free(out);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------ */

typedef kd_strbuf text;

static void add(text *t, const char *s) {
    kd_strbuf_puts(t, s);
}

static void add_value(text *t, double x) {
    char num[KD_NUM_MAX];
    add(t, ",");
    if (isfinite(x)) { /* a missing value stays an empty field, as pandas writes NaN */
        kd_fmt_float32(x, num, sizeof num);
        add(t, num);
    }
}

static void add_header(text *t, const kr_forecast_result *res) {
    char level[KD_NUM_MAX], name[64];
    add(t, "timestamps");
    for (int c = 0; c < KR_D_IN; c++) {
        add(t, ",");
        add(t, kr_column_names[c]);
    }
    for (int q = 0; res->quantiles && q < res->n_quantiles; q++) {
        kd_fmt_double(res->quantile_levels[q], level, sizeof level);
        for (int c = 0; c < KR_D_IN; c++) {
            snprintf(name, sizeof name, ",%s_q%s", kr_column_names[c], level);
            add(t, name);
        }
    }
    if (res->prob_close_up) add(t, ",prob_close_up");
    add(t, "\n");
}

char *kd_forecast_csv(const kd_forecast_input *in, const kr_forecast_result *res) {
    const kd_time_form *f = &in->candles.time_form;
    const size_t p = (size_t)res->horizon, block = (size_t)KR_D_IN * p;
    char ts[KD_TIMESTAMP_MAX];
    text t = {0};
    add_header(&t, res);
    for (size_t i = 0; i < p; i++) {
        if (f->unix_seconds)
            snprintf(ts, sizeof ts, "%lld", (long long)res->timestamps[i]);
        else
            kd_format_timestamp(res->timestamps[i], f->tz_offset_min, f->has_tz, ts, sizeof ts);
        add(&t, ts);
        for (int c = 0; c < KR_D_IN; c++)
            add_value(&t, res->mean[(size_t)c * p + i]);
        for (int q = 0; res->quantiles && q < res->n_quantiles; q++)
            for (int c = 0; c < KR_D_IN; c++)
                add_value(&t, res->quantiles[(size_t)q * block + (size_t)c * p + i]);
        if (res->prob_close_up) add_value(&t, res->prob_close_up[i]);
        add(&t, "\n");
    }
    return kd_strbuf_take(&t);
}
