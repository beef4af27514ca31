/* journal_check.h — `kronosd journal check|repair STATE_DIR`: a journal read as the daemon
 * reads it at start, every problem reported (where, what, which session), and on repair a
 * new journal written without the sessions the problems touch, the original kept beside it.
 * Runs with no daemon on the state-dir (it takes the same lock).
 */
#ifndef KD_JOURNAL_CHECK_H
#define KD_JOURNAL_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kronos.h"

typedef struct {
    const char *dir; /* state-dir */
    bool repair;
    const kr_model *m;    /* NULL: the tokens' ranges and the model are not checked */
    uint64_t fingerprint; /* m's (kd_model_fingerprint), when m is given */
    const char *model;    /* m's description, for a new header */
    FILE *out;            /* the report */
} kd_journal_check_opts;

/* 0: nothing wrong (check), or repaired; 1: problems found (check); -1 with err: the journal
 * could not be read, or repair could not write (the journal is then as it was). */
int kd_journal_check(const kd_journal_check_opts *o, char *err, size_t errlen);

#endif
