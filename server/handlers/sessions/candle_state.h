/* candle_state.h — a candle session's state and its journal records (candle_state.c),
 * shared by the candle session handlers (candle_sessions.c). Internal to the handlers. */
#ifndef KD_CANDLE_STATE_H
#define KD_CANDLE_STATE_H

#include "app.h"
#include "candle_calib.h"
#include "session_handlers.h"
#include "journal.h"
#include "sessions.h"

/* A session restored from the journal holds its candles alone until its first append
 * rebuilds the series, so that start-up encodes nothing; a forecast meanwhile runs on the
 * same candles with the series' statistics pinned, which is the series' forecast to the bit
 * (kronos.h). */
typedef struct {
    int n, cap;
    bool has[KR_D_IN];
    int64_t *timestamps;
    double *columns[KR_D_IN];
    float mean[KR_D_IN], std[KR_D_IN];
} pending_candles;

typedef struct {
    kr_series *series;        /* NULL while pending */
    pending_candles *pending; /* a restored session's candles, until the series is built */
    kd_time_form form;        /* how the last candles' timestamps were written */
    kd_candle_calib *calib;   /* NULL: its forecasts are not calibrated online */
} candle_state;

/* The kind of a candle session in the session table. */
extern const kd_session_kind kd_candle_kind;

void kd_candle_pending_free(pending_candles *p);
/* req's context and pinned statistics: the series', or the pending candles'. */
void kd_candle_state_request(const candle_state *st, kr_forecast_request *req);
/* Takes back the last k candles the series was given (candle_state.c says how); -1 when
 * out of memory (nothing changed). */
int kd_candle_revert_append(candle_state *st, int k, kd_time_form old_form);
int64_t kd_candle_last_timestamp(const candle_state *st);
/* What the session table shows of a candle session (p: its candle_state). */
void kd_candle_describe(const void *p, kd_session_extra *out);
/* The creation of session s, bound to md, as the journal keeps it; 0 without a journal, -1
 * with msg. */
int kd_candle_journal_created(kd_app *app, kd_session *s, const kd_model *md, const char *owner,
                              char *msg, size_t msglen);
/* Candles c appended to s, written as form; 0 without a journal, -1 with msg. */
int kd_candle_journal_appended(kd_app *app, kd_session *s, const kr_candles *c,
                               const kd_time_form *form, char *msg, size_t msglen);

#endif
