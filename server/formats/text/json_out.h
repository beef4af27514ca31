/* json_out.h — writing responses: the values an answer is built of, and its text with reals
 * in their shortest exact form.
 *
 * jansson prints a real with a fixed number of digits; a response's reals are float32
 * values, so kronosd writes each as the shortest decimal that reads back to the same
 * float32 (numfmt.h). Every front end (HTTP replies, `kronosd forecast`) writes through
 * here, so they print the same bytes. Every format's writer builds its values through the
 * helpers below, so a non-finite number reads null everywhere.
 */
#ifndef KD_JSON_OUT_H
#define KD_JSON_OUT_H

#include <jansson.h>

/* v as JSON text (malloc'd, no trailing newline), or NULL when out of memory. indent 0 is
 * one line; otherwise that many spaces a level. Keys keep their insertion order. */
char *kd_json_dumps(const json_t *v, int indent);

/* x, or null when it is not finite (json_real refuses NaN and infinities; null says "no
 * value" without failing the reply). */
json_t *kd_json_real(double x);
/* n reals (kd_json_real each) or n integers; NULL when out of memory. */
json_t *kd_json_reals(const double *x, int n);
json_t *kd_json_ints(const int *x, int n);
/* o[key] = v; -1 (v released) when either is missing. */
int kd_json_put(json_t *o, const char *key, json_t *v);

#endif
