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

/* A session's work (a candle session's creation or append) and the room it plans: owner's
 * heap and KV pool bytes, and whether it creates the session. */
typedef struct {
    const char *owner;
    size_t heap, pool;
    bool creating;
    int (*call)(void *ctx, kr_error *err);
    void *ctx;
} kd_room_plan;

#define KD_ROOM_MSG_MAX 512

/* Why the session table made no room: its status (KD_SESSION_OK: it made room), what it
 * said, and the Retry-After seconds it asks. */
typedef struct {
    kd_session_status status;
    char msg[KD_ROOM_MSG_MAX];
    int retry_after;
} kd_room_refusal;

/* plan's work with its room planned first: kd_sessions_make_room for the plan's bytes, then
 * the call once, and once more only if a request in flight took the pool meanwhile.
 * Refused: -1 with refused set (the call never made); else the call's result, with
 * refused->status KD_SESSION_OK, and then the heap reservation is the caller's to end
 * (kd_sessions_unreserve) once the session counts its bytes; refused, nothing stays
 * reserved. */
int kd_with_planned_room(kd_app *app, const kd_room_plan *plan, kr_error *err,
                         kd_room_refusal *refused);

#endif
