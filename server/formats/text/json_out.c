/* json_out.c — a JSON writer like json_dumps, with shortest float32 reals; the values an
 * answer is built of (json_out.h). */
#include "json_out.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "strbuf.h"

typedef struct {
    kd_strbuf text;
    int indent;
} buf;

static void put(buf *b, const char *s, size_t n) {
    kd_strbuf_put(&b->text, s, n);
}

static void puts_(buf *b, const char *s) {
    put(b, s, strlen(s));
}

static void newline(buf *b, int depth) {
    if (!b->indent) return;
    put(b, "\n", 1);
    for (int i = 0; i < depth * b->indent; i++)
        put(b, " ", 1);
}

/* UTF-8 passes through (jansson has validated it); quotes, backslashes and control
 * characters are escaped. */
static void string(buf *b, const char *s, size_t n) {
    put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f) continue;
        char esc[8];
        put(b, s + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else
            snprintf(esc, sizeof esc, "\\u%04x", c);
        puts_(b, esc);
    }
    put(b, s + run, n - run);
    put(b, "\"", 1);
}

static void value(buf *b, const json_t *v, int depth) {
    char num[KD_NUM_MAX];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *x;
        bool first = true;
        put(b, "{", 1);
        json_object_foreach((json_t *)v, key, x) {
            if (!first) put(b, ",", 1);
            first = false;
            newline(b, depth + 1);
            string(b, key, strlen(key));
            puts_(b, b->indent ? ": " : ":");
            value(b, x, depth + 1);
        }
        if (!first) newline(b, depth);
        put(b, "}", 1);
        return;
    }
    case JSON_ARRAY: {
        put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) put(b, ",", 1);
            newline(b, depth + 1);
            value(b, json_array_get(v, i), depth + 1);
        }
        if (json_array_size(v)) newline(b, depth);
        put(b, "]", 1);
        return;
    }
    case JSON_STRING:
        string(b, json_string_value(v), json_string_length(v));
        return;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        puts_(b, num);
        return;
    case JSON_REAL: {
        const double x = json_real_value(v);
        if (!isfinite(x)) { /* json_real refuses these; null if one gets here anyway */
            puts_(b, "null");
            return;
        }
        kd_fmt_float32(x, num, sizeof num);
        puts_(b, num);
        return;
    }
    case JSON_TRUE:
        puts_(b, "true");
        return;
    case JSON_FALSE:
        puts_(b, "false");
        return;
    case JSON_NULL:
        puts_(b, "null");
        return;
    }
}

char *kd_json_dumps(const json_t *v, int indent) {
    buf b = {.indent = indent};
    if (!v) return NULL;
    value(&b, v, 0);
    return kd_strbuf_take(&b.text);
}

/* ---- the values an answer is built of ---- */

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
