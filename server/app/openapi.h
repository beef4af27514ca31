/* openapi.h — the OpenAPI 3.1 document of every route the daemon serves (GET /openapi.json).
 *
 * Built from what the code already has, so that it cannot drift: the paths, methods and
 * which routes are public from the route table's rows (routes.c passes them), every error code and
 * its status from the error table (errors.c), the limits from this server's config and model, and
 * for each operation its written part (summary, request body, success responses, which error
 * statuses it answers) from openapi_parts.json, compiled in by embed_json.py. A route whose
 * part is missing, or a part no route names, fails the build of the document (and
 * tests/test_openapi.c). */
#ifndef KD_OPENAPI_H
#define KD_OPENAPI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"

/* openapi_parts.json as text (generated openapi_parts.c). */
extern const char kd_openapi_parts[];

/* This server's figures the document states as ranges. */
typedef struct {
    long long max_candles, max_horizon, max_samples, max_context, max_body_bytes;
    long long s1_max, s2_max; /* the largest token ids: 2^bits - 1 */
} kd_openapi_figures;

/* A row of the route table as the document reads it. */
typedef struct {
    const char *path; /* "/health"; "/sessions/": a prefix and one segment; '*': one segment */
    const char *method;
    const char *operation; /* the operationId, its part's name in openapi_parts.json */
    bool is_public, needs_model;
} kd_route_doc;

/* The figures of app's config and model (its defaults while the model loads). */
kd_openapi_figures kd_openapi_figures_of(const kd_app *app);

/* The document of the n routes, or NULL with a message in err (a route without its part, a
 * part without its route, out of memory). */
json_t *kd_openapi_document(const kd_openapi_figures *f, const kd_route_doc *routes, size_t n,
                            char *err, size_t errlen);

#endif
