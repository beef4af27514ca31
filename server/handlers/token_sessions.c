/* token_sessions.c — the session table over HTTP: POST /sessions for a token session (a KV cache
 * that /sessions/{id}/generate appends to), GET /sessions/{id} (any kind: a candle
 * session adds its statistics and last timestamp) and DELETE /sessions/{id}. A POST
 * /sessions with candles is a candle session's (handlers.h); the router chooses. */
#include "handlers.h"

#include <string.h>

#include "json_fields.h"
#include "replies.h"

/* POST /sessions takes no fields; a body, if any, must be an empty JSON object (the
 * router parsed it: the body's text is gone once parsed). */
static bool no_fields(kd_request *r, const json_t *body) {
    static const char *const none[] = {NULL};
    char msg[512];
    if (!body) return true;
    const int bad = kd_check_fields(body, "", none, msg, sizeof msg);
    if (bad) kd_reply_error(r, 400, "invalid_request", "%s", msg);
    return !bad;
}

kd_outcome kd_handle_session_create(kd_app *app, kd_request *r, const json_t *body) {
    char id[KD_SESSION_ID_LEN + 1], msg[256];
    if (!no_fields(r, body)) return KD_REPLIED;
    char owner[KD_OWNER_MAX + 1];
    int retry_after = 1;
    kd_request_owner(r, owner, sizeof owner);
    kd_session_status st = kd_sessions_new(app->sessions, owner, id, msg, sizeof msg, &retry_after);
    if (st != KD_SESSION_OK) {
        kd_request_set_retry_after(r, retry_after < 1 ? 1 : retry_after);
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    kd_reply_json(r, 201,
                  json_pack("{s:s,s:i,s:i}", "session", id, "max_context",
                            kr_model_max_context(app->model), "ttl_seconds", app->cfg.session_ttl));
    return KD_REPLIED;
}

static const char *session_id(const kd_request *r) {
    return kd_request_path(r) + strlen("/sessions/");
}

kd_outcome kd_handle_session_get(kd_app *app, kd_request *r) {
    kd_session_info info;
    char msg[256];
    kd_session_status st = kd_sessions_info(app->sessions, session_id(r), &info, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    /* a candle session's cache is its series' own: it holds the model's window */
    const int capacity = info.kind ? kr_model_max_context(app->model) : info.capacity;
    json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:I,s:f,s:f,s:b}", "session", session_id(r), "kind",
                          info.kind ? info.kind->name : "tokens", "length", info.length, "capacity",
                          capacity, "bytes", (json_int_t)info.bytes, "idle_seconds",
                          info.idle_seconds, "age_seconds", info.age_seconds, "busy", info.busy);
    if (o && info.kind && kd_session_extra_json(o, &info) < 0) {
        json_decref(o);
        o = NULL;
    }
    kd_reply_json(r, 200, o);
    return KD_REPLIED;
}

kd_outcome kd_handle_session_delete(kd_app *app, kd_request *r) {
    char msg[256];
    kd_session_status st = kd_sessions_delete(app->sessions, session_id(r), msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    kd_reply_json(r, 200, json_pack("{s:s,s:b}", "session", session_id(r), "deleted", 1));
    return KD_REPLIED;
}
