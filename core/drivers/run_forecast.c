/* run_forecast.c — the one-shot forecasts: kr_forecast, kr_forecast_batch (the reference
 * path run at once, cached requests batched on the scheduler) and kr_forecast_series, each
 * a thin call of kr_run. */
#include "forecast_impl.h"
#include "run.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    const kr_model *m;
    const kr_forecast_request *const *reqs;
    kr_forecast_result *res;
    const kr_series *series; /* kr_forecast_series: the one request's series */
} forecasts;

static int add_forecast(kr_sched *s, int i, void *ctx, kr_error *err) {
    forecasts *f = ctx;
    void *tag = (void *)(intptr_t)i;
    if (f->series)
        return kr_sched_add_forecast_series(s, f->series, f->reqs[i], &f->res[i], tag, err);
    if (!f->reqs[i]->use_cache) return kr_forecast_reference(f->m, f->reqs[i], &f->res[i], err);
    return kr_sched_add_forecast(s, f->reqs[i], &f->res[i], tag, err);
}

int kr_forecast_batch(const kr_model *m, kr_pool *pool, const kr_forecast_request *const *reqs,
                      int n, kr_forecast_result *res, kr_error *errs) {
    forecasts f = {m, reqs, res, NULL};
    if (n > 0) memset(res, 0, (size_t)n * sizeof *res);
    return kr_run(m, pool, n, add_forecast, &f, errs);
}

/* One item of kr_run, its error copied out. */
static int run_one(const kr_model *m, kr_pool *pool, forecasts *f, kr_error *err) {
    kr_error e;
    memset(f->res, 0, sizeof *f->res);
    if (kr_run(m, pool, 1, add_forecast, f, &e) == 0) return 0;
    if (err) *err = e;
    return -1;
}

int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *r,
                kr_forecast_result *res, kr_error *err) {
    forecasts f = {m, &r, res, NULL};
    return run_one(m, pool, &f, err);
}

int kr_forecast_series(const kr_series *s, const kr_forecast_request *r, kr_forecast_result *res,
                       kr_error *err) {
    forecasts f = {kr_series_model(s), &r, res, s};
    return run_one(f.m, kr_series_pool(s), &f, err);
}
