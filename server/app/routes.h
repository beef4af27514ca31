/* routes.h — the router handed to http (http.h's kd_router): which handler answers which
 * method and path, and the metrics label of each endpoint; GET /openapi.json, the API's
 * document of this table (openapi.h). */
#ifndef KD_ROUTES_H
#define KD_ROUTES_H

#include "http.h"
#include "openapi.h"

/* The metrics label of every endpoint; the last, "other", counts unknown paths. */
extern const char *const kd_endpoint_names[];
extern const int kd_endpoint_count;

/* The route table's router, for kd_http_start. */
extern const kd_router kd_routes;

/* The rows, 0 .. kd_route_count - 1. */
extern const size_t kd_route_count;
kd_route_doc kd_route_doc_at(size_t i);

/* The API's document of the route table (kd_openapi_document of every row). */
json_t *kd_routes_document(const kd_openapi_figures *f, char *err, size_t errlen);

#endif
