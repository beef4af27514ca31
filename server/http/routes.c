/* routes.c — the route table, and the endpoints that do not run the model: health, model
 * description, metrics, and the session table. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle_sessions.h"
#include "inference.h"
#include "json_fields.h"
#include "page.h"

enum {
    EP_PAGE,
    EP_HEALTH,
    EP_MODEL,
    EP_METRICS,
    EP_FORECAST,
    EP_GENERATE,
    EP_TOKENIZE,
    EP_DETOKENIZE,
    EP_SESSIONS,
    EP_SESSION,
    EP_OTHER,
};

const char *const kd_endpoint_names[] = {
    "page",     "health",     "model",    "metrics", "forecast", "generate",
    "tokenize", "detokenize", "sessions", "session", "other",
};
const int kd_endpoint_count = EP_OTHER + 1;

typedef kd_outcome (*handler_fn)(kd_app *app, kd_request *r);

struct kd_route {
    const char *path; /* ending in '/' (but "/"): a prefix followed by one path segment */
    const char *method;
    int endpoint;
    bool is_public, needs_model;
    handler_fn run;
};

/* ---- health, model, metrics ---------------------------------------------------------------- */

static kd_outcome health(kd_app *app, kd_request *r) {
    static const char *const names[] = {"starting", "ok", "draining"};
    const int state = atomic_load(&app->state);
    kd_reply_json(r, state == KD_READY ? 200 : 503, json_pack("{s:s}", "status", names[state]));
    return KD_REPLIED;
}

/* What people call the model: its directory's name (the predictor's, e.g. "Kronos-small",
 * when the parts are given separately). */
static const char *model_name(const kd_config *c) {
    const char *dir = c->model ? c->model : c->predictor ? c->predictor : "";
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    static _Thread_local char name[128];
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    snprintf(name, sizeof name, "%.*s", (int)(n - start), dir + start);
    return name;
}

static json_t *model_json(kd_app *app) {
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(app->model);
    const kr_predictor_config *pc = kr_model_predictor_config(app->model);
    const kd_config *c = &app->cfg;
    kr_pool_stats ps;
    kd_sessions_stats ss;
    kr_pool_stats_get(app->pool, &ps);
    kd_sessions_stats_get(app->sessions, &ss);
    return json_pack(
        "{s:s,s:s,s:i,s:I,"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:b},"
        "s:{s:I,s:I,s:I,s:i,s:i,s:i},"
        "s:{s:i,s:i,s:i},s:i,"
        "s:{s:i,s:i,s:i},"
        "s:{s:I,s:i,s:i,s:i},"
        "s:{s:s}}",
        "name", model_name(c), "version", KR_VERSION, "max_context",
        kr_model_max_context(app->model), "parameters",
        (json_int_t)kr_model_param_count(app->model),
        /* tokenizer */
        "tokenizer", "d_in", tc->d_in, "d_model", tc->d_model, "n_heads", tc->n_heads, "ff_dim",
        tc->ff_dim, "n_enc_layers", tc->n_enc_layers, "n_dec_layers", tc->n_dec_layers, "s1_bits",
        tc->s1_bits, "s2_bits", tc->s2_bits,
        /* predictor */
        "predictor", "d_model", pc->d_model, "n_layers", pc->n_layers, "n_heads", pc->n_heads,
        "ff_dim", pc->ff_dim, "s1_bits", pc->s1_bits, "s2_bits", pc->s2_bits, "learn_te",
        pc->learn_te, "kv_shift", pc->kv_shift,
        /* pool */
        "pool", "bytes_total", (json_int_t)ps.bytes_total, "bytes_used", (json_int_t)ps.bytes_used,
        "block_bytes", (json_int_t)ps.block_bytes, "block_positions", ps.block_len, "blocks_total",
        ps.blocks_total, "blocks_used", ps.blocks_used,
        /* threads */
        "threads", "workers", app->n_workers, "compute", kr_threads(), "http", c->http_threads,
        "queue_size", c->queue_size,
        /* sessions */
        "sessions", "held", ss.count, "max", c->max_sessions, "ttl_seconds", c->session_ttl,
        /* limits */
        "limits", "max_body_bytes", (json_int_t)c->max_body_bytes, "max_candles", c->max_candles,
        "max_horizon", c->max_horizon, "max_samples", c->max_samples,
        /* kernels: the SIMD level of kronosd's own (matmul.c, attention.c) */
        "kernels", "simd", kr_simd_name(kr_simd_level()));
}

static kd_outcome model(kd_app *app, kd_request *r) {
    kd_reply_json(r, 200, model_json(app));
    return KD_REPLIED;
}

static kd_outcome metrics(kd_app *app, kd_request *r) {
    kd_gauges g = {.ready = atomic_load(&app->state) == KD_READY};
    if (atomic_load(&app->state) != KD_STARTING) { /* the parts exist once started */
        kr_pool_stats ps;
        kd_sessions_stats ss;
        kd_workers_stats ws;
        kr_pool_stats_get(app->pool, &ps);
        kd_sessions_stats_get(app->sessions, &ss);
        kd_workers_stats_get(app->workers, &ws);
        g.pool_bytes_used = ps.bytes_used;
        g.pool_bytes_total = ps.bytes_total;
        g.sessions = ss.count;
        g.sessions_busy = ss.busy;
        g.sessions_created = ss.created;
        g.sessions_expired = ss.expired;
        g.sessions_evicted = ss.evicted;
        g.queue_depth = ws.queued;
        g.queue_capacity = ws.capacity;
        g.workers_busy = ws.busy;
        g.workers = ws.threads;
        g.running = ws.busy;
        if (app->sched) {
            kd_sched_stats st;
            kd_sched_stats_get(app->sched, &st);
            g.queue_depth += st.waiting;
            g.running += st.active;
            g.step_rows = st.rows_last_step;
            g.steps = st.steps;
            g.step_rows_total = st.rows;
            g.active_max = st.active_max;
        }
    }
    char *text = kd_metrics_render(app->metrics, &g);
    kd_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text);
    return KD_REPLIED;
}

/* ---- sessions ----------------------------------------------------------------------------- */

void kd_reply_session_error(kd_request *r, kd_session_status st, const char *msg) {
    static const struct {
        int status;
        const char *code;
    } map[] = {
        [KD_SESSION_NOT_FOUND] = {404, "session_not_found"},
        [KD_SESSION_BUSY] = {409, "session_busy"},
        [KD_SESSION_FULL] = {429, "too_many_sessions"},
        [KD_SESSION_OWNER_LIMIT] = {429, "session_limit"},
        [KD_SESSION_ERROR] = {500, "internal"},
    };
    kd_reply_error(r, map[st].status, map[st].code, "%s", msg);
}

/* POST /sessions takes no fields; a body, if any, must be an empty JSON object. */
static bool no_fields(kd_request *r) {
    static const char *const none[] = {NULL};
    char msg[512];
    size_t len;
    if (!kd_request_body(r, &len)) return true;
    json_t *body = kd_request_json(r);
    if (!body) return false;
    const int bad = kd_check_fields(body, "", none, msg, sizeof msg);
    json_decref(body);
    if (bad) kd_reply_error(r, 400, "invalid_request", "%s", msg);
    return !bad;
}

static kd_outcome session_create(kd_app *app, kd_request *r) {
    char id[KD_SESSION_ID_LEN + 1], msg[256];
    size_t len;
    if (kd_request_body(r, &len) && kd_request_is_csv(r)) /* candles as CSV */
        return kd_handle_candle_session_create(app, r, NULL);
    if (kd_request_body(r, &len)) { /* with candles: a candle session */
        json_t *body = kd_request_json(r);
        if (!body) return KD_REPLIED;
        /* normalization alone is a candle session missing its candles: its handler says so */
        const bool candles = json_object_get(body, "candles") != NULL ||
                             json_object_get(body, "normalization") != NULL;
        const kd_outcome out = candles ? kd_handle_candle_session_create(app, r, body) : KD_REPLIED;
        json_decref(body);
        if (candles) return out;
    }
    if (!no_fields(r)) return KD_REPLIED;
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

static kd_outcome session_get(kd_app *app, kd_request *r) {
    kd_session_info info;
    char msg[256];
    kd_session_status st = kd_sessions_info(app->sessions, session_id(r), &info, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:I,s:f,s:f,s:b}", "session", session_id(r), "kind",
                          info.kind ? info.kind->name : "tokens", "length", info.length, "capacity",
                          info.capacity, "bytes", (json_int_t)info.bytes, "idle_seconds",
                          info.idle_seconds, "age_seconds", info.age_seconds, "busy", info.busy);
    if (o && info.kind && kd_candle_session_describe(o, &info) < 0) {
        json_decref(o);
        o = NULL;
    }
    kd_reply_json(r, 200, o);
    return KD_REPLIED;
}

static kd_outcome session_delete(kd_app *app, kd_request *r) {
    char msg[256];
    kd_session_status st = kd_sessions_delete(app->sessions, session_id(r), msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return KD_REPLIED;
    }
    kd_reply_json(r, 200, json_pack("{s:s,s:b}", "session", session_id(r), "deleted", 1));
    return KD_REPLIED;
}

/* ---- table ------------------------------------------------------------------------------------
 */

static const kd_route routes[] = {
    /* clang-format off */
    {"/",           "GET",    EP_PAGE,       true,  false, kd_handle_page},
    {"/example.csv", "GET",   EP_PAGE,       true,  false, kd_handle_example_csv},
    {"/health",     "GET",    EP_HEALTH,     true,  false, health},
    {"/model",      "GET",    EP_MODEL,      false, true,  model},
    {"/metrics",    "GET",    EP_METRICS,    false, false, metrics},
    {"/forecast",   "POST",   EP_FORECAST,   false, true,  kd_handle_forecast},
    {"/generate",   "POST",   EP_GENERATE,   false, true,  kd_handle_generate},
    {"/tokenize",   "POST",   EP_TOKENIZE,   false, true,  kd_handle_tokenize},
    {"/detokenize", "POST",   EP_DETOKENIZE, false, true,  kd_handle_detokenize},
    {"/sessions",   "POST",   EP_SESSIONS,   false, true,  session_create},
    {"/sessions/",  "GET",    EP_SESSION,    false, true,  session_get},
    {"/sessions/",  "DELETE", EP_SESSION,    false, true,  session_delete},
    {"/sessions/*/generate", "POST", EP_GENERATE, false, true, kd_handle_generate},
    {"/sessions/*/candles",  "POST", EP_SESSION, false, true, kd_handle_session_candles},
    {"/sessions/*/forecast", "POST", EP_SESSION, false, true, kd_handle_session_forecast},
    /* clang-format on */
};

/* A '*' in a pattern is one non-empty path segment. */
static bool path_matches(const char *pattern, const char *path) {
    const char *star = strchr(pattern, '*');
    if (star) {
        const size_t pre = (size_t)(star - pattern);
        if (strncmp(pattern, path, pre) != 0) return false;
        const char *seg = path + pre, *end = strchr(seg, '/');
        return end && end > seg && strcmp(end, star + 1) == 0;
    }
    const size_t n = strlen(pattern);
    if (n == 1 || pattern[n - 1] != '/') return strcmp(pattern, path) == 0;
    return strncmp(pattern, path, n) == 0 && path[n] != '\0' && !strchr(path + n, '/');
}

const kd_route *kd_routes_match(const char *method, const char *path, int *endpoint, int *status,
                                char *allow, size_t allowlen) {
    *endpoint = EP_OTHER;
    *status = 404;
    allow[0] = '\0';
    /* HEAD is GET without the body, which libmicrohttpd leaves out by itself */
    const bool head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!path_matches(routes[i].path, path)) continue;
        *endpoint = routes[i].endpoint;
        const bool get = strcmp(routes[i].method, "GET") == 0;
        if (strcmp(routes[i].method, method) == 0 || (head && get)) {
            *status = 0;
            return &routes[i];
        }
        *status = 405;
        const size_t used = strlen(allow);
        snprintf(allow + used, allowlen - used, "%s%s%s", used ? ", " : "", routes[i].method,
                 get ? ", HEAD" : "");
    }
    return NULL;
}

bool kd_path_session(const char *path, char *id, size_t n) {
    static const char prefix[] = "/sessions/", suffix[] = "/generate";
    if (!path_matches("/sessions/*/generate", path)) return false;
    const size_t len = strlen(path) - (sizeof prefix - 1) - (sizeof suffix - 1);
    snprintf(id, n, "%.*s", (int)len, path + sizeof prefix - 1);
    return true;
}

bool kd_route_is_public(const kd_route *rt) {
    return rt->is_public;
}

bool kd_route_needs_model(const kd_route *rt) {
    return rt->needs_model;
}

kd_outcome kd_route_handle(const kd_route *rt, kd_app *app, kd_request *r) {
    return rt->run(app, r);
}
