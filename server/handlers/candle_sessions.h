/* candle_sessions.h — candle sessions: a live series (kr_series) held in the session table,
 * appended to and forecast from incrementally.
 *
 *   POST /sessions {"candles": ..., "normalization"?: ...}   -> 201 {"session", "kind",
 *                                                              "length", "normalization"}
 *   POST /sessions/{id}/candles {"candles": ...} or CSV      -> {"session", "length",
 *                                                              "appended", "last_timestamp"}
 *   POST /sessions/{id}/forecast {the /forecast fields but candles and normalization}
 *                                                            -> a /forecast response
 *
 * A session forecast equals, in everything but "usage", /forecast on the session's candles
 * with "normalization" set to its statistics and the same seed.
 */
#ifndef KD_CANDLE_SESSIONS_H
#define KD_CANDLE_SESSIONS_H

#include <jansson.h>

#include "app.h"
#include "http.h"

/* POST /sessions with candles; body is the parsed request (borrowed), or NULL for a
 * text/csv body of candles (as /forecast takes them). */
kd_outcome kd_handle_candle_session_create(kd_app *app, kd_request *r, const json_t *body);
kd_outcome kd_handle_session_candles(kd_app *app, kd_request *r);
kd_outcome kd_handle_session_forecast(kd_app *app, kd_request *r);
/* What GET /sessions/{id} adds for a candle session. */
int kd_candle_session_describe(json_t *o, const kd_session_info *info);

#endif
