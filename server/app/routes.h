/* routes.h — the router handed to http (http.h's kd_router): which handler answers which
 * method and path, and the metrics label of each endpoint. */
#ifndef KD_ROUTES_H
#define KD_ROUTES_H

#include "http.h"

/* The metrics label of every endpoint; the last, "other", counts unknown paths. */
extern const char *const kd_endpoint_names[];
extern const int kd_endpoint_count;

/* The route table's router, for kd_http_start. */
extern const kd_router kd_routes;

/* A row of the route table as the API's document (openapi.c) reads it. */
typedef struct {
    const char *path; /* "/health"; "/sessions/": a prefix and one segment; '*': one segment */
    const char *method;
    const char *operation; /* the operationId, its part's name in openapi_parts.json */
    bool is_public, needs_model;
} kd_route_doc;

/* The rows, 0 .. kd_route_count - 1. */
extern const size_t kd_route_count;
kd_route_doc kd_route_doc_at(size_t i);

#endif
