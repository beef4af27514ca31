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

#endif
