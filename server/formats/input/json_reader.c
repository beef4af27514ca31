/* json_reader.c — a strict JSON reader over a buffer (json_reader.h). */
#include "json_reader.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Below jansson's own limit: deeper text goes to jansson, which decides. */
#define MAX_DEPTH 64
/* Keys compared for duplicates in one object; an object with more goes to jansson. */
#define MAX_KEYS 64
/* The longest number token read here (a longer one goes to jansson). */
#define MAX_NUMBER 64

void kd_jr_init(kd_jreader *r, const char *s, size_t len) {
    r->s = s;
    r->len = len;
    r->pos = 0;
    r->depth = 0;
}

static void skip_ws(kd_jreader *r) {
    while (r->pos < r->len) {
        const char c = r->s[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        r->pos++;
    }
}

int kd_jr_peek(kd_jreader *r) {
    skip_ws(r);
    return r->pos < r->len ? (unsigned char)r->s[r->pos] : -1;
}

bool kd_jr_take(kd_jreader *r, char c) {
    if (kd_jr_peek(r) != (unsigned char)c) return false;
    r->pos++;
    return true;
}

bool kd_jr_at_end(kd_jreader *r) {
    return kd_jr_peek(r) < 0;
}

/* ---- strings --------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (n bytes left) as jansson checks it: no
 * overlong forms, surrogates or code points past U+10FFFF; 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t k;
    uint32_t v;
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0)
        k = 2, v = c & 0x1F;
    else if (c < 0xF0)
        k = 3, v = c & 0x0F;
    else if (c < 0xF5)
        k = 4, v = c & 0x07;
    else
        return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && v < 0x800) || (k == 4 && v < 0x10000) || v > 0x10FFFF ||
        (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    return k;
}

static int hex4(const char *s, size_t n, uint32_t *out) {
    uint32_t v = 0;
    if (n < 4) return -1;
    for (int i = 0; i < 4; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0) return -1;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* Appends byte c to the decoded string (kept while it fits). */
static void put(char *buf, size_t cap, size_t *len, char c) {
    if (*len + 1 < cap) buf[*len] = c;
    (*len)++;
}

static void put_code_point(char *buf, size_t cap, size_t *len, uint32_t v) {
    if (v < 0x80) {
        put(buf, cap, len, (char)v);
    } else if (v < 0x800) {
        put(buf, cap, len, (char)(0xC0 | (v >> 6)));
        put(buf, cap, len, (char)(0x80 | (v & 0x3F)));
    } else if (v < 0x10000) {
        put(buf, cap, len, (char)(0xE0 | (v >> 12)));
        put(buf, cap, len, (char)(0x80 | ((v >> 6) & 0x3F)));
        put(buf, cap, len, (char)(0x80 | (v & 0x3F)));
    } else {
        put(buf, cap, len, (char)(0xF0 | (v >> 18)));
        put(buf, cap, len, (char)(0x80 | ((v >> 12) & 0x3F)));
        put(buf, cap, len, (char)(0x80 | ((v >> 6) & 0x3F)));
        put(buf, cap, len, (char)(0x80 | (v & 0x3F)));
    }
}

/* "\uXXXX" (and its low half when a high surrogate) at s[*i], after the backslash and u. */
static int unicode_escape(kd_jreader *r, size_t *i, uint32_t *out) {
    uint32_t v, lo;
    if (hex4(r->s + *i, r->len - *i, &v) < 0) return -1;
    *i += 4;
    if (v >= 0xDC00 && v <= 0xDFFF) return -1;
    if (v >= 0xD800 && v <= 0xDBFF) {
        if (r->len - *i < 2 || r->s[*i] != '\\' || r->s[*i + 1] != 'u') return -1;
        if (hex4(r->s + *i + 2, r->len - *i - 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) return -1;
        *i += 6;
        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (v == 0) return -1; /* jansson refuses NUL without JSON_ALLOW_NUL */
    *out = v;
    return 0;
}

int kd_jr_string(kd_jreader *r, char *buf, size_t cap, size_t *len) {
    static const char plain[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
    *len = 0;
    if (!kd_jr_take(r, '"')) return -1;
    size_t i = r->pos;
    while (i < r->len) {
        const unsigned char c = (unsigned char)r->s[i];
        if (c == '"') {
            r->pos = i + 1;
            if (cap) buf[*len < cap ? *len : cap - 1] = '\0';
            return 0;
        }
        if (c < 0x20) return -1;
        if (c == '\\') {
            if (++i >= r->len) return -1;
            const char e = r->s[i++];
            const char *at = e ? strchr(plain, e) : NULL;
            uint32_t v;
            if (at) {
                put(buf, cap, len, meant[at - plain]);
            } else if (e == 'u' && unicode_escape(r, &i, &v) == 0) {
                put_code_point(buf, cap, len, v);
            } else {
                return -1;
            }
            continue;
        }
        const size_t k = utf8_len((const unsigned char *)r->s + i, r->len - i);
        if (!k) return -1;
        for (size_t j = 0; j < k; j++)
            put(buf, cap, len, r->s[i + j]);
        i += k;
    }
    return -1;
}

char *kd_jr_key(kd_jreader *r) {
    char small[64];
    size_t len;
    kd_jr_peek(r);
    const size_t at = r->pos;
    if (kd_jr_string(r, small, sizeof small, &len) < 0) return NULL;
    char *k = malloc(len + 1);
    if (!k) return NULL;
    if (len < sizeof small) {
        memcpy(k, small, len + 1);
    } else {
        r->pos = at;
        kd_jr_string(r, k, len + 1, &len); /* the same string again */
    }
    if (!kd_jr_take(r, ':')) {
        free(k);
        return NULL;
    }
    return k;
}

/* ---- numbers --------------------------------------------------------------------------- */

static size_t digits(const kd_jreader *r, size_t i) {
    size_t n = 0;
    while (i + n < r->len && r->s[i + n] >= '0' && r->s[i + n] <= '9')
        n++;
    return n;
}

int kd_jr_number(kd_jreader *r, double *x, bool *is_int) {
    skip_ws(r);
    size_t i = r->pos, d;
    if (i < r->len && r->s[i] == '-') i++;
    if (!(d = digits(r, i)) || (r->s[i] == '0' && d > 1)) return -1;
    i += d;
    *is_int = true;
    if (i < r->len && r->s[i] == '.') {
        if (!(d = digits(r, i + 1))) return -1;
        i += 1 + d;
        *is_int = false;
    }
    if (i < r->len && (r->s[i] == 'e' || r->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < r->len && (r->s[j] == '+' || r->s[j] == '-')) j++;
        if (!(d = digits(r, j))) return -1;
        i = j + d;
        *is_int = false;
    }
    char tok[MAX_NUMBER + 1];
    const size_t n = i - r->pos;
    if (n > MAX_NUMBER) return -1;
    memcpy(tok, r->s + r->pos, n);
    tok[n] = '\0';
    errno = 0;
    if (*is_int) {
        const long long v = strtoll(tok, NULL, 10);
        if (errno == ERANGE) return -1; /* jansson: "too big integer" */
        *x = (double)v;
    } else {
        *x = strtod(tok, NULL);
        if (errno == ERANGE && isinf(*x)) return -1; /* jansson: "real number overflow" */
    }
    r->pos = i;
    return 0;
}

/* ---- containers ------------------------------------------------------------------------ */

int kd_jr_open(kd_jreader *r, char open) {
    if (r->depth >= MAX_DEPTH || !kd_jr_take(r, open)) return -1;
    r->depth++;
    return 0;
}

int kd_jr_more(kd_jreader *r, char close, bool *first) {
    if (kd_jr_take(r, close)) {
        r->depth--;
        return 0;
    }
    if (!*first && !kd_jr_take(r, ',')) return -1;
    *first = false;
    return 1;
}

static int skip_literal(kd_jreader *r) {
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        const size_t n = strlen(words[w]);
        if (r->len - r->pos >= n && !memcmp(r->s + r->pos, words[w], n)) {
            r->pos += n;
            return 0;
        }
    }
    return -1;
}

/* A key's raw text, compared with the object's earlier keys; one with an escape (whose
 * decoded form could match another's) is left to jansson. */
typedef struct {
    const char *s;
    size_t n;
} raw_key;

static int skip_object(kd_jreader *r) {
    raw_key keys[MAX_KEYS];
    int n_keys = 0, more;
    bool first = true;
    size_t len;
    if (kd_jr_open(r, '{') < 0) return -1;
    while ((more = kd_jr_more(r, '}', &first)) == 1) {
        if (kd_jr_peek(r) != '"' || n_keys == MAX_KEYS) return -1;
        const size_t start = r->pos + 1;
        if (kd_jr_string(r, NULL, 0, &len) < 0) return -1;
        const raw_key k = {r->s + start, r->pos - 1 - start};
        if (memchr(k.s, '\\', k.n)) return -1;
        for (int i = 0; i < n_keys; i++)
            if (keys[i].n == k.n && !memcmp(keys[i].s, k.s, k.n)) return -1;
        keys[n_keys++] = k;
        if (!kd_jr_take(r, ':') || kd_jr_skip(r) < 0) return -1;
    }
    return more;
}

static int skip_array(kd_jreader *r) {
    int more;
    bool first = true;
    if (kd_jr_open(r, '[') < 0) return -1;
    while ((more = kd_jr_more(r, ']', &first)) == 1)
        if (kd_jr_skip(r) < 0) return -1;
    return more;
}

int kd_jr_skip(kd_jreader *r) {
    double x;
    bool is_int;
    size_t len;
    switch (kd_jr_peek(r)) {
    case '{':
        return skip_object(r);
    case '[':
        return skip_array(r);
    case '"':
        return kd_jr_string(r, NULL, 0, &len);
    case 't':
    case 'f':
    case 'n':
        return skip_literal(r);
    default:
        return kd_jr_number(r, &x, &is_int);
    }
}
