/* room.c — kd_with_room (room.h). */
#include "room.h"

int kd_with_room(kd_app *app, int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err) {
    int rc;
    while ((rc = call(ctx, err)) != 0 && err->code == KR_E_POOL_EXHAUSTED &&
           kd_sessions_evict_lru(app->sessions))
        ;
    return rc;
}
