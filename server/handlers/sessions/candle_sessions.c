/* candle_sessions.c — candle sessions (handlers.h): a kr_series per session, in the
 * session table (its predictor cache in the shared pool, so the table's limits, TTL and LRU
 * eviction apply). Creation and appends run on a worker (tokenizer and prefill work); a
 * session forecast is the forecast job (jobs/forecast_job.h) on the scheduler, its paths
 * forking the series' cache. The session stays busy from the request's checks to its
 * reply, so the series never changes under a forecast. */
#include "session_handlers.h"

#include <stdlib.h>
#include <string.h>

#include "candle_state.h"
#include "forecast_job.h"
#include "intake.h"
#include "json_fields.h"
#include "log.h"
#include "replies.h"
#include "room.h"
#include "series_json.h"
#include "submit.h"
#include "timefmt.h"

/* The session of the path, busy for the caller, and a candle session; NULL after replying. */
static kd_session *acquire_candles(kd_app *app, kd_request *r, const char *what) {
    char id[KD_SESSION_ID_LEN + 9], msg[KD_MSG_MAX];
    kd_session *s = NULL;
    kd_path_session_id(kd_request_path(r), id, sizeof id);
    kd_session_status st =
        kd_sessions_acquire(app->sessions, kd_request_session_owner(r), id, &s, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return NULL;
    }
    if (kd_session_kind_of(s) != &kd_candle_kind) {
        kd_sessions_release(app->sessions, s);
        kd_refuse(app, r, KD_REFUSED_INVALID, 400, "wrong_session_kind",
                  "session %s is a token session: it takes tokens (POST /generate), not %s; "
                  "create a candle session with POST /sessions {\"candles\": ...}",
                  id, what);
        return NULL;
    }
    return s;
}

/* ---- POST /sessions {"candles": ...} ---------------------------------------------------- */

typedef struct {
    kd_work work; /* first: the submit path's pointer is this struct's */
    kd_owned_candles candles;
    kr_candles view; /* the candles, for the core */
    kr_norm norm;    /* pinned statistics, if given */
    kr_series *series;
    kd_candle_calib *calib; /* "calibration", if given */
    const kd_model *md;     /* the model it is bound to (the request's) */
} create_job;

static void create_discard(kd_work *w) {
    create_job *c = (create_job *)w;
    kd_candles_free(&c->candles);
    kd_candle_calib_free(c->calib);
    free(c);
}

static int create_series(void *ctx, kr_error *err) {
    create_job *c = ctx;
    kd_app *app = c->work.app;
    c->series =
        kr_series_create(c->md->m, c->md->pool, &c->view, &c->norm, app->cfg.max_candles, err);
    return c->series ? 0 : -1;
}

/* The new session's answer: 201 with its description. */
static void reply_created(kd_app *app, kd_request *r, const char *id) {
    kd_session_info info;
    char msg[KD_MSG_MAX];
    if (kd_sessions_info(app->sessions, kd_request_session_owner(r), id, &info, msg, sizeof msg) !=
        KD_SESSION_OK) {
        kd_reply_error(r, 404, "session_not_found", "%s", msg); /* evicted at once */
        return;
    }
    kd_models_release(&app->models, info.model); /* the request holds its model */
    json_t *o =
        json_pack("{s:s,s:s,s:i,s:i,s:i}", "session", id, "kind", "candles", "length",
                  info.extra.length, "max_context", kr_model_max_context(kd_request_model(r)->m),
                  "ttl_seconds", app->cfg.session_ttl);
    if (o && kd_session_extra_json(o, &info) < 0) {
        json_decref(o);
        o = NULL;
    }
    kd_reply_json(r, 201, o);
}

/* A refusal for want of room or over a limit: the status with its Retry-After. */
static void reply_refused(kd_request *r, const kd_room_refusal *refused) {
    kd_request_set_retry_after(r, refused->retry_after < 1 ? 1 : refused->retry_after);
    kd_reply_session_error(r, refused->status, refused->msg);
}

static void create_run(kd_work *w) {
    create_job *c = (create_job *)w;
    kd_app *app = w->app;
    kd_request *r = w->r;
    kr_error err = {0};
    char id[KD_SESSION_ID_LEN + 1], msg[KD_MSG_MAX];
    char owner[KD_OWNER_MAX + 1];
    kd_request_owner(r, owner, sizeof owner);
    /* the bytes planned, room made, then the series encoded once */
    size_t pool = 0;
    const kd_model *md = c->md;
    const size_t heap = kr_series_bytes_for(md->m, c->view.n, &pool);
    const kd_room_plan plan = {owner, heap, pool, true, create_series, c};
    kd_room_refusal refused;
    kd_with_planned_room(app, &plan, &err, &refused);
    if (refused.status != KD_SESSION_OK) {
        create_discard(w);
        reply_refused(r, &refused);
        return;
    }
    kr_series *series = c->series;
    candle_state *st = series ? calloc(1, sizeof *st) : NULL;
    if (series && !st) {
        kr_series_free(series);
        kr_fail_code(&err, KR_E_NO_MEMORY, "out of memory for a session");
    }
    const kd_time_form form = c->candles.time_form;
    if (st) st->calib = kd_candle_calib_take(&c->calib);
    create_discard(w);
    if (!st) {
        kd_sessions_unreserve(app->sessions, heap);
        kd_work_fail(app, r, "session", &err);
        return;
    }
    st->series = series;
    st->form = form;
    kd_session *held = NULL;
    refused.retry_after = 1;
    refused.status = kd_sessions_new_with(app->sessions, &kd_candle_kind, st, owner, id, &held,
                                          refused.msg, sizeof refused.msg, &refused.retry_after);
    kd_sessions_unreserve(app->sessions, heap); /* counted as the session's now */
    if (refused.status != KD_SESSION_OK) {      /* the table freed st */
        reply_refused(r, &refused);
        return;
    }
    kd_models_bind_session(&app->models, md);
    kd_session_bind(held, md, md->pool); /* no token cache: nothing to move */
    /* held until its creation is written, so that nothing can end it before */
    if (kd_candle_journal_created(app, held, md, owner, msg, sizeof msg) < 0 ||
        kd_candle_calib_journal_start(app, st->calib, id, msg, sizeof msg) < 0) {
        kd_sessions_discard(app->sessions, held);
        kd_reply_journal_failed(
            r, "the session could not be written to the journal (state-dir), so it was not created",
            msg);
        return;
    }
    kd_sessions_release(app->sessions, held);
    reply_created(app, r, id);
}

static const kd_work_ops create_ops = {.run = create_run, .discard = create_discard};

static const char *const create_fields[] = {"candles", "normalization", "calibration", "model",
                                            NULL};

kd_outcome kd_handle_candle_session_create(kd_app *app, kd_request *r, const json_t *body) {
    char msg[KD_MSG_MAX];
    create_job *c = calloc(1, sizeof *c);
    if (!c) {
        kd_reply_no_memory(r);
        return KD_REPLIED;
    }
    c->norm = (kr_norm){0};
    if (body ? kd_check_fields(body, "", create_fields, msg, sizeof msg) < 0 ||
                   kd_candles_parse(kd_field(body, "candles"), 2, app->cfg.max_candles, &c->candles,
                                    msg, sizeof msg) < 0 ||
                   kd_normalization_parse(kd_field(body, "normalization"), &c->norm, msg,
                                          sizeof msg) < 0
             : kd_body_csv_candles(r, 2, app->cfg.max_candles, &c->candles, msg, sizeof msg) < 0) {
        kd_candles_free(&c->candles);
        free(c);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    if (!(c->md = kd_pick_model(app, r))) {
        kd_candles_free(&c->candles);
        free(c);
        return KD_REPLIED;
    }
    /* a calibration object names its model: checked against the one picked */
    if (body && kd_candle_calib_parse(c->md->fp_hex, kd_field(body, "calibration"), &c->calib, msg,
                                      sizeof msg) < 0) {
        kd_candles_free(&c->candles);
        free(c);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    kd_candles_link(&c->candles, &c->view);
    kd_work_init(&c->work, &create_ops, app, r, 0);
    return kd_submit(&c->work, KD_ON_WORKER);
}

/* ---- POST /sessions/{id}/candles ----------------------------------------------------------- */

typedef struct {
    kd_work work; /* first: the submit path's pointer is this struct's */
    kd_session *session;
    kd_owned_candles candles;
    kr_candles view; /* the candles, for the core */
} append_job;

static void append_discard(kd_work *w) {
    append_job *a = (append_job *)w;
    if (a->session) kd_sessions_release(w->app->sessions, a->session);
    kd_candles_free(&a->candles);
    free(a);
}

/* A restored session's series, built from its pending candles on first append. */
typedef struct {
    kd_app *app;
    candle_state *st;
    const kd_model *md;
} build_call;

static int build_series(void *ctx, kr_error *err) {
    build_call *b = ctx;
    kr_forecast_request req = {0};
    kd_candle_state_request(b->st, &req);
    kr_series *series = kr_series_create(b->md->m, b->md->pool, &req.context, &req.norm,
                                         b->app->cfg.max_candles, err);
    if (!series) return -1;
    b->st->series = series;
    kd_candle_pending_free(b->st->pending);
    b->st->pending = NULL;
    return 0;
}

/* Builds a pending session's series, its room planned; refused->status KD_SESSION_OK (rc
 * the build's) or a refusal. */
static void ensure_series(kd_app *app, const kd_model *md, candle_state *st, const char *owner,
                          int *rc, kr_error *err, kd_room_refusal *refused) {
    *rc = 0;
    refused->status = KD_SESSION_OK;
    if (st->series) return;
    size_t pool = 0;
    const size_t heap = kr_series_bytes_for(md->m, st->pending->n, &pool);
    build_call b = {app, st, md};
    const kd_room_plan plan = {owner, heap, pool, false, build_series, &b};
    *rc = kd_with_planned_room(app, &plan, err, refused);
    if (refused->status == KD_SESSION_OK) kd_sessions_unreserve(app->sessions, heap);
}

/* Compared as instants, as a stateless request compares them: the new candles are on the
 * clock of their last timestamp's offset, and a stateless forecast of the whole series
 * would put every candle on that clock, so the series moves to it when it differs. */
static int append_candles(void *ctx, kr_error *err) {
    append_job *a = ctx;
    candle_state *st = kd_session_state(a->session);
    const int64_t shift =
        (int64_t)(kd_form_offset(&a->candles.time_form) - kd_form_offset(&st->form)) * 60;
    kr_series_set_max_candles(st->series, a->work.app->cfg.max_candles); /* as reloaded */
    return kr_series_append_shifted(st->series, &a->view, shift, err);
}

static void append_run(kd_work *w) {
    append_job *a = (append_job *)w;
    kd_app *app = w->app;
    kd_request *r = w->r;
    candle_state *st = kd_session_state(a->session);
    const kd_model *md = kd_request_model(r);
    kr_error err = {0};
    kd_candles_link(&a->candles, &a->view);
    /* the growth planned: the arrays and encoder blocks, and the predictor's window (a new
     * one, beside the old until it is swapped in, once it slides) */
    char owner[KD_OWNER_MAX + 1];
    kd_request_owner(r, owner, sizeof owner);
    int built = 0;
    kd_room_refusal refused;
    ensure_series(app, md, st, owner, &built, &err, &refused);
    if (refused.status != KD_SESSION_OK || built) {
        append_discard(w);
        if (refused.status != KD_SESSION_OK)
            reply_refused(r, &refused);
        else
            kd_work_fail(app, r, "append", &err);
        return;
    }
    /* at a new offset the whole predictor window is refilled beside the old one */
    const bool shifted = kd_form_offset(&a->candles.time_form) != kd_form_offset(&st->form);
    const int n_after = kr_series_length(st->series) + a->view.n;
    size_t pool_after = 0;
    const size_t heap_after = kr_series_bytes_for(md->m, n_after, &pool_after);
    const size_t heap_now = kr_series_heap_bytes(st->series);
    const size_t pool_now = kr_series_bytes(st->series) - heap_now;
    const size_t heap = heap_after > heap_now ? heap_after - heap_now : 0;
    const size_t pool = shifted || n_after > kr_model_max_context(md->m) ? pool_after
                        : pool_after > pool_now                          ? pool_after - pool_now
                                                                         : 0;
    const kd_room_plan plan = {owner, heap, pool, false, append_candles, a};
    const int rc = kd_with_planned_room(app, &plan, &err, &refused);
    if (refused.status != KD_SESSION_OK) {
        append_discard(w);
        reply_refused(r, &refused);
        return;
    }
    const kd_time_form old_form = st->form;
    if (rc == 0) st->form = a->candles.time_form;
    const int appended = a->candles.n, length = kr_series_length(st->series);
    kd_session_extra e;
    kd_candle_describe(st, &e);
    char id[KD_SESSION_ID_LEN + 9], msg[KD_MSG_MAX];
    kd_path_session_id(kd_request_path(r), id, sizeof id);
    /* written while the session is held: the journal's order is the appends' order */
    if (rc == 0 && kd_candle_journal_appended(app, a->session, &a->view, &a->candles.time_form, msg,
                                              sizeof msg) < 0) {
        char outcome[KD_MSG_MAX];
        if (kd_candle_revert_append(st, appended, old_form) == 0) {
            snprintf(outcome, sizeof outcome,
                     "the candles could not be written to the journal (state-dir), so they were "
                     "not appended: session %s is as it was before this request",
                     id);
        } else {
            const int end_written = kd_sessions_discard(app->sessions, a->session);
            a->session = NULL;
            snprintf(outcome, sizeof outcome,
                     "the candles could not be written to the journal (state-dir), and there was "
                     "no memory to take them back: session %s was ended%s",
                     id,
                     end_written == 0 ? ""
                                      : " here; a restart brings it back as it was before this "
                                        "request");
        }
        append_discard(w);
        kd_sessions_unreserve(app->sessions, heap);
        kd_reply_journal_failed(r, outcome, msg);
        return;
    }
    json_t *anomalies = NULL; /* the candles' outcomes, once they are kept */
    const int resolved = rc || kd_candle_calib_resolve(app, st->calib, length - appended, &a->view,
                                                       &a->candles.time_form, &anomalies, &err);
    append_discard(w); /* releases the session before the client can see the answer */
    kd_sessions_unreserve(app->sessions, heap); /* counted as the session's at its release */
    if (rc || resolved) {
        kd_work_fail(app, r, "append", &err);
        return;
    }
    kd_reply_json(r, 200,
                  json_pack("{s:s,s:i,s:i,s:o,s:o*}", "session", id, "length", length, "appended",
                            appended, "last_timestamp", kd_session_timestamp_json(&e), "anomalies",
                            anomalies));
}

static const kd_work_ops append_ops = {.run = append_run, .discard = append_discard};

static const char *const append_fields[] = {"candles", "model", NULL};

kd_outcome kd_handle_session_candles(kd_app *app, kd_request *r) {
    char msg[KD_MSG_MAX];
    const bool csv = kd_request_is_csv(r);
    json_t *body = csv ? NULL : kd_model_request_json(app, r);
    if (!csv && !body) return KD_REPLIED;
    append_job *a = calloc(1, sizeof *a);
    if (!a) {
        json_decref(body);
        kd_reply_no_memory(r);
        return KD_REPLIED;
    }
    const int bad =
        csv ? kd_body_csv_candles(r, 1, app->cfg.max_candles, &a->candles, msg, sizeof msg) < 0
            : kd_check_fields(body, "", append_fields, msg, sizeof msg) < 0 ||
                  kd_candles_parse(kd_field(body, "candles"), 1, app->cfg.max_candles, &a->candles,
                                   msg, sizeof msg) < 0;
    json_decref(body);
    if (bad) {
        free(a);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    kd_work_init(&a->work, &append_ops, app, r, 0);
    if (!(a->session = acquire_candles(app, r, "candles")) ||
        !kd_session_model_of(app, r, a->session)) {
        append_discard(&a->work);
        return KD_REPLIED;
    }
    /* an append is model work too: past max_context even one candle prefills a window */
    const candle_state *st = kd_session_state(a->session);
    const bool reclock = kd_form_offset(&a->candles.time_form) != kd_form_offset(&st->form);
    /* a session restored from the journal is built by its first append (ensure_series) */
    const double gflop = (st->series ? kr_series_append_flops(st->series, a->candles.n, reclock)
                                     : kr_series_create_flops(kd_request_model(r)->m,
                                                              st->pending->n + a->candles.n)) /
                         1e9;
    if (gflop > (double)app->cfg.max_request_cost) {
        kd_refuse(app, r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "append: %d candles need about %.0f GFLOP of model work; max-request-cost is "
                  "%d GFLOP (append fewer at a time)",
                  a->candles.n, gflop, app->cfg.max_request_cost);
        append_discard(&a->work);
        return KD_REPLIED;
    }
    return kd_submit(&a->work, KD_ON_WORKER);
}

/* ---- POST /sessions/{id}/forecast ------------------------------------------------------------ */

/* The /forecast fields that a session forecast takes: all but the candles and the
 * statistics, which are the session's. */
static const char *const *session_forecast_fields(void) {
    static const char *fields[32];
    if (!fields[0]) {
        const char *const *all = kd_forecast_option_names();
        for (int i = 0, n = 0; all[i] && n < 31; i++)
            if (strcmp(all[i], "normalization") != 0) fields[n++] = all[i];
    }
    return fields;
}

/* The options, parsed against the series' last candle (future_timestamps must follow it)
 * in the form of its timestamps; -1 with a message. */
static int parse_session_forecast(kd_app *app, const kr_model *m, const json_t *body,
                                  const candle_state *st, kd_forecast_input *in, char *msg,
                                  size_t msglen) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    kd_owned_candles last = {.n = 1, .time_form = st->form, .timestamps = malloc(sizeof(int64_t))};
    int bad = -1;
    if (!last.timestamps) {
        snprintf(msg, msglen, "out of memory");
    } else {
        last.timestamps[0] = kd_candle_last_timestamp(st);
        bad = kd_forecast_request_with_candles(body, &last, kr_model_max_context(m), &lim, in, msg,
                                               msglen);
    }
    kd_candles_free(&last);
    return bad ? -1 : 0;
}

kd_outcome kd_handle_session_forecast(kd_app *app, kd_request *r) {
    char msg[KD_MSG_MAX];
    json_t *body = kd_model_request_json(app, r);
    if (!body) return KD_REPLIED;
    if (kd_check_fields(body, "", session_forecast_fields(), msg, sizeof msg) < 0) {
        json_decref(body);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    kd_forecast_input *in = calloc(1, sizeof *in);
    kd_session *session = in ? acquire_candles(app, r, "a forecast request") : NULL;
    const kd_model *md = session ? kd_session_model_of(app, r, session) : NULL;
    if (!md) { /* replied, but out of memory */
        if (!in) kd_reply_no_memory(r);
        if (session) kd_sessions_release(app->sessions, session);
        json_decref(body);
        free(in);
        return KD_REPLIED;
    }
    candle_state *st = kd_session_state(session);
    const int bad = parse_session_forecast(app, md->m, body, st, in, msg, sizeof msg) ||
                    kd_candle_calib_prepare(st->calib, body, in, msg, sizeof msg);
    json_decref(body);
    if (bad || !in->req.use_cache) {
        kd_sessions_release(app->sessions, session);
        kd_refuse_invalid(app, r,
                          bad ? msg
                              : "use_cache: a session forecast runs on the session's cache; "
                                "false is for /forecast");
        kd_series_inputs_free(in, 1);
        return KD_REPLIED;
    }
    /* the request's candles become the series' own */
    kd_candle_state_request(st, &in->req); /* a restored session not yet rebuilt: its candles */
    kd_forecast_intake fi = {.in = in, .n = 1, .answer = KD_ANSWER_JSON, .md = md};
    kd_forecast_work *f = kd_forecast_work_new(app, &fi);
    if (f) {
        kd_forecast_work_on_series(f, session, st->series); /* NULL: a stateless forecast */
        if (st->calib) kd_forecast_work_on_done(f, kd_candle_calib_kept, st->calib);
    } else { /* out of memory: answered by the submit path */
        kd_sessions_release(app->sessions, session);
    }
    return kd_forecast_work_submit(app, r, f, &fi.refused);
}
