/* session_handlers.h — the sessions' routes, a floor above the other handlers: the session
 * table over HTTP (token sessions and live candle sessions) and the replay of their journal
 * records at start.
 *
 *   token_sessions.c     POST /sessions (no candles), GET and DELETE /sessions/{id}; the
 *                        model a creation record names
 *   candle_sessions.c    POST /sessions with candles, POST /sessions/{id}/candles and
 *                        /sessions/{id}/forecast
 *   candle_state.c       a candle session's state, its description and journal records
 *   candle_calibration.c a candle session's online calibration (candle_calib.h)
 */
#ifndef KD_SESSION_HANDLERS_H
#define KD_SESSION_HANDLERS_H

#include "handlers.h"

/* token_sessions.c: the session table over HTTP.
 *   POST /sessions (no body, or {})   -> 201 {"session", "max_context", "ttl_seconds"}
 *   GET /sessions/{id}                -> {"session", "kind", "length", "capacity", "bytes",
 *                                          "idle_seconds", "age_seconds", "busy", ...}
 *   DELETE /sessions/{id}             -> {"session", "deleted": true} */
kd_handler kd_handle_session_get, kd_handle_session_delete;
/* POST /sessions for a token session; body: the request's JSON (NULL without a body),
 * which must have no fields. */
kd_outcome kd_handle_session_create(kd_app *app, kd_request *r, const json_t *body);

/* candle_sessions.c: a live series (kr_series) held in the session table, appended to and
 * forecast from incrementally.
 *   POST /sessions {"candles": ..., "normalization"?: ...}   -> 201 {"session", "kind",
 *                                                              "length", "normalization"}
 *   POST /sessions/{id}/candles {"candles": ...} or CSV      -> {"session", "length",
 *                                                              "appended", "last_timestamp"}
 *   POST /sessions/{id}/forecast {the /forecast fields but candles and normalization}
 *                                                            -> a /forecast response
 * A session forecast equals, in everything but "usage", /forecast on the session's candles
 * with "normalization" set to its statistics and the same seed. body: the parsed request
 * (borrowed), or NULL for a text/csv body of candles (as /forecast takes them). */
kd_outcome kd_handle_candle_session_create(kd_app *app, kd_request *r, const json_t *body);
kd_handler kd_handle_session_candles, kd_handle_session_forecast;

/* Journal replay (state-dir): a candle session's creation or append record (candle_sessions.c),
 * a token session's creation or generated pairs (token_sessions.c), applied at start before
 * any request (the journal checked the records' rules first). Not KD_REPLAY_OK: msg says why
 * the session cannot come back (naming the setting, for KD_REPLAY_UNFIT). */
kd_replay_status kd_replay_candle_record(kd_app *app, const kd_journal_record *rec, char *msg,
                                         size_t msglen);
kd_replay_status kd_replay_token_record(kd_app *app, const kd_journal_record *rec, char *msg,
                                        size_t msglen);
/* A creation record's model (the session's), as the journal keeps it. */
void kd_record_model(kd_journal_record *rec, const kd_model *md);
/* The model a creation record names (none: the default one), or NULL with msg when it is no
 * longer loaded or its hash changed: the session is then not restored (KD_REPLAY_REFUSED)
 * and its id's 404 says so. */
const kd_model *kd_replay_model(kd_app *app, const kd_journal_record *rec, char *msg,
                                size_t msglen);
/* How a session that the table would not take back is replayed (sessions.c's status). */
kd_replay_status kd_replay_restore_status(const kd_app *app, kd_session_status st, char *msg,
                                          size_t msglen);

#endif
