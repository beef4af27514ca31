/* routes.h — which handler answers which method and path. */
#ifndef KD_ROUTES_H
#define KD_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "http.h"

typedef struct kd_route kd_route;

/* The metrics label of every endpoint; the last, "other", counts unknown paths. */
extern const char *const kd_endpoint_names[];
extern const int kd_endpoint_count;

/* The route for a request. NULL with *status 404, or 405 and the allowed methods in allow
 * ("GET, DELETE"). *endpoint is the metrics label's index either way. */
const kd_route *kd_routes_match(const char *method, const char *path, int *endpoint, int *status,
                                char *allow, size_t allowlen);
/* Whether the route answers without the API key (/health). */
bool kd_route_is_public(const kd_route *rt);
/* Whether the route needs the loaded model (503 while starting or draining otherwise). */
bool kd_route_needs_model(const kd_route *rt);
/* For POST /sessions/{id}/generate: true with the id in id[n]. */
bool kd_path_session(const char *path, char *id, size_t n);
/* The answer for a session table refusal: 404, 409, 429 (with the Retry-After set before)
 * or 500, with msg. */
void kd_reply_session_error(kd_request *r, kd_session_status st, const char *msg);
/* Runs the handler on the whole request. */
kd_outcome kd_route_handle(const kd_route *rt, kd_app *app, kd_request *r);

#endif
