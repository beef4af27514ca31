/* http.c — libmicrohttpd setup, body accumulation, replies, request ids, access log; the
 * route of each request comes from the router handed to kd_http_start. What a handler
 * reads of its request is request.c's. */
#include "http.h"
#include "http_log.h"
#include "model_field.h"
#include "request_state.h"

#include <malloc.h>
#include <microhttpd.h>
#include <poll.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "framing.h"
#include "guard.h"
#include "listen.h"
#include "json_fields.h"
#include "json_out.h"
#include "log.h"
#include "clock.h"

#define ALLOW_MAX 64
#define BIG_BODY  (1u << 20) /* a body this large hands memory back when done */

/* A suspended connection is not read by MHD, so a client that hung up is seen only by
 * looking at its socket: end-of-stream or an error on it. */
bool kd_request_client_gone(const kd_request *r) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char c;
    return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void kd_request_set_retry_after(kd_request *r, int seconds) {
    r->retry_after = seconds;
}

_Static_assert(KD_KEY_OWNER_MAX <= KD_OWNER_MAX && KD_KEY_OWNER_MAX <= KD_SCHED_OWNER_MAX,
               "a key's owner fits where owners are kept");

/* The token of an Authorization: Bearer header (the scheme in any case, RFC 9110 §11.1),
 * its length in *len; NULL without one. */
static const char *bearer_token(struct MHD_Connection *conn, size_t *len) {
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!auth) return NULL;
    auth += strspn(auth, " \t");
    if (strncasecmp(auth, "Bearer", 6) != 0 || (auth[6] != ' ' && auth[6] != '\t')) return NULL;
    const char *token = auth + 6 + strspn(auth + 6, " \t");
    size_t n = strlen(token);
    while (n > 0 && (token[n - 1] == ' ' || token[n - 1] == '\t'))
        n--;
    *len = n;
    return n ? token : NULL;
}

/* The key of keys the request carries, or NULL (the sets are freed at exit only, so the
 * key outlives the request). */
static const kd_key *key_of(const kd_keys *keys, struct MHD_Connection *conn) {
    size_t len = 0;
    const char *token = bearer_token(conn, &len);
    return token ? kd_keys_match(keys, token, len) : NULL;
}

bool kd_request_is_admin(const kd_request *r) {
    const kd_keys *admin = atomic_load(&r->http->app->admin_keys);
    return admin && key_of(admin, r->conn) != NULL;
}

const char *kd_request_session_owner(const kd_request *r) {
    return r->key ? r->key->owner : NULL;
}

void kd_request_owner(const kd_request *r, char *out, size_t n) {
    if (r->key) {
        snprintf(out, n, "%s", r->key->owner);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[NI_MAXHOST] = "unknown";
    if (ci && ci->client_addr) {
        socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                               : sizeof(struct sockaddr_in);
        if (getnameinfo(ci->client_addr, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0)
            snprintf(host, sizeof host, "unknown");
    }
    snprintf(out, n, "address %s", host);
}

/* ---- replies ---------------------------------------------------------------------------- */

static void set_response(kd_request *r, int status, struct MHD_Response *resp) {
    if (!resp) { /* out of memory: say so with a static body, which cannot fail to build */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory "
                                  "building the response\"}}\n";
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
        if (resp) MHD_add_response_header(resp, "Content-Type", "application/json");
    }
    if (resp) {
        MHD_add_response_header(resp, "X-Request-Id", r->id);
        if (status == MHD_HTTP_SERVICE_UNAVAILABLE || status == MHD_HTTP_TOO_MANY_REQUESTS) {
            char secs[16];
            snprintf(secs, sizeof secs, "%d", r->retry_after > 0 ? r->retry_after : 1);
            MHD_add_response_header(resp, "Retry-After", secs);
        }
        if (status == MHD_HTTP_UNAUTHORIZED)
            MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
        /* a draining node asks clients (and proxies) to take their next request elsewhere */
        if (atomic_load(&r->http->app->state) == KD_DRAINING)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    if (r->response) MHD_destroy_response(r->response); /* a later answer wins */
    r->response = resp;
    r->status = status;
    /* From a worker: the HTTP thread takes the answer in the next access callback; the
     * resume's internal locking orders these writes before that read. */
    if (r->deferred) {
        r->deferred = false;
        MHD_resume_connection(r->conn);
    }
}

void kd_reply_response(kd_request *r, int status, void *mhd_response) {
    set_response(r, status, mhd_response);
}

void *kd_request_connection(const kd_request *r) {
    return r->conn;
}

void kd_reply_text(kd_request *r, int status, const char *content_type, char *text) {
    struct MHD_Response *resp = NULL;
    if (text) {
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            free(text);
        else
            MHD_add_response_header(resp, "Content-Type", content_type);
    }
    /* a CSV answer names its model in headers, as a JSON one does in its "model" field */
    if (resp && r->mc.model && status < 300) {
        MHD_add_response_header(resp, "Kronos-Model", r->mc.model->id);
        MHD_add_response_header(resp, "Kronos-Model-Hash", r->mc.model->hash);
    }
    set_response(r, status, resp);
}

void kd_reply_static(kd_request *r, int status, const char *content_type, const void *data,
                     size_t len) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (resp) MHD_add_response_header(resp, "Content-Type", content_type);
    set_response(r, status, resp);
}

void kd_reply_header(kd_request *r, const char *name, const char *value) {
    if (r->response) MHD_add_response_header(r->response, name, value);
}

void kd_reply_json(kd_request *r, int status, json_t *body) {
    if (body && r->mc.model && status < 300 && json_is_object(body) &&
        kd_model_tag_json(body, r->mc.model->id, r->mc.model->hash) < 0) {
        json_decref(body);
        body = NULL; /* out of memory: 500, as for the dump */
    }
    char *text = body ? kd_json_dumps(body, 0) : NULL;
    json_decref(body);
    if (text) { /* a trailing newline, for people reading curl output */
        size_t n = strlen(text);
        char *t = realloc(text, n + 2);
        if (t) {
            text = t;
            memcpy(text + n, "\n", 2);
        }
    }
    kd_reply_text(r, status, "application/json", text);
}

void kd_reply_error(kd_request *r, int status, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kd_utf8_clean(msg); /* a path or a CSV body may carry bytes that are not UTF-8 */
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    kd_reply_json(r, status, body);
}

void kd_reply_refused(kd_request *r, const kd_refused *refused) {
    kd_reply_error(r, refused->status, refused->code, "%s", refused->msg);
}

/* ---- bodies and the upload budget ---------------------------------------------------- */

/* Frees the body's buffer and gives its bytes back to the budget. */
static void release_body(kd_request *r) {
    if (r->cap) atomic_fetch_sub(&r->http->body_bytes, r->cap);
    if (r->cap >= BIG_BODY) r->big = true;
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

/* Takes n more bytes of the budget, or false when that would pass it. */
static bool take_budget(kd_http *h, size_t n) {
    const size_t budget = h->app->cfg.upload_budget;
    size_t held = atomic_load(&h->body_bytes);
    do {
        if (held + n > budget) return false;
    } while (!atomic_compare_exchange_weak(&h->body_bytes, &held, held + n));
    return true;
}

static void refuse_over_budget(kd_request *r, size_t want) {
    kd_reply_error(r, 503, "uploads_busy",
                   "request body: %zu more bytes would pass the %zu bytes that request bodies "
                   "may hold at once (upload-budget); retry in a few seconds",
                   want, r->http->app->cfg.upload_budget);
    kd_request_set_retry_after(r, 2);
    r->close = true;
}

/* After a burst of large bodies (and their parsed trees, freed by now), the heap's free
 * pages go back to the system, at most once a second: glibc keeps them otherwise. */
static void hand_back_memory(kd_http *h) {
    const long long now = (long long)kd_now_ms();
    long long last = atomic_load(&h->last_trim_ms);
    if (now - last < 1000 && atomic_load(&h->body_bytes) > 0) return;
    if (!atomic_compare_exchange_strong(&h->last_trim_ms, &last, now)) return;
    malloc_trim(0);
}

void kd_request_suspend(kd_request *r) {
    release_body(r);
    r->deferred = true;
    MHD_suspend_connection(r->conn);
}

/* ---- request lifecycle --------------------------------------------------------------- */

/* The client's X-Request-Id if it is short and plain, else boot id + counter. */
static void assign_id(kd_http *h, kd_request *r) {
    const char *given = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
    if (given && *given && strlen(given) <= REQUEST_ID_MAX &&
        strspn(given, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") ==
            strlen(given)) {
        strcpy(r->id, given);
        return;
    }
    snprintf(r->id, sizeof r->id, "%08x-%08llx", h->boot_id,
             (unsigned long long)atomic_fetch_add(&h->next_request, 1) + 1);
}

/* Refuses a body whose length two parties could read differently (framing.c). The
 * connection is then closed, since where this request ends is exactly what is in doubt.
 * True after replying. */
static bool refuse_framing(kd_request *r) {
    const char *code;
    char msg[256];
    const int status = kd_framing_check(r->conn, &code, msg, sizeof msg);
    if (status) kd_reply_error(r, status, code, "%s", msg);
    r->close = status != 0;
    return r->close;
}

/* Decides at the headers whether the request is refused before its body is read. */
static void screen(kd_http *h, kd_request *r) {
    kd_app *app = h->app;
    int status = 0;
    char allow[ALLOW_MAX];
    if (refuse_framing(r)) return;
    r->route = h->router->match(r->method, r->path, &r->endpoint, &status, allow, sizeof allow);
    if (status == 404) {
        kd_reply_error(r, 404, "not_found",
                       "no endpoint %s (the routes: GET /openapi.json, docs/api.md)", r->path);
        return;
    }
    if (status == 405) {
        kd_reply_error(r, 405, "method_not_allowed", "%s does not take %s; it takes %s", r->path,
                       r->method, allow);
        if (r->response) MHD_add_response_header(r->response, "Allow", allow);
        return;
    }
    /* only a route that asks for a key knows the request's key (its owner) */
    const kd_keys *keys = h->router->is_public(r->route) ? NULL : atomic_load(&app->api_keys);
    if (keys && !(r->key = key_of(keys, r->conn))) {
        kd_reply_error(r, 401, "unauthorized",
                       "missing or wrong API key; send Authorization: Bearer KEY");
        return;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > app->cfg.max_body_bytes) {
        kd_reply_error(r, 413, "body_too_large",
                       "request body: %s bytes exceed the limit of %zu (max-body-bytes)", cl,
                       app->cfg.max_body_bytes);
        return;
    }
    /* a declared body that cannot fit now is refused before it is read */
    if (cl && strtoull(cl, NULL, 10) + atomic_load(&h->body_bytes) > app->cfg.upload_budget) {
        refuse_over_budget(r, (size_t)strtoull(cl, NULL, 10));
        return;
    }
    const int state = atomic_load(&app->state);
    if (state != KD_READY && h->router->needs_model(r->route))
        kd_reply_error(r, 503, state == KD_STARTING ? "starting" : "draining",
                       state == KD_STARTING ? "the model is still loading"
                                            : "the server is shutting down");
}

/* Appends a chunk of the body; past max-body-bytes or upload-budget the rest is read and
 * dropped. The buffer grows by doubling up to the declared length (no more), each growth
 * taken from the budget: a stalled upload holds what it sent, not what it declared. */
static void accumulate(kd_request *r, const char *data, size_t n) {
    const size_t limit = r->http->app->cfg.max_body_bytes;
    if (r->too_large || r->over_budget || r->response) return;
    if (r->len + n > limit) {
        r->too_large = true;
        release_body(r);
        return;
    }
    if (r->len + n > r->cap) {
        const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
        const size_t declared = cl ? (size_t)strtoull(cl, NULL, 10) : limit;
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        if (cap > limit) cap = limit;
        if (cap > declared && declared >= r->len + n) cap = declared;
        if (!take_budget(r->http, cap - r->cap)) {
            r->over_budget = true;
            refuse_over_budget(r, r->len + n);
            release_body(r);
            return;
        }
        char *b = realloc(r->body, cap);
        if (!b) {
            atomic_fetch_sub(&r->http->body_bytes, cap - r->cap);
            kd_reply_error(r, 500, "internal", "out of memory reading a %zu-byte body", r->len + n);
            return;
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
}

static kd_guarded *guarded(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static bool has_body(struct MHD_Connection *conn) {
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    return (cl && strtoull(cl, NULL, 10) > 0) ||
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
}

static enum MHD_Result send_answer(kd_request *r) {
    r->answered = true;
    kd_guard_on(r->http->guard, guarded(r->conn), KD_GUARD_RECEIVED);
    if (r->close) MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, r->response);
    MHD_destroy_response(r->response); /* MHD holds its own reference */
    r->response = NULL;
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    kd_http *h = cls;
    kd_request *r = *con_cls;
    (void)version;

    if (!r) { /* the headers are in: set up, and refuse early what can be refused */
        if (!(r = calloc(1, sizeof *r)) || !(r->path = strdup(url))) {
            free(r);
            kd_log("out of memory accepting %s %s", method, url);
            return MHD_NO;
        }
        r->http = h;
        r->conn = conn;
        r->t0 = kd_now_s();
        snprintf(r->method, sizeof r->method, "%s", method);
        assign_id(h, r);
        atomic_fetch_add(&h->in_flight, 1);
        *con_cls = r;
        screen(h, r);
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
        if (te && !r->response) kd_guard_on(h->guard, guarded(conn), KD_GUARD_CHUNKED);
        /* A refusal goes out now only when a body follows, to spare reading it (MHD then
         * closes the connection); otherwise at the final call, keeping the connection. */
        return r->response && (r->close || has_body(conn)) ? send_answer(r) : MHD_YES;
    }
    if (r->answered) { /* refused early: whatever else comes is dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        kd_guard_on(h->guard, guarded(conn), KD_GUARD_PROGRESS);
        accumulate(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* over the budget: answered now if MHD takes an answer mid-body, else the
         * connection is closed (MHD_NO); the rest of the body is not read either way */
        if (r->over_budget) return send_answer(r);
        return MHD_YES;
    }
    if (r->response) return send_answer(r); /* a worker's answer, after the resume */
    kd_guard_on(h->guard, guarded(conn), KD_GUARD_RECEIVED); /* answering has no deadline */
    if (r->too_large) {
        kd_reply_error(r, 413, "body_too_large", "request body: over the limit of %zu bytes",
                       h->app->cfg.max_body_bytes);
        return send_answer(r);
    }
    if (h->router->handle(r->route, h->app, r) == KD_DEFERRED) return MHD_YES; /* r is not ours */
    if (!r->response) kd_reply_error(r, 500, "internal", "the handler gave no answer");
    return send_answer(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    kd_http *h = cls;
    kd_request *r = *con_cls;
    if (!r) return;
    const double secs = kd_now_s() - r->t0;
    kd_metrics_observe(h->app->metrics, r->endpoint, r->status, secs);
    if (r->key) kd_metrics_key_request(h->app->metrics, r->key->slot);
    if (r->mc.model) kd_model_count_request(r->mc.model);
    kd_request_set_model(r, NULL); /* its reference on its model, dropped */
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        kd_guard_on(h->guard, guarded(conn), KD_GUARD_COMPLETED);
    if (h->app->cfg.access_log) {
        char path[256];
        kd_http_loggable(r->path, path, sizeof path);
        kd_log("%s %s %d %.1fms id=%s%s", r->method, path, r->status, secs * 1e3, r->id,
               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    }
    if (r->response) MHD_destroy_response(r->response);
    release_body(r);
    const bool big = r->big;
    free(r->path);
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&h->in_flight, 1);
    if (big) hand_back_memory(h);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    kd_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? kd_guard_open(h->guard, ci->connect_fd) : NULL;
        if (!*socket_context) kd_log("http: a connection without a deadline (out of memory)");
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        kd_guard_close(h->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* Called when a request line is in, before its headers: from here the request has
 * read-timeout seconds. Returns the request's initial state (none yet). */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
    kd_http *h = cls;
    (void)uri;
    kd_guard_on(h->guard, guarded(conn), KD_GUARD_REQUEST_LINE);
    return NULL;
}

/* ---- daemon ------------------------------------------------------------------------------ */

kd_http *kd_http_start(kd_app *app, const kd_router *router, char *err, size_t errlen) {
    const kd_config *c = &app->cfg;
    bool v6 = false;
    const int fd = kd_listen(c->host, c->port, &v6, err, errlen);
    if (fd < 0) return NULL;
    kd_http *h = calloc(1, sizeof *h);
    if (!h) snprintf(err, errlen, "http: out of memory");
    if (!h || !(h->guard = kd_guard_start(c->read_timeout, c->connection_timeout,
                                          c->max_connections, err, errlen))) {
        free(h);
        close(fd);
        return NULL;
    }
    h->app = app;
    h->router = router;
    if (getrandom(&h->boot_id, sizeof h->boot_id, GRND_NONBLOCK) != sizeof h->boot_id)
        h->boot_id = (unsigned)getpid() ^ (unsigned)time(NULL);

    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, kd_http_mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_URI_LOG_CALLBACK,
        on_request_line, h, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)c->http_threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->connection_timeout, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)c->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)c->max_connections_per_ip, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "http: cannot start serving on %s:%d (see the line above)", c->host,
                 c->port);
        kd_guard_stop(h->guard);
        close(fd);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : (unsigned)c->port;
    return h;
}

unsigned kd_http_port(const kd_http *h) {
    return h->port;
}

void kd_http_set_timeouts(kd_http *h, int read_timeout, int connection_timeout) {
    kd_guard_set_timeouts(h->guard, read_timeout, connection_timeout);
}

int kd_http_in_flight(kd_http *h) {
    return atomic_load(&h->in_flight);
}

void kd_http_stop(kd_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->daemon);
    kd_guard_stop(h->guard);
    free(h);
}
