/* timefmt.h — timestamps of requests and responses.
 *
 * Kronos takes its time features from the clock fields as written (upstream uses naive
 * pandas timestamps), so a timestamp is carried as `wall`: seconds since
 * 1970-01-01T00:00:00 of the written fields, with no zone conversion. A zone offset, when
 * the input had one, is only remembered so that output can be written in the same form.
 * Everything here is integer civil-date arithmetic: no timegm, TZ or locale.
 */
#ifndef KD_TIMEFMT_H
#define KD_TIMEFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Walls from 0000-01-01T00:00:00 to 9999-12-31T23:59:59: what four-digit years can write. */
#define KD_WALL_MIN (-62167219200LL)
#define KD_WALL_MAX (253402300799LL)

/* Room for the longest formatted timestamp, "YYYY-MM-DDTHH:MM:SS+HH:MM", and its NUL. */
#define KD_TIMESTAMP_MAX 32

/* How a timestamp was written, so that output can be written the same way. */
typedef struct {
    bool unix_seconds; /* a JSON number: write numbers */
    bool has_tz;       /* a string with a zone: write strings with this offset */
    int tz_offset_min;
} kd_time_form;

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t kd_days_from_civil(int64_t y, int m, int d);
void kd_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

/* Parses ISO 8601 `YYYY-MM-DD`, or `YYYY-MM-DD(T| )HH:MM[:SS[(.|,)fraction]]` with an
 * optional zone `Z`, `±HH:MM`, `±HHMM` or `±HH`. Fractions of a second are truncated.
 * tz_offset_min and has_tz may be NULL. Returns 0, or -1 with a reason in err. */
int kd_parse_timestamp(const char *s, int64_t *wall, int *tz_offset_min, bool *has_tz, char *err,
                       size_t errlen);

/* Unix seconds (UTC, a JSON number) as a wall: truncated toward zero, finite, in range.
 * Returns 0, or -1 with a reason in err. */
int kd_wall_from_unix(double secs, int64_t *wall, char *err, size_t errlen);

/* `2024-06-18T11:15:00`, then `Z` or `+08:00` when has_tz. n >= KD_TIMESTAMP_MAX always
 * suffices; a shorter buffer gets a truncated, NUL-terminated string. */
void kd_format_timestamp(int64_t wall, int tz_offset_min, bool has_tz, char *out, size_t n);

#endif
