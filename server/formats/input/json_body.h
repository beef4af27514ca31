/* json_body.h — a request body as jansson values, with its candles left as text.
 *
 * A request's candles are most of its bytes, and a jansson tree of numbers takes many times
 * their text. kd_body_parse builds the tree of everything else, and for the value of
 * "candles" (at the top, and in each element of "series") when it is an object or an array
 * it puts a stand-in that names that value's text in the body; kd_candles_parse reads the
 * candles from there straight into their columns. Which bodies are accepted, and each
 * message for those that are not, stay jansson's: text the reader (json_reader.h) does not
 * take is handed to jansson whole. A stand-in points into the text, which must outlive
 * every use of the tree; no client's JSON can make one (its keys hold a NUL).
 */
#ifndef KD_JSON_BODY_H
#define KD_JSON_BODY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The body as json_loadb(text, len, JSON_REJECT_DUPLICATES, je) reads it, but with
 * stand-ins for the candles; NULL with je set when it is not JSON. */
json_t *kd_body_parse(const char *text, size_t len, json_error_t *je);

/* True, with the text it names, when v is a stand-in. */
bool kd_body_text_of(const json_t *v, const char **text, size_t *len);

/* The value at text[0..len) (valid JSON, as the reader took it) as a jansson value, but
 * an object or array comes back empty: enough to say what it is in a message without
 * building its tree. NULL when out of memory. */
json_t *kd_body_shallow(const char *text, size_t len);

#endif
