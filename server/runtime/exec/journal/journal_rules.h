/* journal_rules.h — what a journal record may say, given the records of its session before
 * it: the rules a live request is held to (the core's candle and token checks, timestamps
 * that go on increasing, one creation per session, nothing after its end). A record with a
 * valid checksum is still checked: a journal can be edited, or written by a bug. Used at
 * start-up (journal.c) and by `kronosd journal check|repair` (journal_check.c).
 */
#ifndef KD_JOURNAL_RULES_H
#define KD_JOURNAL_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "journal_format.h"
#include "kronos.h"

/* A session as its records so far describe it. */
typedef enum { KD_RULES_NONE, KD_RULES_CANDLES, KD_RULES_TOKENS, KD_RULES_GONE } kd_rules_kind;

typedef struct {
    kd_rules_kind kind;
    kr_series_shape shape; /* candles: the series so far, timestamps on its clock */
    int offset_min;        /* candles: the clock's zone offset */
    int tokens;            /* tokens: pairs so far */
} kd_session_rules;

/* Checks rec against its session's state s (KD_RULES_NONE for an id not seen before) and,
 * when it holds, moves s past it. m: the model, for the tokens' ranges (NULL: not checked).
 * 0, or -1 with err (KR_E_INVALID) saying what breaks which rule. */
int kd_journal_rules_apply(kd_session_rules *s, const kd_journal_record *rec, const kr_model *m,
                           kr_error *err);

#endif
