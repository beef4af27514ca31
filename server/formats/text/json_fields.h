/* json_fields.h — reading request fields with messages that name them.
 *
 * Every request parser (forecast, generate, tokenize, detokenize) reports a bad field the
 * same way: "<path>: must be <rule>, got <what was there>". The helpers return 0, or -1
 * with such a message in err. A JSON null counts as an absent field.
 */
#ifndef KD_JSON_FIELDS_H
#define KD_JSON_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fail.h"
#include "timefmt.h"

#define KD_PATH_LEN  64 /* "candles[123456].timestamp", "future_timestamps[12345]" */
#define KD_DESC_LEN  96 /* a described JSON value: `the string "..."` */
#define KD_QUOTE_MAX 40 /* bytes of a client's string repeated in a message */

/* Replaces each byte of s that is not part of valid UTF-8 with '?', in place (jansson
 * refuses such strings). */
void kd_utf8_clean(char *s);
/* A client's string made safe for a one-line message (at most KD_QUOTE_MAX bytes). */
void kd_quote(const char *s, char *out, size_t n);
/* What a JSON value is, for "got ...": `the string "NaN"`, `1.5`, `null`, `an array`. A
 * real is written as one (`1000.0` for 1e3), so that an integer field's refusal of a real
 * shows why. */
const char *kd_describe(const json_t *v, char *buf, size_t n);
/* "<path>: must be <rule>, got <v>"; returns -1. */
int kd_wrong(const json_t *v, const char *path, const char *rule, char *err, size_t errlen);

/* A field of an object; NULL when absent or null. */
const json_t *kd_field(const json_t *obj, const char *key);

/* A finite JSON number, integer or real. */
int kd_get_number(const json_t *v, const char *path, double *out, char *err, size_t errlen);
/* A JSON integer in [lo, hi]. */
int kd_get_int(const json_t *v, const char *path, long long lo, long long hi, const char *rule,
               long long *out, char *err, size_t errlen);
/* Optional fields of body; *out is left alone when absent. */
int kd_opt_int(const json_t *body, const char *key, long long lo, long long hi, const char *rule,
               long long *out, char *err, size_t errlen);
int kd_opt_real(const json_t *body, const char *key, bool (*ok)(double), const char *rule,
                double *out, char *err, size_t errlen);
int kd_opt_bool(const json_t *body, const char *key, bool *out, char *err, size_t errlen);

/* Any finite number: the value's rules are the core's (the server checks types). */
bool kd_any_number(double x);

/* An ISO 8601 string or Unix seconds as a wall (timefmt.h); *form (may be NULL) says how
 * it was written. */
int kd_get_timestamp(const json_t *v, const char *path, int64_t *wall, kd_time_form *form,
                     char *err, size_t errlen);

/* Strict requests: every field of obj must be in `known` (NULL-terminated). An unknown one
 * is an error naming it, "<where>unknown field "pred_len"; kronosd calls it "horizon""
 * for a name from upstream Kronos or a close relative, else listing the known fields. */
int kd_check_fields(const json_t *obj, const char *where, const char *const known[], char *err,
                    size_t errlen);
/* The same message for one unknown name (a query parameter, a CSV column); `what` is
 * "field", "query parameter" or "column". Returns -1. */
int kd_unknown_name(const char *name, const char *what, const char *where,
                    const char *const known[], char *err, size_t errlen);

/* The zone offset in minutes a timestamp was written with: 0 for naive walls and Unix
 * seconds (read as UTC when mixed with zoned timestamps). */
int kd_form_offset(const kd_time_form *f);

/* Timestamps written with different offsets are compared as instants: walls[i] (written at
 * offsets[i]) is rewritten as the wall clock of target_offset (the offset of the last
 * timestamp, the one responses are written in), so that one series has one clock. Then
 * they must strictly increase, the first after *after when given. path_fmt names entry i
 * (one %zu). 0, or -1 with a message. */
int kd_align_timestamps(int64_t *walls, const int *offsets, size_t n, int target_offset,
                        const int64_t *after, const char *path_fmt, char *err, size_t errlen);
/* The same with entry i named by name(ctx, i, out, n) (a CSV line and column). */
typedef void (*kd_entry_name)(const void *ctx, size_t i, char *out, size_t n);
int kd_align_timestamps_named(int64_t *walls, const int *offsets, size_t n, int target_offset,
                              const int64_t *after, kd_entry_name name, const void *ctx, char *err,
                              size_t errlen);

/* s is a number as JSON writes one: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. The one
 * number syntax of every way in (JSON bodies, CSV cells, query parameters). */
bool kd_is_json_number(const char *s);

/* "a control byte (0x00) is not allowed": the reason every way in gives for a NUL or other
 * control byte c in a value. */
void kd_control_byte_reason(unsigned char c, char *out, size_t n);

#endif
