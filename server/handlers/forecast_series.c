/* forecast_series.c — POST /forecast with "series": every series one forecast, all added to
 * the scheduler at once so that they share its steps (their prefills and decode rows in
 * the same products); the reply waits for the last. Each equals its solo request, since no
 * row's numbers depend on what shares its step. With batching off (or use_cache false)
 * they run on a worker through kr_forecast_batch. */
#include "forecast_series.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "inference.h"
#include "series_json.h"

#define MSG_MAX 512

typedef struct series_job series_job;

/* Each forecast's own tag, so that its end says which one it was. */
typedef struct {
    kd_sched_job sjob;
    series_job *owner;
    int index;
} series_part;

struct series_job {
    kd_job job;        /* first: the worker's pointer is this struct's */
    kd_sched_job sjob; /* or the scheduler's */
    kd_app *app;
    kd_request *r;
    kd_forecast_input *in;
    kr_forecast_result *res;
    kr_error *errs;
    series_part *parts;
    int n, pending;
    kd_request_watch watch;
};

static void series_free(series_job *s) {
    kd_series_inputs_free(s->in, s->n);
    free(s->res);
    free(s->errs);
    free(s->parts);
    free(s);
}

/* Every forecast ended: the first failure (by index) answers for all, else the list. */
static void series_finish(series_job *s) {
    kd_request *r = s->r;
    int failed = -1;
    unsigned long long tokens = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->errs[i].code && failed < 0) failed = i;
        if (!s->errs[i].code) tokens += (unsigned long long)s->res[i].usage.generated_tokens;
    }
    json_t *body = failed < 0 ? kd_series_response_json(s->in, s->res, s->n) : NULL;
    kr_error e = failed >= 0 ? s->errs[failed] : (kr_error){0};
    char what[32];
    snprintf(what, sizeof what, "series[%d] forecast", failed);
    for (int i = 0; i < s->n; i++)
        if (!s->errs[i].code) kr_forecast_result_free(&s->res[i]);
    if (failed < 0) kd_metrics_add_tokens(s->app->metrics, tokens);
    series_free(s);
    if (failed >= 0)
        kd_reply_core_error(r, what, &e);
    else
        kd_reply_json(r, 200, body);
}

static void part_done(kd_sched_job *sj, const kr_error *err) {
    series_part *p = (series_part *)sj;
    series_job *s = p->owner;
    s->errs[p->index] = *err;
    if (--s->pending == 0) series_finish(s);
}

static int series_add(kr_sched *ks, kd_sched_job *sj, kr_error *err) {
    series_job *s = (series_job *)((char *)sj - offsetof(series_job, sjob));
    s->pending = 0;
    for (int i = 0; i < s->n; i++) {
        if (kr_sched_add_forecast(ks, &s->in[i].req, &s->res[i], &s->parts[i].sjob, &s->errs[i]) ==
            0) {
            s->pending++;
            continue;
        }
        if (i == 0) { /* nothing queued: done is called once, with this error */
            *err = s->errs[0];
            s->pending = 1;
            return -1;
        }
        for (int k = i + 1; k < s->n; k++) /* never queued: failed as this one */
            s->errs[k] = s->errs[i];
        return 0;
    }
    return 0;
}

/* The whole request failed before any forecast was queued. */
static void series_done(kd_sched_job *sj, const kr_error *err) {
    series_job *s = (series_job *)((char *)sj - offsetof(series_job, sjob));
    s->errs[0] = *err;
    for (int i = 1; i < s->n; i++)
        if (!s->errs[i].code) s->errs[i] = *err;
    series_finish(s);
}

static void run_series(kd_job *j) {
    series_job *s = (series_job *)j;
    const kr_forecast_request **reqs = malloc((size_t)s->n * sizeof *reqs);
    if (!reqs) {
        for (int i = 0; i < s->n; i++)
            kr_fail_code(&s->errs[i], KR_E_NO_MEMORY, "out of memory");
    } else {
        for (int i = 0; i < s->n; i++)
            reqs[i] = &s->in[i].req;
        kr_forecast_batch(s->app->model, s->app->pool, reqs, s->n, s->res, s->errs);
    }
    free(reqs);
    series_finish(s);
}

kd_outcome kd_handle_forecast_series(kd_app *app, kd_request *r, const json_t *body) {
    const kd_forecast_limits lim = {app->cfg.max_candles, app->cfg.max_horizon,
                                    app->cfg.max_samples};
    char msg[MSG_MAX];
    series_job *s = calloc(1, sizeof *s);
    if (!s) {
        kd_reply_error(r, 500, "internal", "out of memory queueing the request");
        return KD_REPLIED;
    }
    if (kd_series_request_parse(body, kr_model_max_context(app->model), &lim, &s->in, &s->n, msg,
                                sizeof msg) < 0) {
        free(s);
        kd_metrics_refuse(app->metrics, KD_REFUSED_INVALID);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    s->res = calloc((size_t)s->n, sizeof *s->res);
    s->errs = calloc((size_t)s->n, sizeof *s->errs);
    s->parts = calloc((size_t)s->n, sizeof *s->parts);
    if (!s->res || !s->errs || !s->parts) {
        series_free(s);
        kd_reply_error(r, 500, "internal", "out of memory queueing the request");
        return KD_REPLIED;
    }
    s->app = app;
    s->r = r;
    s->watch = (kd_request_watch){r, kd_deadline_of(app, s->in[0].timeout_ms)};
    double gflop = 0;
    for (int i = 0; i < s->n; i++) {
        s->in[i].req.cancel = (kr_cancel){kd_watch_check, &s->watch};
        s->parts[i] = (series_part){{.done = part_done}, s, i};
        if (!kd_admit_forecast(app, r, &s->in[i].req)) { /* replied */
            series_free(s);
            return KD_REPLIED;
        }
        kr_forecast_plan plan;
        if (kr_forecast_plan_make(app->model, &s->in[i].req, &plan, NULL) == 0)
            gflop += plan.flops / 1e9;
    }
    /* one request, one budget: the series together, as one request alone would be */
    if (gflop > (double)app->cfg.max_request_cost) {
        kd_metrics_refuse(app->metrics, KD_REFUSED_TOO_LARGE);
        kd_reply_error(r, 422, "too_large",
                       "forecast: %d series need about %.0f GFLOP of model work together; "
                       "max-request-cost is %d GFLOP (send fewer series per request)",
                       s->n, gflop, app->cfg.max_request_cost);
        series_free(s);
        return KD_REPLIED;
    }
    s->job.run = run_series;
    s->sjob.add = series_add;
    s->sjob.done = series_done;
    const bool sched = app->sched && s->in[0].req.use_cache;
    if ((sched ? kd_request_defer_sched(r, &s->sjob) : kd_request_defer(r, &s->job)) < 0) {
        kd_metrics_refuse(app->metrics, KD_REFUSED_BUSY);
        series_free(s);
        return KD_REPLIED;
    }
    kd_metrics_count(app->metrics, KD_COUNT_ADMITTED);
    return KD_DEFERRED;
}
