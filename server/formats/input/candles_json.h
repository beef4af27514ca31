/* candles_json.h — a request's candles (CANDLES in forecast_json.h) as JSON, into columns.
 *
 * CANDLES is columnar, {"timestamps": [...], "open": [...], ...}, or a list of rows,
 * [{"timestamp": t, "open": o, ...}, ...]. It comes either as a jansson value or, from a
 * request body, as a stand-in for its text (json_body.h), which is read straight into the
 * columns without a tree; both give the same candles and the same messages.
 */
#ifndef KD_CANDLES_JSON_H
#define KD_CANDLES_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "timefmt.h"

/* Parsed candles. They own their arrays. */
typedef struct {
    int n;
    int64_t *timestamps;      /* [n] walls on the last one's clock, strictly increasing */
    double *columns[KR_D_IN]; /* [n]; volume and amount may be NULL */
    kd_time_form time_form;   /* how the last timestamp was written */
} kd_owned_candles;

/* Parses CANDLES, the value of a "candles" field (v may be NULL: "candles: missing"), with
 * between min_count and max_count (<= 0: no limit) candles; v may be a stand-in. On failure *out
 * holds nothing; kd_candles_free is safe either way. */
int kd_candles_parse(const json_t *v, int min_count, int max_count, kd_owned_candles *out,
                     char *err, size_t errlen);
void kd_candles_free(kd_owned_candles *c);
/* Points the core's candles (n, timestamps, columns) at these. */
void kd_candles_link(const kd_owned_candles *c, kr_candles *out);

#endif
