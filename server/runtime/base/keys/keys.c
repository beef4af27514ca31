/* keys.c — the key file's parser (keys.h's rules) and the constant-time match. */
#include "keys.h"

#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX (16u << 20) /* bytes of a key file: KD_KEYS_MAX long lines and comments */

static const char name_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

/* FNV-1a: the bare key's owner, so that the owner does not repeat the key. */
static bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}

/* [*s, *e) without the whitespace around it. */
static void trim(const char **s, const char **e) {
    while (*s < *e && blank(**s))
        (*s)++;
    while (*e > *s && blank((*e)[-1]))
        (*e)--;
}

void kd_keys_free(kd_keys *k) {
    if (!k) return;
    for (int i = 0; i < k->n; i++) {
        if (k->keys[i].secret) explicit_bzero(k->keys[i].secret, k->keys[i].len);
        free(k->keys[i].secret);
    }
    free(k->keys);
    free(k);
}

/* One entry line [s, e), trimmed, of line number `line`: added to k, or -1 after err. */
static int add_line(kd_keys *k, const char *s, const char *e, int line, const char *where,
                    char *err, size_t errlen) {
    const char *colon = memchr(s, ':', (size_t)(e - s));
    const char *ns = s, *ne = colon ? colon : s, *ks = colon ? colon + 1 : s, *ke = e;
    trim(&ns, &ne);
    trim(&ks, &ke);
    const size_t nn = (size_t)(ne - ns), kn = (size_t)(ke - ks);
    if (colon && nn == 0) {
        snprintf(err, errlen, "%s line %d: no name before ':' (each line is NAME:KEY)", where,
                 line);
        return -1;
    }
    if (colon && (nn > KD_KEY_NAME_MAX || strspn(ns, name_chars) < nn)) {
        snprintf(err, errlen, "%s line %d: the name \"%.*s\" is not 1 to %d of A-Z a-z 0-9 _ . -",
                 where, line, nn > 64 ? 64 : (int)nn, ns, KD_KEY_NAME_MAX);
        return -1;
    }
    if (kn == 0) {
        snprintf(err, errlen, "%s line %d: no key after \"%.*s:\" (each line is NAME:KEY)", where,
                 line, (int)nn, ns);
        return -1;
    }
    if (kn > KD_KEY_MAX) {
        snprintf(err, errlen,
                 "%s line %d: the key is %zu bytes, longer than the %d a key may have (it is "
                 "refused, not cut)",
                 where, line, kn, KD_KEY_MAX);
        return -1;
    }
    for (size_t i = 0; i < kn; i++)
        if ((unsigned char)ks[i] < 0x20 || ks[i] == 0x7f) {
            snprintf(err, errlen, "%s line %d: the key holds a control character (byte %zu)", where,
                     line, i + 1);
            return -1;
        }
    if (k->n >= KD_KEYS_MAX) {
        snprintf(err, errlen, "%s line %d: more than %d keys", where, line, KD_KEYS_MAX);
        return -1;
    }
    kd_key *key = &k->keys[k->n];
    memset(key, 0, sizeof *key);
    key->slot = -1;
    key->line = line;
    key->len = kn;
    snprintf(key->name, sizeof key->name, "%.*s", colon ? (int)nn : 7, colon ? ns : "default");
    if (!(key->secret = malloc(kn + 1))) {
        snprintf(err, errlen, "%s line %d: out of memory", where, line);
        return -1;
    }
    memcpy(key->secret, ks, kn);
    key->secret[kn] = '\0';
    k->n++;
    for (int i = 0; i < k->n - 1; i++) {
        const kd_key *o = &k->keys[i];
        if (strcmp(o->name, key->name) == 0) {
            snprintf(err, errlen, "%s line %d: the name %s is on line %d already", where, line,
                     key->name, o->line);
            return -1;
        }
        if (o->len == kn && memcmp(o->secret, key->secret, kn) == 0) {
            snprintf(err, errlen, "%s line %d: the key of %s is %s's (line %d) already", where,
                     line, key->name, o->name, o->line);
            return -1;
        }
    }
    return 0;
}

kd_keys *kd_keys_parse(const char *text, size_t len, const char *where, char *err, size_t errlen) {
    kd_keys *k = calloc(1, sizeof *k);
    int lines = 0, entries = 0, bare_line = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (k)
        k->keys =
            calloc((size_t)(lines + 1 < KD_KEYS_MAX ? lines + 1 : KD_KEYS_MAX), sizeof *k->keys);
    if (!k || !k->keys) {
        snprintf(err, errlen, "%s: out of memory", where);
        kd_keys_free(k);
        return NULL;
    }
    if (memchr(text, '\0', len)) {
        snprintf(err, errlen, "%s: holds a NUL byte; a key file is text, NAME:KEY a line", where);
        kd_keys_free(k);
        return NULL;
    }
    const char *p = text, *end = text + len;
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *s = p, *e = nl ? nl : end;
        p = nl ? nl + 1 : end;
        trim(&s, &e);
        if (s == e || *s == '#') continue;
        entries++;
        if (!memchr(s, ':', (size_t)(e - s)) && !bare_line) bare_line = line;
        if (bare_line && entries > 1) {
            snprintf(err, errlen,
                     "%s line %d: a key without a name; with more than one key each line is "
                     "NAME:KEY",
                     where, bare_line);
            kd_keys_free(k);
            return NULL;
        }
        if (add_line(k, s, e, line, where, err, errlen) < 0) {
            kd_keys_free(k);
            return NULL;
        }
    }
    if (entries == 0) {
        snprintf(err, errlen, "%s: %s; write one NAME:KEY a line", where,
                 len == 0 ? "empty" : "no key in it, only comments and blank lines");
        kd_keys_free(k);
        return NULL;
    }
    k->bare = bare_line != 0;
    for (int i = 0; i < k->n; i++) {
        kd_key *key = &k->keys[i];
        if (k->bare)
            snprintf(key->owner, sizeof key->owner, "key %016llx",
                     (unsigned long long)kd_hash(KD_HASH_SEED, key->secret, key->len));
        else
            snprintf(key->owner, sizeof key->owner, "key %s", key->name);
    }
    return k;
}

kd_keys *kd_keys_read(const char *what, const char *path, char *err, size_t errlen) {
    char where[512];
    snprintf(where, sizeof where, "%s %s", what, path);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s: %s", where, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode) || (size_t)st.st_size > FILE_MAX) {
        snprintf(err, errlen, "%s: %s", where,
                 S_ISDIR(st.st_mode)    ? "is a directory, not a key file"
                 : !S_ISREG(st.st_mode) ? "is not a regular file"
                                        : "larger than a key file may be (16 MiB)");
        close(fd);
        return NULL;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t len = 0;
    ssize_t got = 0;
    while (text && len < (size_t)st.st_size &&
           (got = read(fd, text + len, (size_t)st.st_size - len)) > 0)
        len += (size_t)got;
    const int read_errno = errno;
    close(fd);
    if (!text || got < 0) {
        snprintf(err, errlen, "%s: %s", where, text ? strerror(read_errno) : "out of memory");
        free(text);
        return NULL;
    }
    kd_keys *k = kd_keys_parse(text, len, where, err, errlen);
    /* the secrets were copied out: wipe this copy before handing the memory back */
    explicit_bzero(text, len);
    free(text);
    return k;
}

const kd_key *kd_keys_match(const kd_keys *k, const char *token, size_t len) {
    const kd_key *found = NULL;
    for (int i = 0; i < k->n; i++) {
        const kd_key *key = &k->keys[i];
        unsigned char diff = len != key->len;
        for (size_t j = 0; j < key->len; j++)
            diff |= (unsigned char)key->secret[j] ^ (unsigned char)(j < len ? token[j] : 0);
        /* no early exit: every key is compared whether or not one matched */
        if (diff == 0) found = key;
    }
    return found;
}

const kd_key *kd_keys_find(const kd_keys *k, const char *name) {
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->keys[i].name, name) == 0) return &k->keys[i];
    return NULL;
}
