/* handlers.h — the route handlers, one .c file a resource; the router (app/routes.c) maps
 * methods and paths to them. Each reads and checks its request on the HTTP thread and
 * answers, or hands the work to the submit path (jobs/submit.h) and returns KD_DEFERRED.
 *
 *   forecast.c         POST /forecast (one series, or many with "series")
 *   generate.c         POST /generate, POST /sessions/{id}/generate
 *   sessions/          the sessions' routes and their journal replay (session_handlers.h)
 *   tokens.c           POST /tokenize, POST /detokenize
 *   evaluate.c         POST /evaluate
 *   status.c           GET /health, GET /model, GET /metrics
 */
#ifndef KD_HANDLERS_H
#define KD_HANDLERS_H

#include <jansson.h>

#include "app.h"
#include "http.h"

/* A route's handler: KD_REPLIED with the answer set on r, or KD_DEFERRED when the work
 * went to the submit path (which replies). */
typedef kd_outcome kd_handler(kd_app *app, kd_request *r);

/* forecast.c: candles in (JSON, or text/csv with the other fields in the query), a
 * forecast out (JSON, or CSV with format=csv or Accept: text/csv); with "series", many
 * series in one request, answered {"series": [...]} (series_json.h). */
kd_handler kd_handle_forecast;

/* generate.c: tokens appended to a cache (a session's, or a temporary one) and new tokens
 * sampled from it, exact autoregressive decoding on the scheduler (tokens_json.h). */
kd_handler kd_handle_generate;

/* tokens.c: candles (JSON or text/csv) to token pairs and the statistics used, and token
 * pairs and statistics back to candles; both on a worker (tokens_json.h). */
kd_handler kd_handle_tokenize, kd_handle_detokenize;

/* evaluate.c: a walk-forward evaluation of the model on a series (evaluate_json.h): every
 * origin's forecast on the scheduler, scored against the actual closes and two baselines. */
kd_handler kd_handle_evaluate;

/* models.c: GET /models (every model: id, hash, shapes, parameters, bytes, kernels,
 * loaded_at) and GET /models/{id} (one; 404 model_not_found naming the others). */
kd_handler kd_handle_models, kd_handle_model_get, kd_handle_model_load, kd_handle_model_unload;
/* finetune.c: fine-tuning jobs (finetune_jobs.h), with an admin key */
kd_handler kd_handle_finetune_post, kd_handle_finetune_list, kd_handle_finetune_get,
    kd_handle_finetune_delete;

/* status.c: what the server is and does. */
kd_handler kd_handle_health, kd_handle_model, kd_handle_metrics;

#endif
