/* http.h — the HTTP front end on libmicrohttpd: requests and replies, not routes.
 *
 * MHD's own threads accept connections, read bodies (up to max-body-bytes), ask the router
 * handed to kd_http_start which route a request takes, check the API key and run the
 * route's handler. A handler that hands its work to another thread suspends the request
 * (kd_request_suspend); that thread's reply resumes the connection. Every request gets an
 * id (X-Request-Id, the client's if it sent a sane one) and one access-log line when it
 * completes.
 */
#ifndef KD_HTTP_H
#define KD_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "model_field.h"

typedef struct kd_http kd_http;
typedef struct kd_request kd_request;

typedef enum { KD_REPLIED, KD_DEFERRED } kd_outcome;

/* A route, as the router above defines it; http only hands it back. */
typedef struct kd_route kd_route;

/* What http asks of the router (all called on HTTP threads, concurrently). */
typedef struct kd_router {
    /* The route for method and path. NULL with *status 404, or 405 and the allowed methods
     * in allow ("GET, DELETE"). *endpoint is the metrics label's index either way. */
    const kd_route *(*match)(const char *method, const char *path, int *endpoint, int *status,
                             char *allow, size_t allowlen);
    /* Whether the route answers without the API key (/health). */
    bool (*is_public)(const kd_route *rt);
    /* Whether the route needs the loaded model (503 while starting or draining otherwise). */
    bool (*needs_model)(const kd_route *rt);
    /* Runs the route's handler on the whole request. */
    kd_outcome (*handle)(const kd_route *rt, kd_app *app, kd_request *r);
} kd_router;

/* Listens on cfg.host:cfg.port and routes with router (kept, not copied); NULL after a
 * message in err. */
kd_http *kd_http_start(kd_app *app, const kd_router *router, char *err, size_t errlen);
unsigned kd_http_port(const kd_http *h); /* the bound port (for port 0) */
/* The guard's deadlines (guard.h), for SIGHUP. */
void kd_http_set_timeouts(kd_http *h, int read_timeout, int connection_timeout);
/* Requests received and not yet completed. */
int kd_http_in_flight(kd_http *h);
/* Closes every connection and frees h. No request may be deferred any more. */
void kd_http_stop(kd_http *h);

/* ---- for route handlers ---------------------------------------------------------------- */

const char *kd_request_id(const kd_request *r);
const char *kd_request_path(const kd_request *r);
const char *kd_request_method(const kd_request *r);

/* The raw body (not NUL-terminated; NULL when empty). */
const char *kd_request_body(const kd_request *r, size_t *len);
/* A request header, or NULL. */
const char *kd_request_header(const kd_request *r, const char *name);
/* Whether the body is declared text/csv (Content-Type, parameters ignored). */
bool kd_request_is_csv(const kd_request *r);
/* Calls fn for each query parameter in order (value NULL for `?key` without '='), with
 * the decoded lengths (`%00` decodes to a NUL inside the string); stops at the first
 * nonzero return and returns it. */
typedef int (*kd_query_fn)(void *ctx, const char *key, size_t key_len, const char *value,
                           size_t value_len);
int kd_request_query_each(kd_request *r, kd_query_fn fn, void *ctx);

/* A request refused before any work: its status, error code and message, and the reason
 * it is counted as (metrics.h; KD_NOT_REFUSED: not counted). Whoever reads a request fills
 * one; the submit path (or a route that reads its own body) answers it. */
typedef struct {
    kd_refusal why;
    int status; /* 0: not refused */
    const char *code;
    char msg[1024];
} kd_refused;

/* Fills refused with why, status, code and the message (printf's fmt). */
void kd_refused_set(kd_refused *refused, kd_refusal why, int status, const char *code,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The body as a JSON object (its "model" field taken out, read by kd_request_model_name
 * and kd_request_model_hash), or NULL with refused (400 or 415, not counted) saying what
 * is wrong. The tree's candles point into the body's text, which is freed (its bytes given
 * back to upload-budget) when the request leaves the handler: call it once, and pass the
 * object on. */
json_t *kd_request_json(kd_request *r, kd_refused *refused);

/* Replies set the answer of r: on the HTTP thread it is sent when the handler returns; from
 * a worker (after kd_request_defer) it resumes the connection, and r must not be touched
 * again. kd_reply_json steals the reference to body. */
void kd_reply_json(kd_request *r, int status, json_t *body);
/* {"error": {"code": code, "message": ...}}; 503 adds Retry-After, 401 WWW-Authenticate. */
void kd_reply_error(kd_request *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* kd_reply_error with refused's status, code and message (counting is the caller's). */
void kd_reply_refused(kd_request *r, const kd_refused *refused);
/* A malloc'd text body, freed by the reply. */
void kd_reply_text(kd_request *r, int status, const char *content_type, char *text);

/* Whether the client closed its connection (a worker asks this between steps, to stop
 * work nobody will read). Safe from any thread while r is deferred. */
bool kd_request_client_gone(const kd_request *r);

/* A body that outlives the server (built into the binary), sent without copying. */
void kd_reply_static(kd_request *r, int status, const char *content_type, const void *data,
                     size_t len);

/* Adds a header to the answer set on r (on the HTTP thread, before the handler returns). */
void kd_reply_header(kd_request *r, const char *name, const char *value);

/* Seconds for the Retry-After of a 503 or 429 reply (default 1). */
void kd_request_set_retry_after(kd_request *r, int seconds);
/* Who is asking, for per-client limits: the API key's owner ("key NAME", keys.h) when API
 * keys are asked, else "address <client address>". */
void kd_request_owner(const kd_request *r, char *out, size_t n);
/* The owner a session must have to be this request's: its API key's owner, or NULL without
 * API keys (then a session id is all it takes: addresses are shared behind a NAT or a
 * proxy, and change). For the session table's calls. */
const char *kd_request_session_owner(const kd_request *r);
/* Whether the request carries a key of admin-key-file (Authorization: Bearer). An admin key
 * is no API key: routes that ask for an API key refuse it unless it is listed there too. */
bool kd_request_is_admin(const kd_request *r);

/* For answers built elsewhere in http/ (stream.c): r's MHD connection, and an MHD response
 * (struct MHD_Response *) set as r's answer as the kd_reply_* do (NULL: 500 out of memory). */
void *kd_request_connection(const kd_request *r);
void kd_reply_response(kd_request *r, int status, void *mhd_response);

/* A request's model: model_field.h. */
/* Suspends r until another thread replies: call it before handing the work over (so the
 * reply always finds r suspended), then return KD_DEFERRED; r is no longer the handler's. */
void kd_request_suspend(kd_request *r);

#endif
