/* query_params.h — request fields given as query parameters (`?horizon=24&quantiles=0.1,0.9`).
 *
 * A CSV body carries only candles, so the other fields of a request come in the query.
 * Each parameter becomes the JSON value the field would have in a JSON body, and the
 * request's JSON parser checks it with the same rules and messages: `24` is the integer
 * 24, `0.8` a real, `true` a boolean, anything else a string (so `horizon=abc` gets
 * "horizon: must be an integer >= 1, got the string "abc""). `quantiles` and
 * `future_timestamps` are comma-separated lists.
 */
#ifndef KD_QUERY_PARAMS_H
#define KD_QUERY_PARAMS_H

#include <jansson.h>
#include <stddef.h>

/* A NUL or other control byte in a parameter's name or value (key_len, value_len: the
 * decoded lengths) is an error, as in a JSON string or a CSV cell. */
int kd_query_check_bytes(const char *key, size_t key_len, const char *value, size_t value_len,
                         char *err, size_t errlen);

/* Adds key=value (value NULL for a bare `?key`) to the object opts. An unknown key (not in
 * `known`, NULL-terminated) or a key given twice is an error naming it. */
int kd_query_option(json_t *opts, const char *key, const char *value, const char *const known[],
                    char *err, size_t errlen);

#endif
