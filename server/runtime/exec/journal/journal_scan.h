/* journal_scan.h — reading a journal's records: the index of its sessions (id -> the bytes
 * of their records, what their records say so far) and the scan that walks the file once,
 * checking every record's frame, checksum and rules, and telling a torn last write (the
 * one thing a crash leaves) from damage before the end (which a crash never leaves).
 * Used at start-up (journal.c) and by `kronosd journal check|repair` (journal_check.c).
 */
#ifndef KD_JOURNAL_SCAN_H
#define KD_JOURNAL_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "journal_rules.h"

/* ---- the index -------------------------------------------------------------------------- */

typedef struct kd_jentry {
    struct kd_jentry *next;
    size_t bytes; /* of its records, frames included */
    bool live;    /* created and not ended */
    bool touched; /* a problem concerns it (the scan) */
    bool refused; /* not restored by the replay (its model is gone or changed) */
    kd_session_rules rules;
    char id[KD_SESSION_ID_LEN + 1];
} kd_jentry;

typedef struct {
    kd_jentry **buckets;
    int live_count;
    size_t live_bytes;
} kd_jindex;

int kd_jindex_init(kd_jindex *x);
void kd_jindex_free(kd_jindex *x);
kd_jentry *kd_jindex_find(const kd_jindex *x, const char *id);
/* The entry of id, added (not live) when there is none; NULL when out of memory. */
kd_jentry *kd_jindex_get(kd_jindex *x, const char *id);
/* A record of `bytes` (frame included) of type for session id, counted: a creation makes it
 * live, an end removes it (keep_gone: marks it ended instead, so that a scan still knows
 * it). -1 when out of memory. */
int kd_jindex_note(kd_jindex *x, char type, const char *id, size_t bytes, bool keep_gone);
/* Drops the entries that are not live. */
void kd_jindex_prune(kd_jindex *x);
/* Calls fn for every live entry (live_only) or every entry. */
void kd_jindex_each(const kd_jindex *x, bool live_only, void (*fn)(void *ctx, const kd_jentry *e),
                    void *ctx);

/* ---- the scan ------------------------------------------------------------------------- */

typedef enum {
    KD_JPROBLEM_DAMAGED, /* bytes that are no whole record (frame, checksum), before the end */
    KD_JPROBLEM_RULE,    /* a whole record that is malformed or breaks a rule */
} kd_jproblem_kind;

typedef struct {
    kd_jproblem_kind kind;
    size_t offset, bytes;           /* the region in the file */
    char type;                      /* the record's type, 0 when unreadable */
    char id[KD_SESSION_ID_LEN + 1]; /* the session it concerns; "" for every live one */
    char what[320];
} kd_jproblem;

typedef struct {
    kd_jindex index;
    size_t end; /* the end of the last whole record */
    bool torn;  /* bytes past end that hold no whole record: a write a crash cut short */
    const char *torn_why;
    unsigned long long records; /* whole records */
    kd_jproblem *problems;
    int n_problems;
} kd_jscan;

/* Walks p[from..size) (the records after the header). m: the model for the tokens' rules
 * (NULL: not checked). -1 with err when out of memory; otherwise the result is in out
 * (freed with kd_jscan_free), problems and all. */
int kd_journal_scan(const unsigned char *p, size_t from, size_t size, const kr_model *m,
                    kd_jscan *out, char *err, size_t errlen);
void kd_jscan_free(kd_jscan *s);

#endif
