/* candle_state.c — a candle session's state (candle_state.h): its series or, restored from
 * the journal, its pending candles; what the session table shows of it; the journal
 * records that create and extend it, written and replayed (its calibration's with them). */
#include "candle_state.h"

#include <stdlib.h>
#include <string.h>

#include "json_fields.h"
#include "timefmt.h"

void kd_candle_pending_free(pending_candles *p) {
    if (!p) return;
    free(p->timestamps);
    for (int c = 0; c < KR_D_IN; c++)
        free(p->columns[c]);
    free(p);
}

/* Candles after the pending ones (the same columns); -1 when out of memory or they do not
 * fit (a journal that disagrees with itself). */
static int pending_add(pending_candles *p, const kr_candles *c) {
    for (int k = 0; k < KR_D_IN; k++)
        if (p->n > 0 && p->has[k] != (c->columns[k] != NULL)) return -1;
    if (p->n + c->n > p->cap) {
        int cap = p->cap ? p->cap : 64;
        while (cap < p->n + c->n)
            cap *= 2;
        int64_t *t = realloc(p->timestamps, (size_t)cap * sizeof *t);
        if (!t) return -1;
        p->timestamps = t;
        for (int k = 0; k < KR_D_IN; k++) {
            if (!c->columns[k]) continue;
            double *col = realloc(p->columns[k], (size_t)cap * sizeof *col);
            if (!col) return -1;
            p->columns[k] = col;
        }
        p->cap = cap;
    }
    memcpy(p->timestamps + p->n, c->timestamps, (size_t)c->n * sizeof *c->timestamps);
    for (int k = 0; k < KR_D_IN; k++) {
        p->has[k] = c->columns[k] != NULL;
        if (p->has[k]) memcpy(p->columns[k] + p->n, c->columns[k], (size_t)c->n * sizeof(double));
    }
    p->n += c->n;
    return 0;
}

static void state_free(void *p) {
    candle_state *st = p;
    if (!st) return;
    kr_series_free(st->series);
    kd_candle_pending_free(st->pending);
    kd_candle_calib_free(st->calib);
    free(st);
}

/* req's context and pinned statistics: the series', or the pending candles'. */
void kd_candle_state_request(const candle_state *st, kr_forecast_request *req) {
    if (st->series) {
        kr_series_request(st->series, req);
        return;
    }
    const pending_candles *p = st->pending;
    req->context.n = p->n;
    req->context.timestamps = p->timestamps;
    for (int c = 0; c < KR_D_IN; c++)
        req->context.columns[c] = p->has[c] ? p->columns[c] : NULL;
    req->norm.pinned = true;
    memcpy(req->norm.mean, p->mean, sizeof p->mean);
    memcpy(req->norm.std, p->std, sizeof p->std);
}

/* Takes back the last k candles the series was given (their record could not be written):
 * the session becomes what the journal holds and a restart would restore, its candles
 * before them on the clock they were on (old_form) with the series' statistics, pending
 * until the next append rebuilds the series. -1 when out of memory (nothing changed). */
int kd_candle_revert_append(candle_state *st, int k, kd_time_form old_form) {
    kr_forecast_request req = {0};
    kr_series_request(st->series, &req);
    pending_candles *p = calloc(1, sizeof *p);
    kr_candles before = req.context;
    before.n -= k;
    if (!p || pending_add(p, &before) < 0) {
        kd_candle_pending_free(p);
        return -1;
    }
    const int64_t shift = (int64_t)(kd_form_offset(&st->form) - kd_form_offset(&old_form)) * 60;
    for (int i = 0; i < p->n; i++)
        p->timestamps[i] -= shift;
    memcpy(p->mean, req.norm.mean, sizeof p->mean);
    memcpy(p->std, req.norm.std, sizeof p->std);
    kr_series_free(st->series);
    st->series = NULL;
    st->pending = p;
    st->form = old_form;
    return 0;
}

int64_t kd_candle_last_timestamp(const candle_state *st) {
    return st->series ? kr_series_last_timestamp(st->series)
                      : st->pending->timestamps[st->pending->n - 1];
}

void kd_candle_describe(const void *p, kd_session_extra *out) {
    const candle_state *st = p;
    memset(out, 0, sizeof *out);
    if (st->series) {
        out->length = kr_series_length(st->series);
        out->bytes = kr_series_bytes(st->series);
        out->heap_bytes = kr_series_heap_bytes(st->series);
        kr_series_stats(st->series, out->mean, out->std);
    } else {
        const pending_candles *pc = st->pending;
        int cols = 0;
        for (int c = 0; c < KR_D_IN; c++)
            cols += pc->has[c];
        out->length = pc->n;
        out->bytes = out->heap_bytes = (size_t)pc->cap * (sizeof(int64_t) + cols * sizeof(double));
        memcpy(out->mean, pc->mean, sizeof out->mean);
        memcpy(out->std, pc->std, sizeof out->std);
    }
    out->last_timestamp = kd_candle_last_timestamp(st);
    if (!st->form.unix_seconds)
        kd_format_timestamp(out->last_timestamp, st->form.tz_offset_min, st->form.has_tz,
                            out->last_timestamp_text, sizeof out->last_timestamp_text);
    kd_candle_calib_describe(st->calib, out);
}

const kd_session_kind kd_candle_kind = {"candles", state_free, kd_candle_describe};

/* ---- the journal (state-dir) ------------------------------------------------------------ */

static void record_form(kd_journal_record *rec, const kd_time_form *form) {
    rec->unix_seconds = form->unix_seconds;
    rec->has_tz = form->has_tz;
    rec->tz_offset_min = form->tz_offset_min;
}

static void record_candles(kd_journal_record *rec, const kr_candles *c) {
    rec->n = c->n;
    rec->timestamps = c->timestamps;
    for (int k = 0; k < KR_D_IN; k++)
        rec->columns[k] = c->columns[k];
}

/* The creation of session s as the journal keeps it: every candle of the series and the
 * statistics it uses (pinned on replay, so that it is the same series). 0 without a
 * journal; -1 with msg. */
int kd_candle_journal_created(kd_app *app, kd_session *s, const kd_model *md, const char *owner,
                              char *msg, size_t msglen) {
    if (!app->journal) return 0;
    const candle_state *st = kd_session_state(s);
    kr_forecast_request req = {0};
    kr_series_request(st->series, &req);
    kd_journal_record rec = {.type = KD_REC_CANDLES};
    snprintf(rec.id, sizeof rec.id, "%s", kd_session_id(s));
    snprintf(rec.owner, sizeof rec.owner, "%s", owner);
    kd_record_model(&rec, md);
    record_form(&rec, &st->form);
    memcpy(rec.mean, req.norm.mean, sizeof rec.mean);
    memcpy(rec.std, req.norm.std, sizeof rec.std);
    record_candles(&rec, &req.context);
    return kd_journal_write(app->journal, &rec, msg, msglen);
}

int kd_candle_journal_appended(kd_app *app, kd_session *s, const kr_candles *c,
                               const kd_time_form *form, char *msg, size_t msglen) {
    if (!app->journal) return 0;
    kd_journal_record rec = {.type = KD_REC_APPEND};
    snprintf(rec.id, sizeof rec.id, "%s", kd_session_id(s));
    record_form(&rec, form);
    record_candles(&rec, c);
    return kd_journal_write(app->journal, &rec, msg, msglen);
}

static kd_replay_status replay_create(kd_app *app, const kd_journal_record *rec, char *msg,
                                      size_t msglen) {
    const kd_model *md = kd_replay_model(app, rec, msg, msglen);
    if (!md) return KD_REPLAY_REFUSED;
    const kr_candles c = kd_journal_record_candles(rec);
    candle_state *st = calloc(1, sizeof *st);
    if (st) st->pending = calloc(1, sizeof *st->pending);
    if (!st || !st->pending || pending_add(st->pending, &c) < 0) {
        snprintf(msg, msglen, "out of memory for its %d candles", rec->n);
        state_free(st);
        return KD_REPLAY_ERROR;
    }
    memcpy(st->pending->mean, rec->mean, sizeof rec->mean);
    memcpy(st->pending->std, rec->std, sizeof rec->std);
    st->form = (kd_time_form){rec->unix_seconds, rec->has_tz, rec->tz_offset_min};
    kd_session *s = NULL;
    const kd_session_status ss = kd_sessions_restore(app->sessions, &kd_candle_kind, st, rec->owner,
                                                     rec->id, &s, msg, msglen);
    if (ss != KD_SESSION_OK) return kd_replay_restore_status(app, ss, msg, msglen);
    kd_models_bind_session(&app->models, md);
    kd_session_bind(s, md, md->pool);
    kd_sessions_release(app->sessions, s);
    return KD_REPLAY_OK;
}

static kd_replay_status replay_append(kd_app *app, const kd_journal_record *rec, char *msg,
                                      size_t msglen) {
    kd_session *s = NULL;
    if (kd_sessions_acquire(app->sessions, NULL, rec->id, &s, msg, msglen) != KD_SESSION_OK)
        return KD_REPLAY_INVALID;
    candle_state *st = kd_session_kind_of(s) == &kd_candle_kind ? kd_session_state(s) : NULL;
    const kr_candles c = kd_journal_record_candles(rec);
    const kd_time_form form = {rec->unix_seconds, rec->has_tz, rec->tz_offset_min};
    const kd_model *md = st ? kd_session_model(s) : NULL; /* bound when it was restored */
    kd_replay_status rc = KD_REPLAY_INVALID;
    snprintf(msg, msglen, "a record for a session that is not a restored candle session");
    if (st && st->pending && rec->type == KD_REC_CALIB) /* its calibration's start or forecast */
        rc = kd_candle_calib_replay(md->fp_hex, &st->calib, st->pending->n, rec, msg, msglen);
    else if (st && st->pending) {
        /* an append at a new offset moved the series to its clock (append_candles): the
         * pending candles move with it, so the rebuilt series is the one before the crash */
        const int64_t shift = (int64_t)(kd_form_offset(&form) - kd_form_offset(&st->form)) * 60;
        for (int i = 0; i < st->pending->n; i++)
            st->pending->timestamps[i] += shift;
        rc = pending_add(st->pending, &c) == 0 ? KD_REPLAY_OK : KD_REPLAY_ERROR;
        if (rc == KD_REPLAY_OK)
            st->form = form;
        else
            snprintf(msg, msglen, "out of memory for %d more candles", rec->n);
    }
    if (rc == KD_REPLAY_OK && rec->type == KD_REC_APPEND) /* the candles resolve its forecasts */
        rc = kd_candle_calib_replay(md->fp_hex, &st->calib, st->pending->n - rec->n, rec, msg,
                                    msglen);
    kd_sessions_release(app->sessions, s);
    return rc;
}

kd_replay_status kd_replay_candle_record(kd_app *app, const kd_journal_record *rec, char *msg,
                                         size_t msglen) {
    return rec->type == KD_REC_CANDLES ? replay_create(app, rec, msg, msglen)
                                       : replay_append(app, rec, msg, msglen);
}
