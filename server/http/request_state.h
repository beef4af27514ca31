/* request_state.h — the state the HTTP layer keeps for its daemon and for each request: shared
 * only within server/http (http.c owns it; request.c reads it for the handlers, model_field.c
 * sets a request's model). */
#ifndef KD_REQUEST_STATE_H
#define KD_REQUEST_STATE_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "guard.h"
#include "keys.h"
#include "models.h"

#define REQUEST_ID_MAX 64
#define METHOD_MAX     16

/* What a request says of its model, and the model it runs on (model_field.h's accessors
 * read and set it). */
typedef struct {
    char name[KD_MODEL_ID_MAX + 2]; /* its "model" field ("": none given) */
    char hash[72];                  /* the hash that field gave ("": none) */
    const kd_model *model;          /* the model it runs on (its answer names it) */
} kd_model_choice;

struct kd_http {
    kd_app *app;
    const struct kd_router *router;
    struct MHD_Daemon *daemon;
    kd_guard *guard;
    unsigned port;
    unsigned boot_id; /* random: request ids differ across restarts */
    atomic_ullong next_request;
    atomic_int in_flight;
    atomic_size_t body_bytes;  /* held by request bodies now (upload-budget) */
    atomic_llong last_trim_ms; /* when memory was last handed back (malloc_trim) */
};

struct kd_request {
    struct kd_http *http;
    struct MHD_Connection *conn;
    char id[REQUEST_ID_MAX + 1];
    char method[METHOD_MAX];
    char *path;
    const struct kd_route *route;
    int endpoint;
    double t0;
    char *body;
    size_t len, cap;
    bool too_large;
    bool over_budget;              /* the body would pass upload-budget: dropped, 503 */
    bool big;                      /* held a large body: hand memory back at the end */
    bool close;                    /* close the connection after the answer */
    bool deferred;                 /* suspended until a worker replies */
    bool answered;                 /* a response was handed to MHD */
    struct MHD_Response *response; /* the answer, not yet handed to MHD */
    int status;
    int retry_after;    /* seconds, for a 503; 0: 1 */
    const kd_key *key;  /* the API key it came with, on a route that asks for one */
    kd_model_choice mc; /* the model it names and the one it runs on (model_field.c) */
};

#endif
