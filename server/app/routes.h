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

#endif
