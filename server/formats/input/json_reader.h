/* json_reader.h — a strict JSON reader over a buffer, one token at a time, that builds no
 * tree: what lets a request's candles go straight into their columns.
 *
 * It accepts no more than jansson does with the daemon's flags (RFC 8259, UTF-8, no
 * "\u0000", integers that fit a long long, reals that do not overflow, no duplicate keys)
 * and may refuse a little more (deep nesting, keys with escapes or many keys in one object
 * where duplicates are checked): a caller that gets -1 hands the text to jansson, which
 * then gives the answer and its message. Every function skips whitespace first and returns
 * -1 on text it does not take, leaving the position undefined.
 */
#ifndef KD_JSON_READER_H
#define KD_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *s;
    size_t len, pos;
    int depth; /* containers open */
} kd_jreader;

void kd_jr_init(kd_jreader *r, const char *s, size_t len);
/* The next byte after whitespace, not taken; -1 at the end. */
int kd_jr_peek(kd_jreader *r);
/* Takes byte c if it comes next: true, else false (nothing taken). */
bool kd_jr_take(kd_jreader *r, char c);
/* True when only whitespace is left. */
bool kd_jr_at_end(kd_jreader *r);

/* Skips one value, checked as above (duplicate keys included). */
int kd_jr_skip(kd_jreader *r);
/* A string token decoded into buf (NUL-terminated, cut at cap - 1 bytes); *len is its
 * whole decoded length, so len >= cap says it was cut. */
int kd_jr_string(kd_jreader *r, char *buf, size_t cap, size_t *len);
/* An object's key, decoded and malloc'd (the caller frees it), and the ':' after it; NULL
 * when it is not one or out of memory. */
char *kd_jr_key(kd_jreader *r);
/* A number token as jansson's json_number_value gives it; *is_int says it was written as
 * an integer (no fraction or exponent). */
int kd_jr_number(kd_jreader *r, double *x, bool *is_int);

/* Takes the opening '{' or '[' of a container. */
int kd_jr_open(kd_jreader *r, char open);
/* Within a container opened by kd_jr_open: 1 when another member or element follows
 * (its ',' taken; in an object the caller then reads the key and kd_jr_take(':')), 0 when
 * `close` ended it (taken), -1 otherwise. *first starts true and is kept by this. */
int kd_jr_more(kd_jreader *r, char close, bool *first);

#endif
