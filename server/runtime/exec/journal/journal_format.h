/* journal_format.h — the session journal's bytes: its header, the framing of a record, and
 * a record's payload encoded and decoded. No file handling (journal.c) and no rules about
 * what a record may say (journal_rules.h).
 *
 * File: "KRONOSJ1", u64 fingerprint, u32 length + the model's description, u32 CRC-32 of
 * those three; then records: u32 payload length, u32 CRC-32 of the payload, the payload.
 * Numbers are in the host's byte order (a journal stays on its machine). Payload: u8 type,
 * u16 length + id, then by type —
 *   C: u16 + owner, form, f32 mean[6], f32 std[6], u8 column mask, u32 n, i64 ts[n],
 *      f64 column[n] for each column in the mask, [model]
 *   A: form, u8 column mask, u32 n, i64 ts[n], f64 columns
 *   T: u16 + owner, [model]
 *   G: u32 n, i32 s1[n], i32 s2[n], i32 stamp[n][5] (minute, hour, weekday, day, month)
 *   D: nothing
 *   K: u8 0, u32 n + the starting calibration object as JSON ("" for online), or
 *      u8 1, i64 origin, f64 last close, u32 horizon, u32 samples, u8 levels, f64 level[],
 *      f64 sorted close paths[horizon][samples], f64 P(up)[horizon]
 * where form is u8 unix_seconds, u8 has_tz, i32 tz_offset_min, and [model], the model the
 * session is bound to, is u16 + model id, u16 + its hash (64 hex digits), or nothing (a
 * record written before models had ids: the default model).
 */
#ifndef KD_JOURNAL_FORMAT_H
#define KD_JOURNAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "sessions.h"

#define KD_JOURNAL_FRAME      8 /* a record's length and CRC */
#define KD_JOURNAL_MAX_RECORD (1u << 30)
#define KD_JOURNAL_DESC_MAX   4096 /* the longest model description a header holds */

typedef enum {
    KD_REC_CANDLES = 'C',   /* a candle session created: id, owner, form, stats, candles */
    KD_REC_APPEND = 'A',    /* candles appended: id, form, candles */
    KD_REC_TOKENS = 'T',    /* a token session created: id, owner */
    KD_REC_GENERATED = 'G', /* token pairs appended to a token session: id, pairs */
    KD_REC_GONE = 'D',      /* a session ended: id */
    KD_REC_CALIB = 'K',     /* a candle session's calibration: its start, or a forecast kept */
} kd_record_type;

/* K: what a candle session's online calibration learns from (candle_calibration.c). */
typedef enum { KD_CALIB_START = 0, KD_CALIB_FORECAST = 1 } kd_calib_record;
typedef struct {
    kd_calib_record kind;
    const char *text; /* START: the starting object's JSON, "" for online; text_len bytes */
    uint32_t text_len;
    int64_t origin; /* FORECAST: the series' length when it was made */
    double last;    /* the close before it */
    int horizon, samples, n_levels;
    double levels[KR_MAX_QUANTILES];
    const double *sorted, *p_up; /* [horizon][samples], [horizon] */
} kd_journal_calib;

typedef struct {
    kd_record_type type;
    char id[KD_SESSION_ID_LEN + 1];
    char owner[KD_OWNER_MAX + 1];
    char model[72], model_hash[72]; /* C, T: the session's model's id and hash, "" for none */
    /* at replay: the header's fingerprint, the default model's when the file was started,
     * which a creation naming no model was written with (not encoded in the record) */
    uint64_t header_fingerprint;
    /* C, A: how the last timestamp was written (timefmt.h's kd_time_form) */
    bool unix_seconds, has_tz;
    int tz_offset_min;
    float mean[KR_D_IN], std[KR_D_IN]; /* C: the statistics the series uses */
    int n;                             /* C, A: candles; G: token pairs */
    const int64_t *timestamps;         /* C, A: [n] */
    const double *columns[KR_D_IN];    /* C, A: [n] each, NULL for an absent column */
    const int32_t *s1, *s2;            /* G: [n] */
    const kr_stamp *stamps;            /* G: [n] */
    kd_journal_calib calib;            /* K */
} kd_journal_record;

/* A growing byte buffer that records and headers are encoded into. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} kd_jbuf;

void kd_jbuf_free(kd_jbuf *b);

uint32_t kd_crc32(const void *p, size_t n);

/* The header for a model of this fingerprint and description, in b. -1: out of memory. */
int kd_journal_encode_header(kd_jbuf *b, uint64_t fingerprint, const char *model);

/* The header at the start of a file of `size` bytes. */
typedef enum {
    KD_HEADER_OK,         /* whole: *end is where the records start */
    KD_HEADER_UNFINISHED, /* the file is a prefix of `expected` (a crash while it was created) */
    KD_HEADER_BAD,        /* anything else: what in why */
} kd_header_status;

typedef struct {
    uint64_t fingerprint;
    char model[KD_JOURNAL_DESC_MAX + 1];
    size_t end;
} kd_journal_header;

kd_header_status kd_journal_read_header(const unsigned char *p, size_t size,
                                        const kd_jbuf *expected, kd_journal_header *h, char *why,
                                        size_t whylen);

/* The framed record in b (replacing what it held); -1 when out of memory or too large. */
int kd_journal_encode(kd_jbuf *b, const kd_journal_record *r);

/* A whole record at p[off..size): its payload length when the frame fits in the file, the
 * CRC matches and the payload names a known type and an id; 0 otherwise. */
uint32_t kd_journal_frame_at(const unsigned char *p, size_t off, size_t size);

/* The type and id at the start of a payload (whether or not its CRC holds); false if they
 * cannot be read. */
bool kd_journal_peek(const unsigned char *payload, size_t n, char *type, char *id);

/* A C or A record's candles, as the core takes them (borrowed from the record). */
kr_candles kd_journal_record_candles(const kd_journal_record *r);

/* The first offset at or after from where a whole record starts (kd_journal_frame_at);
 * size if none does. */
size_t kd_journal_next_frame(const unsigned char *p, size_t from, size_t size);

/* The arrays a decoded record points into. */
typedef struct {
    void *mem[KR_D_IN + 4];
} kd_journal_decoded;

void kd_journal_decoded_free(kd_journal_decoded *d);

/* The whole record; -1 if it is malformed (d frees its arrays either way). */
int kd_journal_decode(const unsigned char *payload, size_t n, kd_journal_record *r,
                      kd_journal_decoded *d);

#endif
