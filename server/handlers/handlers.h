/* handlers.h — the route handlers, one .c file a resource; the router (app/routes.c) maps
 * methods and paths to them. Each reads and checks its request on the HTTP thread and
 * answers, or hands the work to the submit path (jobs/submit.h) and returns KD_DEFERRED.
 *
 *   forecast.c         POST /forecast (one series, or many with "series")
 *   generate.c         POST /generate, POST /sessions/{id}/generate
 *   token_sessions.c   POST /sessions (no candles), GET and DELETE /sessions/{id}
 *   candle_sessions.c  POST /sessions with candles, POST /sessions/{id}/candles and
 *                      /sessions/{id}/forecast
 *   tokens.c           POST /tokenize, POST /detokenize
 *   evaluate.c         POST /evaluate
 *   status.c           GET /health, GET /model, GET /metrics
 */
#ifndef KD_HANDLERS_H
#define KD_HANDLERS_H

#include <jansson.h>

#include "app.h"
#include "http.h"

/* A route's handler: KD_REPLIED with the answer set on r, or KD_DEFERRED when the work
 * went to the submit path (which replies). */
typedef kd_outcome kd_handler(kd_app *app, kd_request *r);

/* forecast.c: candles in (JSON, or text/csv with the other fields in the query), a
 * forecast out (JSON, or CSV with format=csv or Accept: text/csv); with "series", many
 * series in one request, answered {"series": [...]} (series_json.h). */
kd_handler kd_handle_forecast;

/* generate.c: tokens appended to a cache (a session's, or a temporary one) and new tokens
 * sampled from it, exact autoregressive decoding on the scheduler (tokens_json.h). */
kd_handler kd_handle_generate;

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

/* tokens.c: candles (JSON or text/csv) to token pairs and the statistics used, and token
 * pairs and statistics back to candles; both on a worker (tokens_json.h). */
kd_handler kd_handle_tokenize, kd_handle_detokenize;

/* evaluate.c: a walk-forward evaluation of the model on a series (evaluate_json.h): every
 * origin's forecast on the scheduler, scored against the actual closes and two baselines. */
kd_handler kd_handle_evaluate;

/* models.c: GET /models (every model: id, hash, shapes, parameters, bytes, kernels,
 * loaded_at) and GET /models/{id} (one; 404 model_not_found naming the others). */
kd_handler kd_handle_models, kd_handle_model_get, kd_handle_model_load, kd_handle_model_unload;

/* status.c: what the server is and does. */
kd_handler kd_handle_health, kd_handle_model, kd_handle_metrics;

#endif
