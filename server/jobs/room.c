/* room.c — kd_with_room (room.h). */
#include "room.h"

int kd_with_room(kd_app *app, int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err) {
    int rc;
    while ((rc = call(ctx, err)) != 0 && err->code == KR_E_POOL_EXHAUSTED &&
           kd_sessions_evict_lru(app->sessions))
        ;
    return rc;
}

int kd_with_planned_room(kd_app *app, const char *owner, size_t heap, size_t pool, bool creating,
                         int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err,
                         kd_session_status *refused, char *msg, size_t msglen, int *retry_after) {
    *refused =
        kd_sessions_make_room(app->sessions, owner, heap, pool, creating, msg, msglen, retry_after);
    if (*refused != KD_SESSION_OK) return -1;
    int rc = call(ctx, err);
    if (rc == 0 || err->code != KR_E_POOL_EXHAUSTED) return rc;
    /* a forecast in flight took the pool between the plan and the work: room once more */
    *refused =
        kd_sessions_make_room(app->sessions, owner, 0, pool, false, msg, msglen, retry_after);
    if (*refused != KD_SESSION_OK) {
        kd_sessions_unreserve(app->sessions, heap);
        return -1;
    }
    return call(ctx, err);
}
