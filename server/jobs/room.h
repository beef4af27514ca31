/* room.h — the one evict-and-retry loop: a core call that found the KV pool exhausted is
 * retried after the least recently used idle session is evicted, while there are some. The
 * core changes nothing on such a failure, so each retry starts clean. (Under the scheduler
 * the core asks for room itself, through serve.c's make_room.) */
#ifndef KD_ROOM_H
#define KD_ROOM_H

#include "app.h"

/* Calls call(ctx, err) until it returns 0, fails otherwise than KR_E_POOL_EXHAUSTED, or no
 * idle session is left to evict; returns its last result. */
int kd_with_room(kd_app *app, int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err);

#endif
