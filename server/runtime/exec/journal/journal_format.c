/* journal_format.c — the journal's bytes (journal_format.h): CRC-32, the header, a record's
 * framing, encoding and decoding. */
#include "journal_format.h"

#include "fail.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC     "KRONOSJ1"
#define MAGIC_LEN 8
#define FIXED     (MAGIC_LEN + 8 + 4) /* magic, fingerprint, description length */

/* ---- CRC-32 (IEEE, as zlib) ------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t kd_crc32(const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- encoding ------------------------------------------------------------------------- */

static int put(kd_jbuf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *grown = realloc(b->p, cap);
        if (!grown) return -1;
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

#define PUT(b, type, v)                                                                            \
    do {                                                                                           \
        type v_ = (type)(v);                                                                       \
        if (put((b), &v_, sizeof v_) < 0) return -1;                                               \
    } while (0)

static int put_str(kd_jbuf *b, const char *s) {
    const size_t n = strlen(s);
    PUT(b, uint16_t, n);
    return put(b, s, n);
}

static int put_form(kd_jbuf *b, const kd_journal_record *r) {
    PUT(b, uint8_t, r->unix_seconds);
    PUT(b, uint8_t, r->has_tz);
    PUT(b, int32_t, r->tz_offset_min);
    return 0;
}

static int put_candles(kd_jbuf *b, const kd_journal_record *r) {
    uint8_t mask = 0;
    for (int c = 0; c < KR_D_IN; c++)
        if (r->columns[c]) mask |= (uint8_t)(1u << c);
    PUT(b, uint8_t, mask);
    PUT(b, uint32_t, r->n);
    if (put(b, r->timestamps, (size_t)r->n * sizeof(int64_t)) < 0) return -1;
    for (int c = 0; c < KR_D_IN; c++)
        if (r->columns[c] && put(b, r->columns[c], (size_t)r->n * sizeof(double)) < 0) return -1;
    return 0;
}

static int put_calib(kd_jbuf *b, const kd_journal_calib *k) {
    PUT(b, uint8_t, k->kind);
    if (k->kind == KD_CALIB_START) {
        PUT(b, uint32_t, k->text_len);
        return put(b, k->text, k->text_len);
    }
    PUT(b, int64_t, k->origin);
    PUT(b, double, k->last);
    PUT(b, uint32_t, k->horizon);
    PUT(b, uint32_t, k->samples);
    PUT(b, uint8_t, k->n_levels);
    const size_t P = (size_t)k->horizon;
    if (put(b, k->levels, (size_t)k->n_levels * sizeof(double)) < 0 ||
        put(b, k->sorted, P * (size_t)k->samples * sizeof(double)) < 0 ||
        put(b, k->p_up, P * sizeof(double)) < 0)
        return -1;
    return 0;
}

/* The session's model, when the record names one. */
static int put_model(kd_jbuf *b, const kd_journal_record *r) {
    if (!r->model[0]) return 0;
    return put_str(b, r->model) < 0 || put_str(b, r->model_hash) < 0 ? -1 : 0;
}

/* The framed record in b->p. */
int kd_journal_encode(kd_jbuf *b, const kd_journal_record *r) {
    b->len = 0;
    uint32_t frame[2] = {0, 0};
    if (put(b, frame, sizeof frame) < 0) return -1;
    PUT(b, uint8_t, r->type);
    if (put_str(b, r->id) < 0) return -1;
    switch (r->type) {
    case KD_REC_CANDLES:
        if (put_str(b, r->owner) < 0 || put_form(b, r) < 0 || put(b, r->mean, sizeof r->mean) < 0 ||
            put(b, r->std, sizeof r->std) < 0 || put_candles(b, r) < 0 || put_model(b, r) < 0)
            return -1;
        break;
    case KD_REC_APPEND:
        if (put_form(b, r) < 0 || put_candles(b, r) < 0) return -1;
        break;
    case KD_REC_TOKENS:
        if (put_str(b, r->owner) < 0 || put_model(b, r) < 0) return -1;
        break;
    case KD_REC_GENERATED:
        PUT(b, uint32_t, r->n);
        if (put(b, r->s1, (size_t)r->n * sizeof(int32_t)) < 0 ||
            put(b, r->s2, (size_t)r->n * sizeof(int32_t)) < 0)
            return -1;
        for (int i = 0; i < r->n; i++) {
            const int32_t s[5] = {r->stamps[i].minute, r->stamps[i].hour, r->stamps[i].weekday,
                                  r->stamps[i].day, r->stamps[i].month};
            if (put(b, s, sizeof s) < 0) return -1;
        }
        break;
    case KD_REC_GONE:
        break;
    case KD_REC_CALIB:
        if (put_calib(b, &r->calib) < 0) return -1;
        break;
    }
    const size_t payload = b->len - KD_JOURNAL_FRAME;
    if (payload > KD_JOURNAL_MAX_RECORD) return -1;
    frame[0] = (uint32_t)payload;
    frame[1] = kd_crc32(b->p + KD_JOURNAL_FRAME, payload);
    memcpy(b->p, frame, sizeof frame);
    return 0;
}

/* ---- the header ------------------------------------------------------------------------ */

void kd_jbuf_free(kd_jbuf *b) {
    free(b->p);
    *b = (kd_jbuf){0};
}

int kd_journal_encode_header(kd_jbuf *b, uint64_t fp, const char *model) {
    b->len = 0;
    const uint32_t n = (uint32_t)strnlen(model, KD_JOURNAL_DESC_MAX);
    if (put(b, MAGIC, MAGIC_LEN) < 0 || put(b, &fp, sizeof fp) < 0 || put(b, &n, sizeof n) < 0 ||
        put(b, model, n) < 0)
        return -1;
    const uint32_t crc = kd_crc32(b->p + MAGIC_LEN, b->len - MAGIC_LEN);
    return put(b, &crc, sizeof crc);
}

/* A whole header's bytes read into h; -1 with why when they are not one. */
static int read_whole_header(const unsigned char *p, size_t size, kd_journal_header *h, char *why,
                             size_t whylen) {
    if (size < MAGIC_LEN || memcmp(p, MAGIC, MAGIC_LEN) != 0)
        return kd_fail(why, whylen, "it is not a kronosd session journal (no KRONOSJ1 header)");
    if (size < FIXED)
        return kd_fail(why, whylen,
                       "it holds %zu bytes, less than a header, and they are not the start of "
                       "the header this daemon writes",
                       size);
    uint32_t n, crc;
    memcpy(&h->fingerprint, p + MAGIC_LEN, 8);
    memcpy(&n, p + MAGIC_LEN + 8, 4);
    if (n > KD_JOURNAL_DESC_MAX)
        return kd_fail(why, whylen,
                       "its header's description length is %u bytes; a header holds at most %d: "
                       "the header is damaged",
                       n, KD_JOURNAL_DESC_MAX);
    if (size < FIXED + (size_t)n + 4)
        return kd_fail(why, whylen,
                       "its header says its description takes %u bytes, but the file ends at "
                       "byte %zu: the header is damaged",
                       n, size);
    memcpy(&crc, p + FIXED + n, 4);
    if (crc != kd_crc32(p + MAGIC_LEN, FIXED - MAGIC_LEN + n))
        return kd_fail(why, whylen, "its header fails its checksum: the header is damaged");
    memcpy(h->model, p + FIXED, n);
    h->model[n] = '\0';
    h->end = FIXED + n + 4;
    return 0;
}

kd_header_status kd_journal_read_header(const unsigned char *p, size_t size,
                                        const kd_jbuf *expected, kd_journal_header *h, char *why,
                                        size_t whylen) {
    /* the one way a header is short: the daemon was creating this very header */
    if (size < expected->len && memcmp(p, expected->p, size) == 0) return KD_HEADER_UNFINISHED;
    return read_whole_header(p, size, h, why, whylen) < 0 ? KD_HEADER_BAD : KD_HEADER_OK;
}

/* ---- framing ------------------------------------------------------------------------------ */

uint32_t kd_journal_frame_at(const unsigned char *p, size_t off, size_t size) {
    if (off > size || size - off < KD_JOURNAL_FRAME) return 0;
    uint32_t len, crc;
    memcpy(&len, p + off, 4);
    memcpy(&crc, p + off + 4, 4);
    if (len == 0 || len > KD_JOURNAL_MAX_RECORD || len > size - off - KD_JOURNAL_FRAME) return 0;
    if (kd_crc32(p + off + KD_JOURNAL_FRAME, len) != crc) return 0;
    char type, id[KD_SESSION_ID_LEN + 1];
    return kd_journal_peek(p + off + KD_JOURNAL_FRAME, len, &type, id) ? len : 0;
}

size_t kd_journal_next_frame(const unsigned char *p, size_t from, size_t size) {
    for (size_t q = from; q + KD_JOURNAL_FRAME < size; q++)
        if (kd_journal_frame_at(p, q, size)) return q;
    return size;
}

kr_candles kd_journal_record_candles(const kd_journal_record *r) {
    kr_candles c = {.n = r->n, .timestamps = r->timestamps};
    for (int k = 0; k < KR_D_IN; k++)
        c.columns[k] = r->columns[k];
    return c;
}

/* ---- decoding --------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    bool bad;
} cursor;

static void take(cursor *c, void *out, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        memset(out, 0, n);
        return;
    }
    memcpy(out, c->p, n);
    c->p += n;
}

static void take_str(cursor *c, char *out, size_t cap) {
    uint16_t n = 0;
    take(c, &n, sizeof n);
    if (c->bad || n >= cap || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, c->p, n);
    out[n] = '\0';
    c->p += n;
}

/* An array of n items of size `each`, copied out of the file (which need not be aligned)
 * into mem, which the caller frees. */
static void *take_array(cursor *c, size_t n, size_t each, void **mem) {
    if (c->bad || n > KD_JOURNAL_MAX_RECORD / each || (size_t)(c->end - c->p) < n * each) {
        c->bad = true;
        return NULL;
    }
    void *a = malloc(n > 0 ? n * each : 1);
    if (!a) {
        c->bad = true;
        return NULL;
    }
    memcpy(a, c->p, n * each);
    c->p += n * each;
    *mem = a;
    return a;
}

void kd_journal_decoded_free(kd_journal_decoded *d) {
    for (size_t i = 0; i < sizeof d->mem / sizeof d->mem[0]; i++)
        free(d->mem[i]);
}

static void take_form(cursor *c, kd_journal_record *r) {
    uint8_t u = 0, tz = 0;
    int32_t off = 0;
    take(c, &u, 1);
    take(c, &tz, 1);
    take(c, &off, sizeof off);
    r->unix_seconds = u;
    r->has_tz = tz;
    r->tz_offset_min = off;
}

static void take_candles(cursor *c, kd_journal_record *r, kd_journal_decoded *d) {
    uint8_t mask = 0;
    uint32_t n = 0;
    take(c, &mask, 1);
    take(c, &n, sizeof n);
    if (n > INT_MAX || (mask & 0xF) != 0xF) c->bad = true; /* open..close always */
    r->n = (int)n;
    r->timestamps = take_array(c, n, sizeof(int64_t), &d->mem[0]);
    for (int k = 0; k < KR_D_IN; k++)
        r->columns[k] = mask & (1u << k) ? take_array(c, n, sizeof(double), &d->mem[1 + k]) : NULL;
}

static void take_calib(cursor *c, kd_journal_calib *k, kd_journal_decoded *d) {
    uint8_t kind = 0, nl = 0;
    uint32_t n = 0, P = 0, S = 0;
    take(c, &kind, 1);
    k->kind = (kd_calib_record)kind;
    if (kind == KD_CALIB_START) {
        take(c, &n, sizeof n);
        k->text = take_array(c, n, 1, &d->mem[0]);
        k->text_len = n;
        return;
    }
    if (kind != KD_CALIB_FORECAST) c->bad = true;
    take(c, &k->origin, sizeof k->origin);
    take(c, &k->last, sizeof k->last);
    take(c, &P, sizeof P);
    take(c, &S, sizeof S);
    take(c, &nl, 1);
    if (P < 1 || S < 1 || P > INT_MAX / S || nl > KR_MAX_QUANTILES) c->bad = true;
    k->horizon = (int)P;
    k->samples = (int)S;
    k->n_levels = nl;
    take(c, k->levels, c->bad ? 0 : (size_t)nl * sizeof(double));
    k->sorted = c->bad ? NULL : take_array(c, (size_t)P * S, sizeof(double), &d->mem[1]);
    k->p_up = c->bad ? NULL : take_array(c, P, sizeof(double), &d->mem[2]);
}

/* The session's model, when the record goes on (records written before have none). */
static void take_model(cursor *c, kd_journal_record *r) {
    if (c->bad || c->p == c->end) return;
    take_str(c, r->model, sizeof r->model);
    take_str(c, r->model_hash, sizeof r->model_hash);
}

bool kd_journal_peek(const unsigned char *p, size_t n, char *type, char *id) {
    cursor c = {p, p + n, false};
    uint8_t t = 0;
    take(&c, &t, 1);
    take_str(&c, id, KD_SESSION_ID_LEN + 1);
    *type = (char)t;
    return !c.bad && strchr("CATGDK", t) && t != 0;
}

int kd_journal_decode(const unsigned char *p, size_t n, kd_journal_record *r,
                      kd_journal_decoded *d) {
    cursor c = {p, p + n, false};
    uint8_t t = 0;
    memset(r, 0, sizeof *r);
    take(&c, &t, 1);
    r->type = (kd_record_type)t;
    take_str(&c, r->id, sizeof r->id);
    switch (t) {
    case KD_REC_CANDLES:
        take_str(&c, r->owner, sizeof r->owner);
        take_form(&c, r);
        take(&c, r->mean, sizeof r->mean);
        take(&c, r->std, sizeof r->std);
        take_candles(&c, r, d);
        take_model(&c, r);
        break;
    case KD_REC_APPEND:
        take_form(&c, r);
        take_candles(&c, r, d);
        break;
    case KD_REC_TOKENS:
        take_str(&c, r->owner, sizeof r->owner);
        take_model(&c, r);
        break;
    case KD_REC_GENERATED: {
        uint32_t k = 0;
        take(&c, &k, sizeof k);
        if (k > INT_MAX) c.bad = true;
        r->n = (int)k;
        r->s1 = take_array(&c, k, sizeof(int32_t), &d->mem[0]);
        r->s2 = take_array(&c, k, sizeof(int32_t), &d->mem[1]);
        const int32_t *s = take_array(&c, k, 5 * sizeof(int32_t), &d->mem[2]);
        kr_stamp *stamps = c.bad ? NULL : malloc((k ? k : 1) * sizeof *stamps);
        if (!c.bad && !stamps) c.bad = true;
        for (uint32_t i = 0; stamps && i < k; i++)
            stamps[i] = (kr_stamp){.minute = s[5 * i],
                                   .hour = s[5 * i + 1],
                                   .weekday = s[5 * i + 2],
                                   .day = s[5 * i + 3],
                                   .month = s[5 * i + 4]};
        d->mem[3] = stamps;
        r->stamps = stamps;
        break;
    }
    case KD_REC_GONE:
        break;
    case KD_REC_CALIB:
        take_calib(&c, &r->calib, d);
        break;
    default:
        c.bad = true;
    }
    return c.bad || c.p != c.end ? -1 : 0;
}
