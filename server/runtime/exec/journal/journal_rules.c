/* journal_rules.c — a record checked against its session's records before it
 * (journal_rules.h). The candle and token rules are the core's, as for a live request. */
#include "journal_rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"

/* A zone offset a timestamp can be written with: -23:59 to +23:59. */
#define OFFSET_MAX_MIN (24 * 60 - 1)

/* The form and timestamps of candles as a request's parser would have let them through. */
static int check_times(const kd_journal_record *rec, kr_error *err) {
    if (rec->tz_offset_min < -OFFSET_MAX_MIN || rec->tz_offset_min > OFFSET_MAX_MIN ||
        (!rec->has_tz && rec->tz_offset_min != 0))
        return kr_fail_code(err, KR_E_INVALID,
                            "its zone offset of %d minutes is not one a "
                            "timestamp can be written with",
                            rec->tz_offset_min);
    for (int i = 0; i < rec->n; i++)
        if (rec->timestamps[i] < KD_WALL_MIN || rec->timestamps[i] > KD_WALL_MAX)
            return kr_fail_code(err, KR_E_INVALID,
                                "candles.timestamps[%d]: %lld is outside the years 0000-9999", i,
                                (long long)rec->timestamps[i]);
    return 0;
}

static int apply_create(kd_session_rules *s, const kd_journal_record *rec, kr_error *err) {
    const kr_candles c = kd_journal_record_candles(rec);
    kr_norm norm = {.pinned = true};
    memcpy(norm.mean, rec->mean, sizeof norm.mean);
    memcpy(norm.std, rec->std, sizeof norm.std);
    if (check_times(rec, err) || kr_series_check_create(&c, &norm, 0, err)) return -1;
    s->kind = KD_RULES_CANDLES;
    s->shape = (kr_series_shape){.n = rec->n, .last_timestamp = rec->timestamps[rec->n - 1]};
    for (int k = 0; k < KR_D_IN; k++)
        s->shape.has[k] = rec->columns[k] != NULL;
    s->offset_min = rec->has_tz ? rec->tz_offset_min : 0;
    return 0;
}

/* Appended candles at another offset move the series to their clock (candle_sessions.c),
 * so the last timestamp is compared on the new clock. */
static int apply_append(kd_session_rules *s, const kd_journal_record *rec, kr_error *err) {
    const kr_candles c = kd_journal_record_candles(rec);
    const int offset = rec->has_tz ? rec->tz_offset_min : 0;
    kr_series_shape on_clock = s->shape;
    on_clock.last_timestamp += (int64_t)(offset - s->offset_min) * 60;
    if (check_times(rec, err) || kr_series_check_append(&on_clock, &c, err)) return -1;
    s->shape = on_clock;
    s->shape.n += rec->n;
    s->shape.last_timestamp = rec->timestamps[rec->n - 1];
    s->offset_min = offset;
    return 0;
}

static int apply_tokens(kd_session_rules *s, const kd_journal_record *rec, const kr_model *m,
                        kr_error *err) {
    if (rec->n < 1) return kr_fail_code(err, KR_E_INVALID, "it appends no token pairs");
    for (int i = 0; i < rec->n; i++)
        if (kr_stamp_check(&rec->stamps[i], err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return kr_fail_code(err, KR_E_INVALID, "token pair %d: time stamp: %s", i, why);
        }
    if (m && kr_model_check_tokens(m, rec->s1, rec->s2, rec->stamps, rec->n, err)) return -1;
    s->tokens += rec->n;
    return 0;
}

/* A calibration record: its forecast's numbers as a live forecast makes them (the object
 * itself is checked when the session is restored). */
static int apply_calib(kd_session_rules *s, const kd_journal_record *rec, kr_error *err) {
    const kd_journal_calib *k = &rec->calib;
    if (k->kind == KD_CALIB_START) return 0;
    if (k->origin != s->shape.n)
        return kr_fail_code(err, KR_E_INVALID,
                            "its forecast's origin %lld is not the session's length, %d candles",
                            (long long)k->origin, s->shape.n);
    for (long i = 0; i < (long)k->horizon * k->samples; i++)
        if (!isfinite(k->sorted[i]) || (i % k->samples && k->sorted[i] < k->sorted[i - 1]))
            return kr_fail_code(err, KR_E_INVALID, "its forecast's paths are not sorted numbers");
    for (int h = 0; h < k->horizon; h++)
        if (!(k->p_up[h] >= 0 && k->p_up[h] <= 1))
            return kr_fail_code(err, KR_E_INVALID, "its forecast's P(up) is not in [0, 1]");
    return 0;
}

int kd_journal_rules_apply(kd_session_rules *s, const kd_journal_record *rec, const kr_model *m,
                           kr_error *err) {
    static const char *const kinds[] = {"no session", "a candle session", "a token session",
                                        "an ended session"};
    const bool creates = rec->type == KD_REC_CANDLES || rec->type == KD_REC_TOKENS;
    if (creates && !kd_session_id_well_formed(rec->id))
        return kr_fail_code(err, KR_E_INVALID, "the id is not of the form NODE-<32 hex digits>");
    if (creates && s->kind != KD_RULES_NONE)
        return kr_fail_code(err, KR_E_INVALID, "it creates %s that exists already (%s)", rec->id,
                            kinds[s->kind]);
    const kd_rules_kind wants = rec->type == KD_REC_APPEND || rec->type == KD_REC_CALIB
                                    ? KD_RULES_CANDLES
                                : rec->type == KD_REC_GENERATED ? KD_RULES_TOKENS
                                                                : KD_RULES_NONE;
    if (!creates && rec->type != KD_REC_GONE && s->kind != wants)
        return kr_fail_code(err, KR_E_INVALID, "it adds to %s, which is %s", rec->id,
                            kinds[s->kind]);
    switch (rec->type) {
    case KD_REC_CANDLES:
        return apply_create(s, rec, err);
    case KD_REC_APPEND:
        return apply_append(s, rec, err);
    case KD_REC_TOKENS:
        s->kind = KD_RULES_TOKENS;
        return 0;
    case KD_REC_GENERATED:
        return apply_tokens(s, rec, m, err);
    case KD_REC_CALIB:
        return apply_calib(s, rec, err);
    case KD_REC_GONE: /* of a session whose creation was never written, too: harmless */
        if (s->kind != KD_RULES_NONE) s->kind = KD_RULES_GONE;
        return 0;
    }
    return kr_fail_code(err, KR_E_INVALID, "it is of no known type");
}
