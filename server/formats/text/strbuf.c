/* strbuf.c — the growing text buffer of strbuf.h. */
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

void kd_strbuf_put(kd_strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->failed = true;
            return;
        }
        b->s = t;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void kd_strbuf_puts(kd_strbuf *b, const char *s) {
    kd_strbuf_put(b, s, strlen(s));
}

char *kd_strbuf_take(kd_strbuf *b) {
    kd_strbuf_put(b, "", 0); /* "" rather than NULL for an empty text */
    if (b->failed) {
        free(b->s);
        b->s = NULL;
    }
    char *s = b->s;
    *b = (kd_strbuf){0};
    return s;
}
