/* replies.h — the answers that several handlers give alike: a core error by the error
 * table (errors.h), a session table refusal, a session's id from its path, and what a
 * session of another kind (candles) adds to its description. */
#ifndef KD_REPLIES_H
#define KD_REPLIES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "errors.h"
#include "http.h"

/* A failed core call answered by the error table: its status, code and message
 * ("[what: ]..."). */
void kd_reply_core_error(kd_request *r, const char *what, const kr_error *e);
/* The answer for a session table refusal: 404, 409, 429 (with the Retry-After set before)
 * or 500, with msg. */
void kd_reply_session_error(kd_request *r, kd_session_status st, const char *msg);

/* A session change the journal (state-dir) could not take, why: logged, and answered 500
 * journal_failed with what became of the session (outcome) and why. */
void kd_reply_journal_failed(kd_request *r, const char *outcome, const char *why);

/* For POST /sessions/{id}/generate: true with the id in id[n]. */
bool kd_path_session(const char *path, char *id, size_t n);
/* "/sessions/{id}/..." or "/sessions/{id}" -> id, cut to n - 1 bytes. */
void kd_path_session_id(const char *path, char *id, size_t n);

/* What GET /sessions/{id} (and a candle session's creation) adds for a session of another
 * kind: "normalization" and "last_timestamp". -1 when out of memory. */
int kd_session_extra_json(json_t *o, const kd_session_info *info);
/* A candle session's last timestamp, as its candles wrote it (text, or Unix seconds). */
json_t *kd_session_timestamp_json(const kd_session_extra *e);

#endif
