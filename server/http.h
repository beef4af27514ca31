/* http.h — the HTTP front end on libmicrohttpd.
 *
 * MHD's own threads accept connections, read bodies (up to max-body-bytes), route, check
 * the API key and answer everything that does not need the model. A request that needs
 * the model is deferred: a place in the worker queue is reserved, the connection is
 * suspended, and the job is queued; the worker's reply resumes the connection. Every
 * request gets an id (X-Request-Id, the client's if it sent a sane one) and one access-log
 * line when it completes.
 */
#ifndef KD_HTTP_H
#define KD_HTTP_H

#include <jansson.h>
#include <stddef.h>

#include "app.h"
#include "workers.h"

typedef struct kd_http kd_http;
typedef struct kd_request kd_request;

/* Listens on cfg.host:cfg.port; NULL after a message in err. */
kd_http *kd_http_start(kd_app *app, char *err, size_t errlen);
unsigned kd_http_port(const kd_http *h); /* the bound port (for port 0) */
/* The guard's deadlines (guard.h), for SIGHUP. */
void kd_http_set_timeouts(kd_http *h, int request_timeout, int connection_timeout);
/* Requests received and not yet completed. */
int kd_http_in_flight(kd_http *h);
/* Closes every connection and frees h. No request may be deferred any more. */
void kd_http_stop(kd_http *h);

/* ---- for route handlers ---------------------------------------------------------------- */

typedef enum { KD_REPLIED, KD_DEFERRED } kd_outcome;

const char *kd_request_id(const kd_request *r);
const char *kd_request_path(const kd_request *r);
const char *kd_request_method(const kd_request *r);

/* The body as a JSON object, or NULL after replying 400 with what is wrong. */
json_t *kd_request_json(kd_request *r);

/* Replies set the answer of r: on the HTTP thread it is sent when the handler returns; from
 * a worker (after kd_request_defer) it resumes the connection, and r must not be touched
 * again. kd_reply_json steals the reference to body. */
void kd_reply_json(kd_request *r, int status, json_t *body);
/* {"error": {"code": code, "message": ...}}; 503 adds Retry-After, 401 WWW-Authenticate. */
void kd_reply_error(kd_request *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A malloc'd text body, freed by the reply. */
void kd_reply_text(kd_request *r, int status, const char *content_type, char *text);

/* Hands job to the workers and suspends r until a worker replies. 0 when deferred; -1 when
 * the queue is full, after replying 503 (the caller still owns job). */
int kd_request_defer(kd_request *r, kd_job *job);

#endif
