/* json_values.h — the values an answer is built of: reals that may be missing, arrays of
 * reals and integers, and a member put that lets a chain of puts stop at the first failure.
 * Every format's writer builds through these, so a non-finite number reads null everywhere. */
#ifndef KD_JSON_VALUES_H
#define KD_JSON_VALUES_H

#include <jansson.h>

/* x, or null when it is not finite (json_real refuses NaN and infinities; null says "no
 * value" without failing the reply). */
json_t *kd_json_real(double x);
/* n reals (kd_json_real each) or n integers; NULL when out of memory. */
json_t *kd_json_reals(const double *x, int n);
json_t *kd_json_ints(const int *x, int n);
/* o[key] = v; -1 (v released) when either is missing. */
int kd_json_put(json_t *o, const char *key, json_t *v);

#endif
