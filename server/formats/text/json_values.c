/* json_values.c — the values an answer is built of (json_values.h). */
#include "json_values.h"

#include <math.h>

json_t *kd_json_real(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

/* The array of item(x, 0) .. item(x, n - 1); NULL when out of memory. */
static json_t *array_of(const void *x, int n, json_t *(*item)(const void *x, int i)) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, item(x, i)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *real_at(const void *x, int i) {
    return kd_json_real(((const double *)x)[i]);
}

static json_t *int_at(const void *x, int i) {
    return json_integer(((const int *)x)[i]);
}

json_t *kd_json_reals(const double *x, int n) {
    return array_of(x, n, real_at);
}

json_t *kd_json_ints(const int *x, int n) {
    return array_of(x, n, int_at);
}

int kd_json_put(json_t *o, const char *key, json_t *v) {
    return o && v && json_object_set_new(o, key, v) == 0 ? 0 : (json_decref(v), -1);
}
