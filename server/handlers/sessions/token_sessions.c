/* token_sessions.c — the session table over HTTP: POST /sessions for a token session (a KV cache
 * that /sessions/{id}/generate appends to), GET /sessions/{id} (any kind: a candle
 * session adds its statistics and last timestamp) and DELETE /sessions/{id}. A POST
 * /sessions with candles is a candle session's (handlers.h); the router chooses. */
#include "session_handlers.h"

#include <string.h>

#include "intake.h"
#include "json_fields.h"
#include "log.h"
#include "replies.h"
#include "submit.h"

/* POST /sessions takes no fields but model (taken out with the body's parse); a body, if
 * any, must be an empty JSON object then (the router parsed it: the body's text is gone
 * once parsed). */
static bool no_fields(kd_request *r, const json_t *body) {
    static const char *const none[] = {"model", NULL};
    char msg[512];
    if (!body) return true;
    const int bad = kd_check_fields(body, "", none, msg, sizeof msg);
    if (bad) kd_reply_error(r, 400, "invalid_request", "%s", msg);
    return !bad;
}

kd_outcome kd_handle_session_create(kd_app *app, kd_request *r, const json_t *body) {
    char id[KD_SESSION_ID_LEN + 1], msg[256];
    if (!no_fields(r, body)) return KD_REPLIED;
    const kd_model *md = kd_pick_model(app, r);
    if (!md) return KD_REPLIED;
    char owner[KD_OWNER_MAX + 1];
    int retry_after = 1;
    kd_request_owner(r, owner, sizeof owner);
    kd_session *held = NULL;
    kd_session_status st =
        kd_sessions_new(app->sessions, owner, id, &held, msg, sizeof msg, &retry_after);
    if (st != KD_SESSION_OK) {
        kd_request_set_retry_after(r, retry_after < 1 ? 1 : retry_after);
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    kd_models_bind_session(&app->models, md);
    if (kd_session_bind(held, md, md->pool) < 0) {
        kd_sessions_discard(app->sessions, held);
        kd_reply_no_memory(r);
        return KD_REPLIED;
    }
    if (app->journal) { /* held until its creation is written */
        kd_journal_record rec = {.type = KD_REC_TOKENS};
        snprintf(rec.id, sizeof rec.id, "%s", id);
        snprintf(rec.owner, sizeof rec.owner, "%s", owner);
        kd_record_model(&rec, md);
        char jmsg[512];
        if (kd_journal_write(app->journal, &rec, jmsg, sizeof jmsg) < 0) {
            kd_sessions_discard(app->sessions, held);
            kd_reply_journal_failed(r,
                                    "the session could not be written to the journal (state-dir), "
                                    "so it was not created",
                                    jmsg);
            return KD_REPLIED;
        }
    }
    kd_sessions_release(app->sessions, held);
    kd_reply_json(r, 201,
                  json_pack("{s:s,s:i,s:i}", "session", id, "max_context",
                            kr_model_max_context(md->m), "ttl_seconds", app->cfg.session_ttl));
    return KD_REPLIED;
}

static const char *session_id(const kd_request *r) {
    return kd_request_path(r) + strlen("/sessions/");
}

kd_outcome kd_handle_session_get(kd_app *app, kd_request *r) {
    kd_session_info info;
    char msg[256];
    kd_session_status st = kd_sessions_info(app->sessions, kd_request_session_owner(r),
                                            session_id(r), &info, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    const kd_model *md = info.model ? info.model : &app->models.v[0];
    kd_request_set_model(r, md);                 /* the answer names it */
    kd_models_release(&app->models, info.model); /* the request holds it now */
    /* a candle session's cache is its series' own: it holds the model's window */
    const int capacity = info.kind ? kr_model_max_context(md->m) : info.capacity;
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
    char msg[KD_MSG_MAX];
    kd_session_status st = kd_sessions_delete(app->sessions, kd_request_session_owner(r),
                                              session_id(r), msg, sizeof msg);
    if (st == KD_SESSION_NOT_KEPT) {
        kd_reply_journal_failed(r,
                                "the session was not deleted: its end could not be written to the "
                                "journal (state-dir), and it goes on as it was",
                                msg);
        return KD_REPLIED;
    }
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    /* the table wrote its end to the journal; on the disk before the answer */
    if (app->journal && kd_journal_commit(app->journal, msg, sizeof msg) < 0) {
        kd_reply_journal_failed(r,
                                "the session was deleted, but the journal could not be synced: it "
                                "may come back after a crash",
                                msg);
        return KD_REPLIED;
    }
    kd_reply_json(r, 200, json_pack("{s:s,s:b}", "session", session_id(r), "deleted", 1));
    return KD_REPLIED;
}

/* ---- journal replay ----------------------------------------------------------------------- */

void kd_record_model(kd_journal_record *rec, const kd_model *md) {
    snprintf(rec->model, sizeof rec->model, "%s", md->id);
    snprintf(rec->model_hash, sizeof rec->model_hash, "%s", md->hash);
}

const kd_model *kd_replay_model(kd_app *app, const kd_journal_record *rec, char *msg,
                                size_t msglen) {
    /* before serving: nothing removes a model meanwhile, so the reference goes at once */
    const kd_model *md = kd_models_acquire(&app->models, rec->model[0] ? rec->model : NULL);
    kd_models_release(&app->models, md);
    if (!md)
        snprintf(msg, msglen, "it was created with model %s (hash %.16s…), which is not loaded",
                 rec->model, rec->model_hash);
    else if (rec->model[0] && strcmp(md->hash, rec->model_hash) != 0)
        snprintf(msg, msglen,
                 "it was created with model %s of hash %s, and that model's files now hash to %s",
                 rec->model, rec->model_hash, md->hash);
    else if (!rec->model[0] && rec->header_fingerprint != md->fingerprint)
        snprintf(msg, msglen,
                 "it was created before models had ids, with a default model of fingerprint "
                 "%016llx, and the default model %s now has fingerprint %016llx",
                 (unsigned long long)rec->header_fingerprint, md->id,
                 (unsigned long long)md->fingerprint);
    else
        return md;
    kd_sessions_refused(app->sessions, rec->id, rec->owner);
    return NULL;
}

kd_replay_status kd_replay_restore_status(const kd_app *app, kd_session_status st, char *msg,
                                          size_t msglen) {
    if (st == KD_SESSION_FULL) {
        snprintf(msg, msglen, "the session table is full: raise max-sessions (now %d)",
                 app->cfg.max_sessions);
        return KD_REPLAY_UNFIT;
    }
    return KD_REPLAY_ERROR; /* msg: out of memory, or an id the journal let through */
}

/* A failure to put the pairs in the cache: which setting does not fit, if one. */
static kd_replay_status cache_failure(const kd_app *app, const kd_model *md, const kr_error *err,
                                      int n, char *msg, size_t msglen) {
    switch (err->code) {
    case KR_E_POOL_EXHAUSTED:
        snprintf(msg, msglen,
                 "the KV pool cannot hold its %d more token pairs: raise pool-bytes "
                 "(now %zu)",
                 n, app->cfg.pool_bytes);
        return KD_REPLAY_UNFIT;
    case KR_E_CAPACITY:
        snprintf(msg, msglen,
                 "its tokens outgrow model %s's context window: raise its max-context (now "
                 "%d) to what it was: %s",
                 md->id, kr_model_max_context(md->m), err->msg);
        return KD_REPLAY_UNFIT;
    case KR_E_INVALID:
        snprintf(msg, msglen, "%s", err->msg);
        return KD_REPLAY_INVALID;
    default:
        snprintf(msg, msglen, "%s", err->msg);
        return KD_REPLAY_ERROR;
    }
}

kd_replay_status kd_replay_token_record(kd_app *app, const kd_journal_record *rec, char *msg,
                                        size_t msglen) {
    kd_session *s = NULL;
    if (rec->type == KD_REC_TOKENS) {
        const kd_model *md = kd_replay_model(app, rec, msg, msglen);
        if (!md) return KD_REPLAY_REFUSED;
        const kd_session_status ss =
            kd_sessions_restore(app->sessions, NULL, NULL, rec->owner, rec->id, &s, msg, msglen);
        if (ss != KD_SESSION_OK) return kd_replay_restore_status(app, ss, msg, msglen);
        kd_models_bind_session(&app->models, md);
        const int bound = kd_session_bind(s, md, md->pool);
        kd_sessions_release(app->sessions, s);
        if (bound < 0) snprintf(msg, msglen, "out of memory");
        return bound < 0 ? KD_REPLAY_ERROR : KD_REPLAY_OK;
    }
    if (kd_sessions_acquire(app->sessions, NULL, rec->id, &s, msg, msglen) != KD_SESSION_OK)
        return KD_REPLAY_INVALID;
    kr_cache *c = kd_session_cache(s);
    const kd_model *md = kd_session_model(s) ? kd_session_model(s) : &app->models.v[0];
    kr_error err = {0};
    const int rc =
        c ? kr_cache_append(&c, 1, rec->s1, rec->s2, rec->stamps, rec->n, NULL, &err) : -1;
    kd_sessions_release(app->sessions, s);
    if (!c) {
        snprintf(msg, msglen, "token pairs for a session that is not a token session");
        return KD_REPLAY_INVALID;
    }
    return rc ? cache_failure(app, md, &err, rec->n, msg, msglen) : KD_REPLAY_OK;
}
