/* candle_calib.h — a candle session that calibrates its own forecasts (candle_calibration.c):
 * created with "calibration": "online" or an object to start from, it keeps each forecast
 * (kr_calib_online, kronos.h) until its candles arrive, answers an append with the
 * anomalies those candles make, and journals what it learns from so that a restart
 * restores it bit for bit. Internal to the handlers: candle_sessions.c holds one per
 * session and calls these hooks. */
#ifndef KD_CANDLE_CALIB_H
#define KD_CANDLE_CALIB_H

#include <jansson.h>

#include "app.h"
#include "forecast_json.h"
#include "journal.h"
#include "sessions.h"

typedef struct kd_candle_calib kd_candle_calib;

/* A creation's "calibration": absent or null (*out NULL), "online", or a calibration object
 * to start from, for the model of fingerprint model_id (kd_model's fp_hex), which an object
 * must name. -1 with a message naming the field. */
int kd_candle_calib_parse(const char *model_id, const json_t *v, kd_candle_calib **out, char *msg,
                          size_t msglen);
void kd_candle_calib_free(kd_candle_calib *c);
/* *c, which the caller then owns (*c NULL). */
kd_candle_calib *kd_candle_calib_take(kd_candle_calib **c);
/* The session's id noted and its start written to the journal, after its creation record
 * (0 without a journal). */
int kd_candle_calib_journal_start(kd_app *app, kd_candle_calib *c, const char *id, char *msg,
                                  size_t msglen);
/* A session forecast of body fitted to the session's calibration (c NULL: none, nothing
 * done): its quantiles default to the calibration's, and in->calibration is set to the
 * current object. -1 with a message (400). */
int kd_candle_calib_prepare(kd_candle_calib *c, const json_t *body, kd_forecast_input *in,
                            char *msg, size_t msglen);
/* kd_forecast_done_fn (ctx: the session's kd_candle_calib): the forecast kept and
 * journaled. */
int kd_candle_calib_kept(kd_app *app, void *ctx, kd_forecast_input *in,
                         const kr_forecast_result *res, kr_error *err);
/* Candles appended after `first` candles (as written, in form): every kept forecast of them
 * resolved; *anomalies the answer's list (a new array; NULL without calibration). -1 with
 * err. */
int kd_candle_calib_resolve(kd_app *app, kd_candle_calib *c, long first, const kr_candles *cand,
                            const kd_time_form *form, json_t **anomalies, kr_error *err);
/* A record replayed into *c for a session of `length` candles before it, bound to the model
 * of fingerprint model_id: a K record's start creates it, its forecast is kept; an A
 * record's candles resolve the kept forecasts. */
kd_replay_status kd_candle_calib_replay(const char *model_id, kd_candle_calib **c, long length,
                                        const kd_journal_record *rec, char *msg, size_t msglen);
/* Its running statistics into out (nothing when c is NULL). */
void kd_candle_calib_describe(const kd_candle_calib *c, kd_session_extra *out);

#endif
