/* candles_csv.h — candles in, forecast rows out, as CSV (what pandas reads and writes).
 *
 * In: a header row naming `timestamps` (or `timestamp` or `date`) and the candle columns,
 * in any order and any case: open, high, low, close, and optionally volume and amount. A
 * first column with an empty name (or pandas's "Unnamed: 0") is an index and is skipped.
 * Fields may be quoted (RFC 4180); lines end in LF or CRLF. A timestamp is ISO 8601 (the
 * space pandas writes is fine) or Unix seconds. The rules are the JSON body's, read by the
 * same functions: numbers in JSON's syntax, within float32 (kr_candle_value_check),
 * timestamps compared as instants on the last row's clock (kd_align_timestamps), a NUL or
 * other control byte refused. The result is the same kd_owned_candles the JSON parser makes, and
 * bad input gets the JSON message's reason after "CSV line L, column C (name): ".
 *
 * Out: one row per forecast step: timestamps, the mean's six columns, then per quantile
 * level the six columns again (`close_q0.1`), then `prob_close_up` when there is one.
 */
#ifndef KD_CANDLES_CSV_H
#define KD_CANDLES_CSV_H

#include <stddef.h>

#include "forecast_json.h"

/* Parses text[len] with between min_count and max_count (<= 0: no limit) candles. 0, or
 * -1 with "CSV line 12, column 3 (close): ..." in err; *out holds nothing on failure. */
int kd_candles_csv_parse(const char *text, size_t len, int min_count, int max_count,
                         kd_owned_candles *out, char *err, size_t errlen);

/* The forecast as CSV text (malloc'd), or NULL when out of memory. */
char *kd_forecast_csv(const kd_forecast_input *in, const kr_forecast_result *res);

#endif
