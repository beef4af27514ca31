/* strbuf.h — a growing, NUL-terminated text buffer for the writers of response bodies (JSON,
 * CSV): appends never fail one by one; an out-of-memory is remembered and reported once, at
 * the end (kd_strbuf_take). */
#ifndef KD_STRBUF_H
#define KD_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *s;
    size_t len, cap;
    bool failed; /* an append ran out of memory: the text is incomplete */
} kd_strbuf;

/* Appends n bytes of s (a no-op once an append has failed). */
void kd_strbuf_put(kd_strbuf *b, const char *s, size_t n);
/* Appends the string s. */
void kd_strbuf_puts(kd_strbuf *b, const char *s);
/* The text (malloc'd, the caller's; "" when nothing was added), or NULL, with the buffer
 * freed, when an append failed. */
char *kd_strbuf_take(kd_strbuf *b);

#endif
