/* room.c — kd_with_room (room.h). */
#include "room.h"

int kd_with_room(kd_app *app, int (*call)(void *ctx, kr_error *err), void *ctx, kr_error *err) {
    int rc;
    while ((rc = call(ctx, err)) != 0 && err->code == KR_E_POOL_EXHAUSTED &&
           kd_sessions_evict_lru(app->sessions))
        ;
    return rc;
}

int kd_with_planned_room(kd_app *app, const kd_room_plan *plan, kr_error *err,
                         kd_room_refusal *refused) {
    refused->retry_after = 1;
    refused->status =
        kd_sessions_make_room(app->sessions, plan->owner, plan->heap, plan->pool, plan->creating,
                              refused->msg, sizeof refused->msg, &refused->retry_after);
    if (refused->status != KD_SESSION_OK) return -1;
    int rc = plan->call(plan->ctx, err);
    if (rc == 0 || err->code != KR_E_POOL_EXHAUSTED) return rc;
    /* a forecast in flight took the pool between the plan and the work: room once more */
    refused->status =
        kd_sessions_make_room(app->sessions, plan->owner, 0, plan->pool, false, refused->msg,
                              sizeof refused->msg, &refused->retry_after);
    if (refused->status != KD_SESSION_OK) {
        kd_sessions_unreserve(app->sessions, plan->heap);
        return -1;
    }
    return plan->call(plan->ctx, err);
}
