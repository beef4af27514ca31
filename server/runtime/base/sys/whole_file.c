/* whole_file.c — reading a file or a stream whole (whole_file.h). */
#include "whole_file.h"

#include <errno.h>
#include <stdlib.h>

char *kd_read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap), *grown;
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        buf = (grown = realloc(buf, cap *= 2)) ? grown : (free(buf), NULL);
    }
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    if (ferror(f)) { /* e.g. EISDIR: fread left errno */
        const int e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *kd_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = kd_read_stream(f, len);
    const int e = errno;
    fclose(f);
    errno = e;
    return buf;
}
