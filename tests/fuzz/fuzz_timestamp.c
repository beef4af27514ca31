/* fuzz_timestamp.c — libFuzzer target: timestamps. Whatever parses must format and parse
 * back to the same instant and the same offset. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64) return 0;
    char s[65], err[256], out[KD_TIMESTAMP_MAX];
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t wall, again;
    int tz = 0, tz2 = 0;
    bool has_tz = false, has_tz2 = false;
    if (kd_parse_timestamp(s, &wall, &tz, &has_tz, err, sizeof err) == 0) {
        if (wall < KD_WALL_MIN || wall > KD_WALL_MAX) abort();
        kd_format_timestamp(wall, tz, has_tz, out, sizeof out);
        if (kd_parse_timestamp(out, &again, &tz2, &has_tz2, err, sizeof err) != 0) abort();
        if (again != wall || tz2 != tz || has_tz2 != has_tz) abort();
    }
    if (size == sizeof(double)) { /* the same bytes as Unix seconds */
        double secs;
        memcpy(&secs, data, sizeof secs);
        if (kd_wall_from_unix(secs, &wall, err, sizeof err) == 0 &&
            (wall < KD_WALL_MIN || wall > KD_WALL_MAX))
            abort();
    }
    return 0;
}
