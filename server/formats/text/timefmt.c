/* timefmt.c — ISO 8601 / Unix-seconds timestamps as wall-clock seconds. */
#include "timefmt.h"
#include "fail.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SECS_PER_DAY 86400

/* Howard Hinnant's days_from_civil: exact for every proleptic Gregorian date. */
int64_t kd_days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;                                   /* [0, 399] */
    const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

void kd_civil_from_days(int64_t days, int64_t *y, int *m, int *d) {
    days += 719468;
    const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const int64_t doe = days - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Reads exactly n decimal digits at *p and advances; -1 if any is not a digit. */
static int digits(const char **p, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    return v;
}

/* digits(p, n) followed by the separator sep, which it skips too; -1 otherwise. */
static int digits_then(const char **p, int n, char sep) {
    const int v = digits(p, n);
    if (v < 0 || **p != sep) return -1;
    (*p)++;
    return v;
}

#define FORMAT_HINT "expected YYYY-MM-DD[THH:MM[:SS[.fff]][Z|+HH:MM]]"

/* The zone suffix at p (which is not at the end): Z, ±HH:MM, ±HHMM or ±HH. */
static int parse_zone(const char *p, int *offset_min, char *err, size_t errlen) {
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        *offset_min = 0;
        return 0;
    }
    if (*p != '+' && *p != '-') return kd_fail(err, errlen, FORMAT_HINT);
    const int sign = *p == '-' ? -1 : 1;
    p++;
    const int hh = digits(&p, 2);
    int mm = 0;
    if (hh < 0) return kd_fail(err, errlen, FORMAT_HINT);
    if (*p != '\0') { /* ±HH:MM or ±HHMM; a bare ±HH has no minutes */
        if (*p == ':') p++;
        if ((mm = digits(&p, 2)) < 0 || *p != '\0') return kd_fail(err, errlen, FORMAT_HINT);
    }
    if (hh > 23 || mm > 59)
        return kd_fail(err, errlen, "zone offset %02d:%02d is out of range", hh, mm);
    *offset_min = sign * (hh * 60 + mm);
    return 0;
}

/* The date part `YYYY-MM-DD` at *p, validated; advances *p. */
static int parse_date(const char **p, int64_t *days, char *err, size_t errlen) {
    const int y = digits_then(p, 4, '-');
    const int m = y < 0 ? -1 : digits_then(p, 2, '-');
    const int d = m < 0 ? -1 : digits(p, 2);
    if (d < 0) return kd_fail(err, errlen, FORMAT_HINT);
    if (m < 1 || m > 12) return kd_fail(err, errlen, "month %d is out of range 1-12", m);
    const int dim = days_in_month(y, m);
    if (d < 1 || d > dim)
        return kd_fail(err, errlen, "day %d is out of range 1-%d for %04d-%02d", d, dim, y, m);
    *days = kd_days_from_civil(y, m, d);
    return 0;
}

/* The time part `HH:MM[:SS[.fraction]]` at *p, validated; advances *p. */
static int parse_time(const char **p, int64_t *secs, char *err, size_t errlen) {
    const int hh = digits_then(p, 2, ':');
    const int mi = hh < 0 ? -1 : digits(p, 2);
    int ss = 0;
    if (mi < 0) return kd_fail(err, errlen, FORMAT_HINT);
    if (**p == ':') {
        (*p)++;
        if ((ss = digits(p, 2)) < 0) return kd_fail(err, errlen, FORMAT_HINT);
        if (**p == '.' || **p == ',') {
            (*p)++;
            if (**p < '0' || **p > '9') return kd_fail(err, errlen, FORMAT_HINT);
            while (**p >= '0' && **p <= '9')
                (*p)++; /* truncated: stamps have minutes */
        }
    }
    if (hh > 23) return kd_fail(err, errlen, "hour %d is out of range 0-23", hh);
    if (mi > 59) return kd_fail(err, errlen, "minute %d is out of range 0-59", mi);
    if (ss > 59) return kd_fail(err, errlen, "second %d is out of range 0-59", ss);
    *secs = (int64_t)hh * 3600 + mi * 60 + ss;
    return 0;
}

int kd_parse_timestamp(const char *s, int64_t *wall, int *tz_offset_min, bool *has_tz, char *err,
                       size_t errlen) {
    const char *p = s;
    int64_t days = 0, secs = 0;
    int offset = 0;
    bool zoned = false;

    if (!s) return kd_fail(err, errlen, FORMAT_HINT);
    if (parse_date(&p, &days, err, errlen) < 0) return -1;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (parse_time(&p, &secs, err, errlen) < 0) return -1;
        if (*p != '\0') {
            if (parse_zone(p, &offset, err, errlen) < 0) return -1;
            zoned = true;
        }
    } else if (*p != '\0') {
        return kd_fail(err, errlen, FORMAT_HINT);
    }
    *wall = days * SECS_PER_DAY + secs;
    if (tz_offset_min) *tz_offset_min = offset;
    if (has_tz) *has_tz = zoned;
    return 0;
}

int kd_wall_from_unix(double secs, int64_t *wall, char *err, size_t errlen) {
    if (!isfinite(secs)) return kd_fail(err, errlen, "Unix seconds must be finite");
    const double t = trunc(secs);
    if (t < (double)KD_WALL_MIN || t > (double)KD_WALL_MAX)
        return kd_fail(err, errlen, "Unix seconds %.15g are outside years 0000-9999", secs);
    *wall = (int64_t)t;
    return 0;
}

/* Floor division, so that walls before 1970 land on the right day. */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

void kd_format_timestamp(int64_t wall, int tz_offset_min, bool has_tz, char *out, size_t n) {
    if (!out || n == 0) return;
    const int64_t days = floor_div(wall, SECS_PER_DAY);
    const int64_t sod = wall - days * SECS_PER_DAY;
    int64_t y;
    int m, d;
    kd_civil_from_days(days, &y, &m, &d);

    char zone[8] = "";
    if (has_tz && tz_offset_min == 0) {
        strcpy(zone, "Z");
    } else if (has_tz) {
        const int a = tz_offset_min < 0 ? -tz_offset_min : tz_offset_min;
        snprintf(zone, sizeof zone, "%c%02d:%02d", tz_offset_min < 0 ? '-' : '+', a / 60 % 100,
                 a % 60);
    }
    snprintf(out, n, "%04lld-%02d-%02dT%02d:%02d:%02d%s", (long long)y, m, d, (int)(sod / 3600),
             (int)(sod / 60 % 60), (int)(sod % 60), zone);
}
