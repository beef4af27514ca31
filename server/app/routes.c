/* routes.c — the route table and the router that http asks (routes.h): which handler
 * answers which method and path, the metrics label of each endpoint, and each route's
 * operation in the API's document (openapi.h), which GET /openapi.json answers. A new route is a
 * row here and its operation, under the row's name, in openapi_parts.json. */
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "session_handlers.h"
#include "intake.h"
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
    EP_OPENAPI,
    EP_EVALUATE,
    EP_MODELS,
    EP_FINETUNE,
    EP_OTHER,
};

const char *const kd_endpoint_names[] = {
    "page",     "health",  "model",   "metrics",  "forecast", "generate", "tokenize", "detokenize",
    "sessions", "session", "openapi", "evaluate", "models",   "finetune", "other",
};
const int kd_endpoint_count = EP_OTHER + 1;

struct kd_route {
    const char *path; /* ending in '/' (but "/"): a prefix followed by one path segment */
    const char *method;
    int endpoint;
    bool is_public, needs_model;
    bool reads_query; /* its handler reads the query (a text/csv body's fields, format) */
    kd_handler *run;
    const char *operation; /* its part in openapi_parts.json, its operationId */
};

/* POST /sessions: a candle session when the body has candles (JSON or text/csv; the
 * statistics alone are a candle session missing its candles, and its handler says so),
 * else a token session. */
static kd_outcome sessions_post(kd_app *app, kd_request *r) {
    size_t len;
    if (!kd_request_body(r, &len)) return kd_handle_session_create(app, r, NULL);
    if (kd_request_is_csv(r)) return kd_handle_candle_session_create(app, r, NULL);
    kd_refused refused;
    json_t *body = kd_request_json(r, &refused);
    if (!body) {
        kd_reply_refused(r, &refused); /* before either session route reads it: not counted */
        return KD_REPLIED;
    }
    const bool candles =
        json_object_get(body, "candles") != NULL || json_object_get(body, "normalization") != NULL;
    const kd_outcome out = candles ? kd_handle_candle_session_create(app, r, body)
                                   : kd_handle_session_create(app, r, body);
    json_decref(body);
    return out;
}

/* GET /openapi.json: the document of the table below; public, like /health. */
static kd_outcome openapi_get(kd_app *app, kd_request *r) {
    char err[256];
    const kd_openapi_figures f = kd_openapi_figures_of(app);
    json_t *doc = kd_routes_document(&f, err, sizeof err);
    if (!doc) {
        kd_reply_error(r, 500, "internal", "%s", err);
        return KD_REPLIED;
    }
    kd_reply_json(r, 200, doc);
    return KD_REPLIED;
}

/* ---- the table -------------------------------------------------------------------------- */

static const kd_route routes[] = {
    /* clang-format off */
    /* path                  method    endpoint       public model  query  handler                       operation */
    {"/",                    "GET",    EP_PAGE,       true,  false, false, kd_handle_page,             "page"},
    {"/example.csv",         "GET",    EP_PAGE,       true,  false, false, kd_handle_example_csv,      "exampleCsv"},
    {"/health",              "GET",    EP_HEALTH,     true,  false, false, kd_handle_health,           "health"},
    {"/openapi.json",        "GET",    EP_OPENAPI,    true,  false, false, openapi_get,                "openapi"},
    {"/model",               "GET",    EP_MODEL,      false, true,  false, kd_handle_model,            "model"},
    {"/models",              "GET",    EP_MODELS,     false, true,  false, kd_handle_models,           "listModels"},
    {"/models/",             "GET",    EP_MODELS,     false, true,  false, kd_handle_model_get,        "getModel"},
    /* public to the API keys: its handler asks for an admin key */
    {"/models",              "POST",   EP_MODELS,     true,  true,  false, kd_handle_model_load,       "loadModel"},
    {"/finetune",            "POST",   EP_FINETUNE,   true,  true,  true,  kd_handle_finetune_post,    "startFinetune"},
    {"/finetune",            "GET",    EP_FINETUNE,   true,  true,  false, kd_handle_finetune_list,    "listFinetunes"},
    {"/finetune/",           "GET",    EP_FINETUNE,   true,  true,  false, kd_handle_finetune_get,     "getFinetune"},
    {"/finetune/",           "DELETE", EP_FINETUNE,   true,  true,  false, kd_handle_finetune_delete,  "cancelFinetune"},
    {"/models/",             "DELETE", EP_MODELS,     true,  true,  false, kd_handle_model_unload,     "unloadModel"},
    {"/metrics",             "GET",    EP_METRICS,    false, false, false, kd_handle_metrics,          "metrics"},
    {"/forecast",            "POST",   EP_FORECAST,   false, true,  true,  kd_handle_forecast,         "forecast"},
    {"/generate",            "POST",   EP_GENERATE,   false, true,  false, kd_handle_generate,         "generate"},
    {"/tokenize",            "POST",   EP_TOKENIZE,   false, true,  true,  kd_handle_tokenize,         "tokenize"},
    {"/detokenize",          "POST",   EP_DETOKENIZE, false, true,  false, kd_handle_detokenize,       "detokenize"},
    {"/sessions",            "POST",   EP_SESSIONS,   false, true,  false, sessions_post,              "createSession"},
    {"/sessions/",           "GET",    EP_SESSION,    false, true,  false, kd_handle_session_get,      "getSession"},
    {"/sessions/",           "DELETE", EP_SESSION,    false, true,  false, kd_handle_session_delete,   "deleteSession"},
    {"/sessions/*/generate", "POST",   EP_GENERATE,   false, true,  false, kd_handle_generate,         "sessionGenerate"},
    {"/sessions/*/candles",  "POST",   EP_SESSION,    false, true,  false, kd_handle_session_candles,  "appendCandles"},
    {"/sessions/*/forecast", "POST",   EP_SESSION,    false, true,  false, kd_handle_session_forecast, "sessionForecast"},
    {"/evaluate",            "POST",   EP_EVALUATE,   false, true,  true,  kd_handle_evaluate,         "evaluate"},
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

static const kd_route *match(const char *method, const char *path, int *endpoint, int *status,
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

static bool is_public(const kd_route *rt) {
    return rt->is_public;
}

static bool needs_model(const kd_route *rt) {
    return rt->needs_model;
}

/* A POST route whose handler reads no query takes all its fields in the body: a query
 * parameter there would be silently ignored (/sessions/{id}/forecast?format=csv answering
 * JSON), so it is refused as /forecast refuses an unknown one. The GET routes ignore
 * queries (cache busters). */
static bool refuses_query(const kd_route *rt) {
    return strcmp(rt->method, "POST") == 0 && !rt->reads_query;
}

static kd_outcome handle(const kd_route *rt, kd_app *app, kd_request *r) {
    if (refuses_query(rt)) {
        char msg[KD_MSG_MAX];
        kd_query q = {.known = NULL};
        if (!kd_read_query(app, r, &q, msg, sizeof msg)) return KD_REPLIED;
        json_decref(q.opts);
    }
    return rt->run(app, r);
}

const kd_router kd_routes = {match, is_public, needs_model, handle};

const size_t kd_route_count = sizeof routes / sizeof routes[0];

kd_route_doc kd_route_doc_at(size_t i) {
    const kd_route *rt = &routes[i];
    return (kd_route_doc){rt->path, rt->method, rt->operation, rt->is_public, rt->needs_model};
}

json_t *kd_routes_document(const kd_openapi_figures *f, char *err, size_t errlen) {
    kd_route_doc rows[sizeof routes / sizeof routes[0]];
    for (size_t i = 0; i < kd_route_count; i++)
        rows[i] = kd_route_doc_at(i);
    return kd_openapi_document(f, rows, kd_route_count, err, errlen);
}
