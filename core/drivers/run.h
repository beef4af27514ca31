/* run.h — the one run-to-completion driver under every one-shot entry point (kr_forecast,
 * kr_forecast_batch, kr_forecast_series, kr_generate, kr_generate_batch): a scheduler of
 * its own, the jobs queued, stepped until none is left. Internal to core/. */
#ifndef KR_RUN_H
#define KR_RUN_H

#include "kronos.h"

/* Queues item i on s with tag (void *)(intptr_t)i, or runs it at once (the reference path,
 * which the scheduler does not batch): 0, or -1 with err set when it failed. */
typedef int (*kr_run_add)(kr_sched *s, int i, void *ctx, kr_error *err);

/* Runs n items to completion on one scheduler over m and pool (pool NULL: each forecast
 * gets a private pool). errs[i] says how item i ended (code KR_OK: it succeeded). Returns 0
 * when every item succeeded, -1 when any failed. */
int kr_run(const kr_model *m, kr_pool *pool, int n, kr_run_add add, void *ctx, kr_error *errs);

/* Entry points the tests drive (not the public API, kronos.h): */

/* n requests on n distinct caches at once: each request's own tokens are appended on their
 * own, then the new tokens of all of them are generated in lockstep, one batched step at a
 * time. errs[i] says how request i ended (code KR_OK: it succeeded); a request that fails
 * leaves the others running. Returns 0 when all succeeded, -1 when any failed. Each request
 * gets what kr_generate gives it (every row's arithmetic is its own). */
int kr_generate_batch(kr_cache *const *caches, const kr_generate_request *reqs, int n,
                      int32_t *const *out_s1, int32_t *const *out_s2, kr_error *errs);

/* A forecast from the series, run to completion on a scheduler of its own with the
 * series' pool: req as kr_series_request fills it, plus the forecast's own fields. The
 * same answer as kr_sched_add_forecast_series gives. */
int kr_forecast_series(const kr_series *s, const kr_forecast_request *req, kr_forecast_result *res,
                       kr_error *err);

#endif
