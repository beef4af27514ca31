/* request.c — what a handler reads of its request: its id, path and method, headers, query
 * parameters, the raw body, and a JSON body with its "model" field taken out (every model
 * route's, so the routes' own fields stay theirs). Nothing here replies: a body that is not
 * a JSON object comes back as a kd_refused for the caller to answer. */
#include "http.h"
#include "request_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "json_body.h"
#include "model_field.h"

const char *kd_request_id(const kd_request *r) {
    return r->id;
}

const char *kd_request_path(const kd_request *r) {
    return r->path;
}

const char *kd_request_method(const kd_request *r) {
    return r->method;
}

const char *kd_request_body(const kd_request *r, size_t *len) {
    *len = r->len;
    return r->len ? r->body : NULL;
}

const char *kd_request_header(const kd_request *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool kd_request_is_csv(const kd_request *r) {
    const char *ct = kd_request_header(r, "Content-Type");
    if (!ct) return false;
    ct += strspn(ct, " \t");
    return strncasecmp(ct, "text/csv", 8) == 0 && strchr("; \t", ct[8]) != NULL;
}

typedef struct {
    kd_query_fn fn;
    void *ctx;
    int rc;
} query_walk;

/* With the decoded lengths: "%00" decodes to a NUL that a C string would hide. */
static enum MHD_Result query_step(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size) {
    query_walk *w = cls;
    (void)kind;
    w->rc = w->fn(w->ctx, key, key_size, value, value ? value_size : 0);
    return w->rc ? MHD_NO : MHD_YES;
}

int kd_request_query_each(kd_request *r, kd_query_fn fn, void *ctx) {
    query_walk w = {fn, ctx, 0};
    MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_step, &w);
    return w.rc;
}

void kd_refused_set(kd_refused *refused, kd_refusal why, int status, const char *code,
                    const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(refused->msg, sizeof refused->msg, fmt, ap);
    va_end(ap);
    refused->why = why;
    refused->status = status;
    refused->code = code;
}

json_t *kd_request_json(kd_request *r, kd_refused *refused) {
    json_error_t je;
    if (kd_request_is_csv(r)) { /* the CSV routes read their body themselves */
        kd_refused_set(refused, KD_NOT_REFUSED, 415, "unsupported_media_type",
                       "request body: %s takes JSON; text/csv is for /forecast and /tokenize",
                       r->path);
        return NULL;
    }
    if (r->len == 0) {
        kd_refused_set(refused, KD_NOT_REFUSED, 400, "invalid_request",
                       "request body: empty; expected a JSON object");
        return NULL;
    }
    /* the tree's candles point into the body: it is released when the request leaves
     * the handler (kd_request_suspend) or ends */
    json_t *body = kd_body_parse(r->body, r->len, &je);
    if (!body) {
        size_t i = 0; /* the body is not NUL-terminated */
        while (i < r->len && r->body[i] && strchr(" \t\r\n", r->body[i]))
            i++;
        kd_refused_set(
            refused, KD_NOT_REFUSED, 400, "invalid_json", "request body: line %d column %d: %s%s",
            je.line, je.column, je.text,
            i < r->len && r->body[i] != '{' ? " (a CSV body needs Content-Type: text/csv)" : "");
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        kd_refused_set(refused, KD_NOT_REFUSED, 400, "invalid_request",
                       "request body: expected a JSON object");
        return NULL;
    }
    /* "model" is every model route's: taken out here, so the routes' own fields stay theirs */
    char msg[256];
    if (kd_model_field_take(body, r->mc.name, sizeof r->mc.name, r->mc.hash, sizeof r->mc.hash, msg,
                            sizeof msg) < 0) {
        json_decref(body);
        kd_refused_set(refused, KD_NOT_REFUSED, 400, "invalid_request", "%s", msg);
        return NULL;
    }
    return body;
}
