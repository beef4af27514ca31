/* candle_sessions.c — candle sessions (candle_sessions.h): a kr_series per session, in the
 * session table (its predictor cache in the shared pool, so the table's limits, TTL and LRU
 * eviction apply). Creation and appends run on a worker (tokenizer and prefill work); a
 * session forecast runs on the scheduler like /forecast, its paths forking the series'
 * cache. The session stays busy from the request's checks to its reply, so the series never
 * changes under a forecast. */
#include "candle_sessions.h"
#include "routes.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candles_csv.h"
#include "forecast_json.h"
#include "inference.h"
#include "json_fields.h"
#include "timefmt.h"

#define MSG_MAX 512

/* ---- the session's state -------------------------------------------------------------- */

typedef struct {
    kr_series *series;
    kd_time_form form; /* how the last candles' timestamps were written */
} candle_state;

static void state_free(void *p) {
    candle_state *st = p;
    if (!st) return;
    kr_series_free(st->series);
    free(st);
}

static void state_describe(const void *p, kd_session_extra *out) {
    const candle_state *st = p;
    memset(out, 0, sizeof *out);
    out->length = kr_series_length(st->series);
    out->bytes = kr_series_bytes(st->series);
    out->last_timestamp = kr_series_last_timestamp(st->series);
    if (!st->form.unix_seconds)
        kd_format_timestamp(out->last_timestamp, st->form.tz_offset_min, st->form.has_tz,
                            out->last_timestamp_text, sizeof out->last_timestamp_text);
    kr_series_stats(st->series, out->mean, out->std);
}

static const kd_session_kind candle_kind = {"candles", state_free, state_describe};

static json_t *timestamp_json(const kd_session_extra *e) {
    return e->last_timestamp_text[0] ? json_string(e->last_timestamp_text)
                                     : json_integer((json_int_t)e->last_timestamp);
}

int kd_candle_session_describe(json_t *o, const kd_session_info *info) {
    const kd_session_extra *e = &info->extra;
    return json_object_set_new(o, "normalization", kd_normalization_json(e->mean, e->std)) < 0 ||
                   json_object_set_new(o, "last_timestamp", timestamp_json(e)) < 0
               ? -1
               : 0;
}

/* ---- shared ---------------------------------------------------------------------------- */

/* "/sessions/{id}/..." -> id (at most KD_SESSION_ID_LEN + 8 bytes, for the 404 message). */
static void path_id(const kd_request *r, char *id, size_t n) {
    const char *p = kd_request_path(r) + strlen("/sessions/");
    size_t len = strcspn(p, "/");
    if (len >= n) len = n - 1;
    memcpy(id, p, len);
    id[len] = '\0';
}

/* The session of the path, busy for the caller, and a candle session; NULL after replying. */
static kd_session *acquire_candles(kd_app *app, kd_request *r, const char *what) {
    char id[KD_SESSION_ID_LEN + 9], msg[MSG_MAX];
    kd_session *s = NULL;
    path_id(r, id, sizeof id);
    kd_session_status st = kd_sessions_acquire(app->sessions, id, &s, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return NULL;
    }
    if (kd_session_kind_of(s) != &candle_kind) {
        kd_sessions_release(app->sessions, s);
        kd_reply_error(r, 400, "wrong_session_kind",
                       "session %s is a token session: it takes tokens (POST /generate), not %s; "
                       "create a candle session with POST /sessions {\"candles\": ...}",
                       id, what);
        return NULL;
    }
    return s;
}

/* The candles of a text/csv body (as /forecast takes them); -1 with a message. */
static int csv_body_candles(kd_request *r, int min_count, int max_count, kd_candles *out, char *msg,
                            size_t msglen) {
    size_t len = 0;
    const char *body = kd_request_body(r, &len);
    return kd_candles_csv_parse(body ? body : "", len, min_count, max_count, out, msg, msglen);
}

/* Runs a series call, evicting idle sessions while the pool is exhausted. */
#define WITH_ROOM(app, call, err)                                                                  \
    while ((call) != 0 && (err).code == KR_E_POOL_EXHAUSTED &&                                     \
           kd_sessions_evict_lru((app)->sessions))

/* ---- POST /sessions {"candles": ...} ---------------------------------------------------- */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_candles candles;
    kr_candles view; /* the candles, for the core */
    kr_norm norm;    /* pinned statistics, if given */
} create_job;

static void run_create(kd_job *j) {
    create_job *c = (create_job *)j;
    kd_app *app = c->app;
    kd_request *r = c->r;
    kr_error err = {0};
    kr_series *series = NULL;
    WITH_ROOM(app,
              !(series = kr_series_create(app->model, app->pool, &c->view, &c->norm,
                                          app->cfg.max_candles, &err)),
              err);
    candle_state *st = series ? calloc(1, sizeof *st) : NULL;
    if (series && !st) {
        kr_series_free(series);
        kr_fail_code(&err, KR_E_NO_MEMORY, "out of memory for a session");
    }
    const kd_time_form form = c->candles.time_form;
    kd_candles_free(&c->candles);
    free(c);
    if (!st) {
        kd_reply_core_error(r, "session", &err);
        return;
    }
    st->series = series;
    st->form = form;
    char id[KD_SESSION_ID_LEN + 1], msg[MSG_MAX];
    char owner[KD_OWNER_MAX + 1];
    int retry_after = 1;
    kd_request_owner(r, owner, sizeof owner);
    kd_session_status ss = kd_sessions_new_with(app->sessions, &candle_kind, st, owner, id, msg,
                                                sizeof msg, &retry_after);
    if (ss != KD_SESSION_OK) { /* the table freed st */
        kd_request_set_retry_after(r, retry_after < 1 ? 1 : retry_after);
        kd_reply_session_error(r, ss, msg);
        return;
    }
    kd_session_info info;
    if (kd_sessions_info(app->sessions, id, &info, msg, sizeof msg) != KD_SESSION_OK) {
        kd_reply_error(r, 404, "session_not_found", "%s", msg); /* evicted at once */
        return;
    }
    json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:i}", "session", id, "kind", "candles", "length",
                          info.extra.length, "max_context", kr_model_max_context(app->model),
                          "ttl_seconds", app->cfg.session_ttl);
    if (o && kd_candle_session_describe(o, &info) < 0) {
        json_decref(o);
        o = NULL;
    }
    kd_reply_json(r, 201, o);
}

static const char *const create_fields[] = {"candles", "normalization", NULL};

kd_outcome kd_handle_candle_session_create(kd_app *app, kd_request *r, const json_t *body) {
    char msg[MSG_MAX];
    create_job *c = calloc(1, sizeof *c);
    if (!c) {
        kd_reply_error(r, 500, "internal", "out of memory queueing the request");
        return KD_REPLIED;
    }
    c->norm = (kr_norm){0};
    if (body ? kd_check_fields(body, "", create_fields, msg, sizeof msg) < 0 ||
                   kd_candles_parse(kd_field(body, "candles"), 2, app->cfg.max_candles, &c->candles,
                                    msg, sizeof msg) < 0 ||
                   kd_normalization_parse(kd_field(body, "normalization"), &c->norm, msg,
                                          sizeof msg) < 0
             : csv_body_candles(r, 2, app->cfg.max_candles, &c->candles, msg, sizeof msg) < 0) {
        kd_candles_free(&c->candles);
        free(c);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    kd_candles_link(&c->candles, &c->view);
    c->app = app;
    c->r = r;
    c->job.run = run_create;
    if (kd_request_defer(r, &c->job) < 0) {
        kd_candles_free(&c->candles);
        free(c);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}

/* ---- POST /sessions/{id}/candles ----------------------------------------------------------- */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_session *session;
    kd_candles candles;
} append_job;

static void run_append(kd_job *j) {
    append_job *a = (append_job *)j;
    kd_app *app = a->app;
    kd_request *r = a->r;
    candle_state *st = kd_session_state(a->session);
    kr_candles req;
    kr_error err = {0};
    kd_candles_link(&a->candles, &req);
    int rc;
    WITH_ROOM(app, rc = kr_series_append(st->series, &req, &err), err);
    if (rc == 0) st->form = a->candles.time_form;
    const int appended = a->candles.n, length = kr_series_length(st->series);
    kd_session_extra e;
    state_describe(st, &e);
    char id[KD_SESSION_ID_LEN + 9];
    path_id(r, id, sizeof id);
    kd_sessions_release(app->sessions, a->session);
    kd_candles_free(&a->candles);
    free(a);
    if (rc) {
        kd_reply_core_error(r, "append", &err);
        return;
    }
    kd_reply_json(r, 200,
                  json_pack("{s:s,s:i,s:i,s:o}", "session", id, "length", length, "appended",
                            appended, "last_timestamp", timestamp_json(&e)));
}

static const char *const append_fields[] = {"candles", NULL};

kd_outcome kd_handle_session_candles(kd_app *app, kd_request *r) {
    char msg[MSG_MAX];
    const bool csv = kd_request_is_csv(r);
    json_t *body = csv ? NULL : kd_request_json(r);
    if (!csv && !body) return KD_REPLIED;
    append_job *a = calloc(1, sizeof *a);
    if (!a) {
        json_decref(body);
        kd_reply_error(r, 500, "internal", "out of memory queueing the request");
        return KD_REPLIED;
    }
    const int bad =
        csv ? csv_body_candles(r, 1, app->cfg.max_candles, &a->candles, msg, sizeof msg) < 0
            : kd_check_fields(body, "", append_fields, msg, sizeof msg) < 0 ||
                  kd_candles_parse(kd_field(body, "candles"), 1, app->cfg.max_candles, &a->candles,
                                   msg, sizeof msg) < 0;
    json_decref(body);
    if (bad) {
        free(a);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    if (!(a->session = acquire_candles(app, r, "candles"))) {
        kd_candles_free(&a->candles);
        free(a);
        return KD_REPLIED;
    }
    a->app = app;
    a->r = r;
    a->job.run = run_append;
    if (kd_request_defer(r, &a->job) < 0) {
        kd_sessions_release(app->sessions, a->session);
        kd_candles_free(&a->candles);
        free(a);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}

/* ---- POST /sessions/{id}/forecast ------------------------------------------------------------ */

typedef struct {
    kd_job job;        /* first: the worker's pointer is this struct's */
    kd_sched_job sjob; /* or the scheduler's */
    kd_app *app;
    kd_request *r;
    kd_session *session;
    const kr_series *series;
    kd_forecast_input in;
    kr_forecast_result res;
    kd_request_watch watch;
} forecast_job;

static void forecast_finish(forecast_job *f, const kr_error *err) {
    kd_app *app = f->app;
    kd_request *r = f->r;
    json_t *body = NULL;
    if (err->code == 0) {
        kd_metrics_add_tokens(app->metrics, (unsigned long long)f->res.usage.generated_tokens);
        body = kd_forecast_response_json(&f->in, &f->res);
        kr_forecast_result_free(&f->res);
    }
    const kr_error e = *err;
    kd_sessions_release(app->sessions, f->session);
    kd_forecast_input_free(&f->in);
    free(f);
    if (e.code)
        kd_reply_core_error(r, "forecast", &e);
    else
        kd_reply_json(r, 200, body);
}

static int forecast_add(kr_sched *ks, kd_sched_job *sj, kr_error *err) {
    forecast_job *f = (forecast_job *)((char *)sj - offsetof(forecast_job, sjob));
    return kr_sched_add_forecast_series(ks, f->series, &f->in.req, &f->res, sj, err);
}

static void forecast_done(kd_sched_job *sj, const kr_error *err) {
    forecast_finish((forecast_job *)((char *)sj - offsetof(forecast_job, sjob)), err);
}

/* Batching off: a scheduler of its own on the worker, for this one job. */
static void worker_done(void *tag, const kr_error *err, void *ctx) {
    (void)ctx;
    *(kr_error *)tag = *err;
}

static void run_forecast(kd_job *j) {
    forecast_job *f = (forecast_job *)j;
    kr_error err = {0}, done = {0};
    kr_sched_config cfg = {.done = worker_done};
    kr_sched *ks = kr_sched_create(f->app->model, f->app->pool, &cfg, &err);
    if (ks && kr_sched_add_forecast_series(ks, f->series, &f->in.req, &f->res, &done, &err) == 0) {
        while (kr_sched_step(ks) > 0)
            ;
        err = done;
    }
    kr_sched_free(ks);
    forecast_finish(f, &err);
}

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

kd_outcome kd_handle_session_forecast(kd_app *app, kd_request *r) {
    const kd_forecast_limits lim = {app->cfg.max_candles, app->cfg.max_horizon,
                                    app->cfg.max_samples};
    char msg[MSG_MAX];
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    forecast_job *f = calloc(1, sizeof *f);
    if (!f || kd_check_fields(body, "", session_forecast_fields(), msg, sizeof msg) < 0) {
        json_decref(body);
        free(f);
        if (f)
            kd_reply_error(r, 400, "invalid_request", "%s", msg);
        else
            kd_reply_error(r, 500, "internal", "out of memory queueing the request");
        return KD_REPLIED;
    }
    if (!(f->session = acquire_candles(app, r, "a forecast request"))) {
        json_decref(body);
        free(f);
        return KD_REPLIED;
    }
    candle_state *st = kd_session_state(f->session);
    f->series = st->series;
    /* the options parse against the series' last candle (future_timestamps must follow it)
     * and keep its timestamps' form; then the request's candles become the series' own */
    kd_candles last = {.n = 1, .time_form = st->form, .timestamps = malloc(sizeof(int64_t))};
    int bad = -1;
    if (!last.timestamps) {
        snprintf(msg, sizeof msg, "out of memory");
    } else {
        last.timestamps[0] = kr_series_last_timestamp(st->series);
        bad = kd_forecast_request_with_candles(body, &last, kr_model_max_context(app->model), &lim,
                                               &f->in, msg, sizeof msg);
    }
    kd_candles_free(&last);
    json_decref(body);
    if (bad) {
        kd_sessions_release(app->sessions, f->session);
        free(f);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    kr_series_request(st->series, &f->in.req);
    f->app = app;
    f->r = r;
    f->watch = (kd_request_watch){r, kd_deadline_of(app, f->in.timeout_ms)};
    f->in.req.cancel = (kr_cancel){kd_watch_check, &f->watch};
    f->job.run = run_forecast;
    f->sjob.add = forecast_add;
    f->sjob.done = forecast_done;
    if (!f->in.req.use_cache) {
        kd_reply_error(r, 400, "invalid_request",
                       "use_cache: a session forecast runs on the session's cache; false is "
                       "for /forecast");
    } else if (kd_admit_forecast(app, r, &f->in.req) &&
               (app->sched ? kd_request_defer_sched(r, &f->sjob) : kd_request_defer(r, &f->job)) ==
                   0) {
        kd_metrics_count(app->metrics, KD_COUNT_ADMITTED);
        return KD_DEFERRED;
    }
    kd_sessions_release(app->sessions, f->session);
    kd_forecast_input_free(&f->in);
    free(f);
    return KD_REPLIED;
}
