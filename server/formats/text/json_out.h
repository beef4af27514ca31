/* json_out.h — writing responses: jansson values, reals in their shortest exact form.
 *
 * jansson prints a real with a fixed number of digits; a response's reals are float32
 * values, so kronosd writes each as the shortest decimal that reads back to the same
 * float32 (numfmt.h). Every front end (HTTP replies, `kronosd forecast`) writes through
 * here, so they print the same bytes.
 */
#ifndef KD_JSON_OUT_H
#define KD_JSON_OUT_H

#include <jansson.h>

/* v as JSON text (malloc'd, no trailing newline), or NULL when out of memory. indent 0 is
 * one line; otherwise that many spaces a level. Keys keep their insertion order. */
char *kd_json_dumps(const json_t *v, int indent);

#endif
