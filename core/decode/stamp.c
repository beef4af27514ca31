/* stamp.c — calendar features from wall-clock seconds, with no time-zone library. */
#include "kronos.h"

/* Howard Hinnant's civil_from_days: days since 1970-01-01 -> y, m, d (proleptic Gregorian). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

kr_stamp kr_stamp_from_wall(int64_t wall) {
    int64_t days = wall >= 0 ? wall / 86400 : -((-wall + 86399) / 86400);
    int64_t secs = wall - days * 86400;
    kr_stamp s;
    int64_t y;
    civil_from_days(days, &y, &s.month, &s.day);
    s.hour = (int)(secs / 3600);
    s.minute = (int)(secs % 3600 / 60);
    /* 1970-01-01 was a Thursday (Monday = 0 makes it 3) */
    int64_t wd = (days + 3) % 7;
    s.weekday = (int)(wd < 0 ? wd + 7 : wd);
    return s;
}

int kr_stamp_check(const kr_stamp *s, kr_error *err) {
    if (s->minute < 0 || s->minute > 59)
        return kr_fail(err, "minute %d is outside 0-59", s->minute);
    if (s->hour < 0 || s->hour > 23) return kr_fail(err, "hour %d is outside 0-23", s->hour);
    if (s->weekday < 0 || s->weekday > 6)
        return kr_fail(err, "weekday %d is outside 0-6", s->weekday);
    if (s->day < 1 || s->day > 31) return kr_fail(err, "day %d is outside 1-31", s->day);
    if (s->month < 1 || s->month > 12) return kr_fail(err, "month %d is outside 1-12", s->month);
    return 0;
}
