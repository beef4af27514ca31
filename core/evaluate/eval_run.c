/* eval_run.c — kr_evaluate: the plan, every origin's forecast queued at once on the one
 * run-to-completion driver (drivers/run.h, which batches them on one scheduler), each
 * origin's forecast taken into the scores, then the scores. */
#include "base.h"
#include "evaluate_impl.h"
#include "run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    kr_forecast_request *reqs;
    kr_forecast_result *res;
} origins;

static int add_origin(kr_sched *s, int i, void *ctx, kr_error *err) {
    origins *o = ctx;
    return kr_sched_add_forecast(s, &o->reqs[i], &o->res[i], (void *)(intptr_t)i, err);
}

int kr_evaluate(const kr_model *m, kr_pool *pool, const kr_evaluate_request *req, kr_evaluation *ev,
                kr_error *err) {
    const double t0 = kr_now_ms();
    kr_evaluate_plan plan;
    memset(ev, 0, sizeof *ev);
    if (kr_evaluate_plan_make(m, req, &plan, err) || kr_evaluation_init(req, &plan, ev, err))
        return -1;
    ev->usage.weights = kr_model_weights(m);
    ev->usage.kv = kr_model_kv(m);
    const int n = plan.origins;
    origins o = {calloc((size_t)n, sizeof *o.reqs), calloc((size_t)n, sizeof *o.res)};
    kr_error *errs = calloc((size_t)n, sizeof *errs);
    int rc = -1;
    if (!o.reqs || !o.res || !errs) {
        kr_fail_code(err, KR_E_NO_MEMORY, "evaluate: out of memory for %d origins", n);
        goto out;
    }
    for (int k = 0; k < n; k++)
        kr_evaluate_origin_request(req, &plan, k, &o.reqs[k]);
    if (kr_run(m, pool, n, add_origin, &o, errs)) {
        for (int k = 0; k < n; k++)
            if (errs[k].code) {
                if (err) *err = errs[k];
                break;
            }
        goto out;
    }
    rc = 0;
    for (int k = 0; rc == 0 && k < n; k++)
        rc = kr_evaluation_add(ev, req, k, &o.res[k], err);
    if (rc == 0) rc = kr_evaluation_finish(ev, req, err);
out:
    for (int k = 0; o.res && k < n; k++)
        kr_forecast_result_free(&o.res[k]);
    free(o.reqs);
    free(o.res);
    free(errs);
    if (rc)
        kr_evaluation_free(ev);
    else
        ev->usage.elapsed_ms = kr_now_ms() - t0;
    return rc;
}
