/* json_body.c — a request body as jansson values, its candles left as text (json_body.h). */
#include "json_body.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_reader.h"

/* The stand-in's keys: a NUL first, which no parsed key can hold. */
static const char key_text[] = "\0kd-text", key_len[] = "\0kd-len";

static json_t *stand_in(const char *text, size_t len) {
    json_t *o = json_object();
    if (!o ||
        json_object_setn_new(o, key_text, sizeof key_text - 1,
                             json_integer((json_int_t)(intptr_t)text)) < 0 ||
        json_object_setn_new(o, key_len, sizeof key_len - 1, json_integer((json_int_t)len)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool kd_body_text_of(const json_t *v, const char **text, size_t *len) {
    if (!json_is_object(v) || json_object_size(v) != 2) return false;
    const json_t *t = json_object_getn(v, key_text, sizeof key_text - 1),
                 *n = json_object_getn(v, key_len, sizeof key_len - 1);
    if (!json_is_integer(t) || !json_is_integer(n)) return false;
    *text = (const char *)(intptr_t)json_integer_value(t);
    *len = (size_t)json_integer_value(n);
    return true;
}

json_t *kd_body_shallow(const char *text, size_t len) {
    kd_jreader r;
    char num[72];
    kd_jr_init(&r, text, len);
    switch (len ? text[0] : 0) {
    case '{':
        return json_object();
    case '[':
        return json_array();
    case 't':
        return json_true();
    case 'f':
        return json_false();
    case 'n':
        return json_null();
    case '"': {
        char *s = malloc(len); /* decoded, a string is no longer than its text */
        size_t n = 0;
        json_t *v = s && kd_jr_string(&r, s, len, &n) == 0 && n < len ? json_stringn(s, n) : NULL;
        free(s);
        return v;
    }
    default: /* a number the reader took, so it fits as jansson reads it */
        if (len >= sizeof num) return json_loadb(text, len, JSON_DECODE_ANY, NULL);
        memcpy(num, text, len);
        num[len] = '\0';
        return strpbrk(num, ".eE") ? json_real(strtod(num, NULL))
                                   : json_integer((json_int_t)strtoll(num, NULL, 10));
    }
}

/* The next value's text, checked by the reader. */
static int value_span(kd_jreader *r, const char **s, size_t *n) {
    kd_jr_peek(r);
    const size_t start = r->pos;
    if (kd_jr_skip(r) < 0) return -1;
    *s = r->s + start;
    *n = r->pos - start;
    return 0;
}

/* The next value: a stand-in when `lean` and it is a container, else jansson's tree. */
static json_t *value(kd_jreader *r, bool lean) {
    const int c = kd_jr_peek(r);
    const char *s;
    size_t n;
    if (value_span(r, &s, &n) < 0) return NULL;
    if (lean && (c == '{' || c == '[')) return stand_in(s, n);
    return json_loadb(s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
}

typedef json_t *(*member_fn)(kd_jreader *r, const char *key);

static json_t *container(kd_jreader *r, char open, member_fn fn);

/* A member of object o, its value from fn; -1 for a duplicate key (jansson says so), text
 * the reader does not take, or no memory. */
static int member(kd_jreader *r, json_t *o, member_fn fn) {
    char *k = kd_jr_key(r);
    json_t *v = k && !json_object_get(o, k) ? fn(r, k) : NULL;
    const int rc = v ? json_object_set_new(o, k, v) : -1;
    free(k);
    return rc;
}

static json_t *element_member(kd_jreader *r, const char *k) {
    return value(r, !strcmp(k, "candles"));
}

/* An element of "series": [{"candles": ..., ...}, ...], each element's candles as text. */
static int element(kd_jreader *r, json_t *a) {
    json_t *e = kd_jr_peek(r) == '{' ? container(r, '{', element_member) : value(r, false);
    return json_array_append_new(a, e);
}

/* The object ('{': its members' values from fn) or the "series" array ('[') that opens at
 * r; NULL when a member or element fails, or the text does not close. */
static json_t *container(kd_jreader *r, char open, member_fn fn) {
    const bool is_object = open == '{';
    json_t *c = is_object ? json_object() : json_array();
    bool first = true;
    int more;
    if (!c || kd_jr_open(r, open) < 0) {
        json_decref(c);
        return NULL;
    }
    while ((more = kd_jr_more(r, is_object ? '}' : ']', &first)) == 1)
        if ((is_object ? member(r, c, fn) : element(r, c)) < 0) break;
    if (more != 0) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static json_t *top_member(kd_jreader *r, const char *k) {
    if (!strcmp(k, "series") && kd_jr_peek(r) == '[') return container(r, '[', NULL);
    return value(r, !strcmp(k, "candles"));
}

json_t *kd_body_parse(const char *text, size_t len, json_error_t *je) {
    kd_jreader r;
    kd_jr_init(&r, text, len);
    if (kd_jr_peek(&r) == '{') {
        json_t *body = container(&r, '{', top_member);
        if (body && kd_jr_at_end(&r)) return body;
        json_decref(body);
    }
    return json_loadb(text, len, JSON_REJECT_DUPLICATES, je);
}
