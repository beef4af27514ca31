/* room.h — making room in the KV pool and the session memory budget. A forecast's core call
 * that found the pool exhausted is retried after the least recently used session idle past
 * session-min-idle is evicted, while there are some (the core changes nothing on such a
 * failure, so each retry starts clean). A session's work plans its bytes first and makes
 * room once, before it runs. (Under the scheduler
 * the core asks for room itself, through serve.c's make_room.) */
#ifndef KD_ROOM_H
#define KD_ROOM_H

#include "app.h"

/* Calls call(ctx, err) until it returns 0, fails otherwise than KR_E_POOL_EXHAUSTED, or no
 * idle session is left to evict; returns its last result. */
int kd_with_room(kd_app *app, int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err);

/* A session's work (a candle session's creation or append) with its room planned first:
 * kd_sessions_make_room for owner's heap and pool bytes (the plan), then call once, and once
 * more only if a request in flight took the pool meanwhile. Refused: -1 with *refused the
 * table's status, msg and *retry_after (call never made); else call's result, with
 * *refused KD_SESSION_OK, and then the heap reservation is the caller's to end
 * (kd_sessions_unreserve) once the session counts its bytes; refused, nothing stays
 * reserved. */
int kd_with_planned_room(kd_app *app, const char *owner, size_t heap, size_t pool, bool creating,
                         int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err,
                         kd_session_status *refused, char *msg, size_t msglen, int *retry_after);

#endif
