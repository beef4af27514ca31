/* routes.c — the route table and the router that http asks (routes.h): which handler
 * answers which method and path, and the metrics label of each endpoint. */
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "handlers.h"
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
    EP_EVALUATE,
    EP_OTHER,
};

const char *const kd_endpoint_names[] = {
    "page",     "health",     "model",    "metrics", "forecast", "generate",
    "tokenize", "detokenize", "sessions", "session", "evaluate", "other",
};
const int kd_endpoint_count = EP_OTHER + 1;

struct kd_route {
    const char *path; /* ending in '/' (but "/"): a prefix followed by one path segment */
    const char *method;
    int endpoint;
    bool is_public, needs_model;
    kd_handler *run;
};

/* POST /sessions: a candle session when the body has candles (JSON or text/csv; the
 * statistics alone are a candle session missing its candles, and its handler says so),
 * else a token session. */
static kd_outcome sessions_post(kd_app *app, kd_request *r) {
    size_t len;
    if (!kd_request_body(r, &len)) return kd_handle_session_create(app, r);
    if (kd_request_is_csv(r)) return kd_handle_candle_session_create(app, r, NULL);
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    const bool candles =
        json_object_get(body, "candles") != NULL || json_object_get(body, "normalization") != NULL;
    const kd_outcome out =
        candles ? kd_handle_candle_session_create(app, r, body) : kd_handle_session_create(app, r);
    json_decref(body);
    return out;
}

/* ---- the table -------------------------------------------------------------------------- */

static const kd_route routes[] = {
    /* clang-format off */
    {"/",           "GET",    EP_PAGE,       true,  false, kd_handle_page},
    {"/example.csv", "GET",   EP_PAGE,       true,  false, kd_handle_example_csv},
    {"/health",     "GET",    EP_HEALTH,     true,  false, kd_handle_health},
    {"/model",      "GET",    EP_MODEL,      false, true,  kd_handle_model},
    {"/metrics",    "GET",    EP_METRICS,    false, false, kd_handle_metrics},
    {"/forecast",   "POST",   EP_FORECAST,   false, true,  kd_handle_forecast},
    {"/generate",   "POST",   EP_GENERATE,   false, true,  kd_handle_generate},
    {"/tokenize",   "POST",   EP_TOKENIZE,   false, true,  kd_handle_tokenize},
    {"/detokenize", "POST",   EP_DETOKENIZE, false, true,  kd_handle_detokenize},
    {"/sessions",   "POST",   EP_SESSIONS,   false, true,  sessions_post},
    {"/sessions/",  "GET",    EP_SESSION,    false, true,  kd_handle_session_get},
    {"/sessions/",  "DELETE", EP_SESSION,    false, true,  kd_handle_session_delete},
    {"/sessions/*/generate", "POST", EP_GENERATE, false, true, kd_handle_generate},
    {"/sessions/*/candles",  "POST", EP_SESSION, false, true, kd_handle_session_candles},
    {"/sessions/*/forecast", "POST", EP_SESSION, false, true, kd_handle_session_forecast},
    {"/evaluate",   "POST",   EP_EVALUATE,   false, true,  kd_handle_evaluate},
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

static kd_outcome handle(const kd_route *rt, kd_app *app, kd_request *r) {
    return rt->run(app, r);
}

const kd_router kd_routes = {match, is_public, needs_model, handle};
