/* journal.h — the session journal: an append-only file of session operations in
 * state-dir, replayed at start so that sessions outlive the process.
 *
 * The file is `journal` in state-dir: a header naming the model it was written for (a
 * fingerprint of the model's shapes and of what its weights compute, and a line saying
 * which model), then records, each a length, a CRC-32 and a payload. A record is a candle
 * session's creation (its id, owner, every candle and the statistics in use), an append
 * of candles, a token session's creation, the token pairs a generation appended, or a
 * session's end (deleted, expired or evicted). A request is answered after its record is
 * written (and, with fsync `always`, on the disk). At open, a tail that is cut short or
 * fails its checksum (a crash mid-write) is cut off at the last whole record and logged;
 * the records of the sessions still alive are replayed in order. When the file grows past
 * twice the records of the live sessions (and past rewrite_min), it is rewritten with
 * those alone (a temporary file renamed over it). Thread-safe.
 */
#ifndef KD_JOURNAL_H
#define KD_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "sessions.h"

typedef enum { KD_FSYNC_ALWAYS, KD_FSYNC_EVERYSEC, KD_FSYNC_NO } kd_fsync_policy;

/* "always", "everysec", "no" -> the policy; -1 for anything else. */
int kd_fsync_policy_parse(const char *s);

typedef enum {
    KD_REC_CANDLES = 'C',   /* a candle session created: id, owner, form, stats, candles */
    KD_REC_APPEND = 'A',    /* candles appended: id, form, candles */
    KD_REC_TOKENS = 'T',    /* a token session created: id, owner */
    KD_REC_GENERATED = 'G', /* token pairs appended to a token session: id, pairs */
    KD_REC_GONE = 'D',      /* a session ended: id */
} kd_record_type;

typedef struct {
    kd_record_type type;
    char id[KD_SESSION_ID_LEN + 1];
    char owner[KD_OWNER_MAX + 1];
    /* C, A: how the last timestamp was written (timefmt.h's kd_time_form) */
    bool unix_seconds, has_tz;
    int tz_offset_min;
    float mean[KR_D_IN], std[KR_D_IN]; /* C: the statistics the series uses */
    int n;                             /* C, A: candles; G: token pairs */
    const int64_t *timestamps;         /* C, A: [n] */
    const double *columns[KR_D_IN];    /* C, A: [n] each, NULL for an absent column */
    const int32_t *s1, *s2;            /* G: [n] */
    const kr_stamp *stamps;            /* G: [n] */
} kd_journal_record;

typedef struct {
    const char *dir; /* state-dir */
    kd_fsync_policy fsync;
    size_t rewrite_min;   /* never rewrite a file smaller than this */
    uint64_t fingerprint; /* kd_model_fingerprint's */
    const char *model;    /* its description, for messages */
} kd_journal_config;

typedef struct kd_journal kd_journal;

/* The model's fingerprint: its shapes, max_context and what its weights compute on a fixed
 * input (a few candles encoded, a window's logits). desc gets a line naming it. -1 with err. */
int kd_model_fingerprint(const kr_model *m, const char *name, uint64_t *fp, char *desc,
                         size_t desclen, kr_error *err);

/* Opens (or creates) state-dir/journal, locked against a second process. Calls replay for
 * every record of the sessions alive at its end, in the file's order; a session whose
 * replay returns -1 is ended (a gone record written). NULL with err when the directory or
 * file cannot be used, another process holds it, or it was written for another model. */
kd_journal *kd_journal_open(const kd_journal_config *cfg,
                            int (*replay)(void *ctx, const kd_journal_record *rec), void *ctx,
                            char *err, size_t errlen);
/* Stops the flusher, syncs and closes. NULL is fine. */
void kd_journal_close(kd_journal *j);

/* Writes rec (not KD_REC_GONE), synced to the disk first with fsync `always`. -1 with err
 * when it could not be written: the file is as it was before. */
int kd_journal_write(kd_journal *j, const kd_journal_record *rec, char *err, size_t errlen);
/* A session ended: its gone record, written now and synced with the next sync (a crash
 * before it brings the session back, never loses one). Failures are logged. */
void kd_journal_gone(kd_journal *j, const char *id);
/* With fsync `always`: syncs what kd_journal_gone wrote. 0, or -1 with err. */
int kd_journal_commit(kd_journal *j, char *err, size_t errlen);

typedef struct {
    size_t bytes, live_bytes; /* the file, and the records of live sessions in it */
    int live_sessions;
    unsigned long long records, syncs, rewrites, errors;
    unsigned long long restored, dropped; /* at open: sessions replayed, and lost */
} kd_journal_stats;

void kd_journal_stats_get(kd_journal *j, kd_journal_stats *st);

#endif
