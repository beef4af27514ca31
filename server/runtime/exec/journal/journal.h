/* journal.h — the session journal: an append-only file of session operations in
 * state-dir, replayed at start so that sessions outlive the process.
 *
 * The file is `journal` in state-dir: a header naming the model it was written for, then
 * records (journal_format.h). A request is answered after its record is written (and, with
 * fsync `always`, on the disk). At open, the one thing a crash leaves — its last write cut
 * short — is cut off at the last whole record and logged; anything else wrong is damage
 * (bytes before the end that hold no whole record, a record that breaks the rules a live
 * request is held to, a header this daemon never writes) and the journal is refused with a
 * message saying where and what, nothing changed: `kronosd journal check|repair`
 * (journal_check.h) lists it and drops the sessions it touches. A configuration that does
 * not fit the journal (another node-id, fewer max-sessions, a smaller pool) is refused the
 * same way, naming the setting: open never writes a record. When the file grows past twice
 * the records of the live sessions (and past rewrite_min), it is rewritten with those alone
 * (a temporary file renamed over it). Thread-safe.
 */
#ifndef KD_JOURNAL_H
#define KD_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "journal_format.h"
#include "kronos.h"
#include "sessions.h"

typedef enum { KD_FSYNC_ALWAYS, KD_FSYNC_EVERYSEC, KD_FSYNC_NO } kd_fsync_policy;

/* "always", "everysec", "no" -> the policy; -1 for anything else. */
int kd_fsync_policy_parse(const char *s);

typedef struct {
    const char *dir; /* state-dir */
    kd_fsync_policy fsync;
    size_t rewrite_min;   /* never rewrite a file smaller than this */
    uint64_t fingerprint; /* kd_model_fingerprint's */
    const char *model;    /* its description, for messages */
    const kr_model *m;    /* for the tokens' rules */
    const char *node_id;  /* every session must be this node's */
    int max_sessions;     /* the journal must hold no more */
} kd_journal_config;

typedef struct kd_journal kd_journal;

/* What replaying one record came to. */
typedef enum {
    KD_REPLAY_OK,
    KD_REPLAY_UNFIT, /* the configuration cannot hold the session: the message names the setting */
    KD_REPLAY_INVALID, /* the record cannot be replayed as it is: damage */
    KD_REPLAY_ERROR,   /* out of memory */
    /* the session is not restored (its model is gone or changed): logged, its later
     * records skipped, the others restored */
    KD_REPLAY_REFUSED,
} kd_replay_status;

typedef kd_replay_status (*kd_replay_fn)(void *ctx, const kd_journal_record *rec, char *msg,
                                         size_t msglen);

/* Opens (or creates) state-dir/journal, locked against a second process, and calls replay
 * for every record of the sessions alive at its end, in the file's order. NULL with err
 * when the directory or file cannot be used, another process holds it, it is damaged, or the
 * configuration does not fit it (including a replay that did not come to KD_REPLAY_OK or
 * KD_REPLAY_REFUSED). The header's model (cfg's fingerprint when the file was started) does
 * not refuse the file: a record names its session's model, and a record naming none is
 * replayed with the header's fingerprint in it (kd_journal_record), for the replay to judge. */
kd_journal *kd_journal_open(const kd_journal_config *cfg, kd_replay_fn replay, void *ctx, char *err,
                            size_t errlen);
/* Stops the flusher, syncs and closes. NULL is fine. */
void kd_journal_close(kd_journal *j);

/* Writes rec, synced to the disk first with fsync `always` (a session's end is synced by
 * kd_journal_commit). -1 with err when it could not be written: the file is as it was
 * before. */
int kd_journal_write(kd_journal *j, const kd_journal_record *rec, char *err, size_t errlen);
/* A session ended: its gone record (kd_journal_write's). */
int kd_journal_gone(kd_journal *j, const char *id, char *err, size_t errlen);
/* With fsync `always`: syncs what kd_journal_gone wrote. 0, or -1 with err. */
int kd_journal_commit(kd_journal *j, char *err, size_t errlen);

typedef struct {
    size_t bytes, live_bytes; /* the file, and the records of live sessions in it */
    int live_sessions;
    unsigned long long records, syncs, rewrites, errors;
    unsigned long long restored; /* at open: sessions replayed */
    unsigned long long refused;  /* at open: sessions not restored (their model gone or changed) */
    size_t cut;                  /* at open: bytes of a last write cut short, cut off */
} kd_journal_stats;

void kd_journal_stats_get(kd_journal *j, kd_journal_stats *st);

/* The lock on state-dir that keeps a second process out (kd_journal_open takes it too): the
 * lock's descriptor, or -1 with err. */
int kd_journal_lock(const char *dir, char *err, size_t errlen);

/* File helpers shared with journal_check.c: the whole buffer written at `at` (EINTR
 * retried), and a directory's entries synced. 0, or -1 with errno. */
int kd_journal_write_all(int fd, const void *p, size_t n, off_t at);
int kd_journal_sync_dir(const char *dir);

#endif
