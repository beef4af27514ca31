/* forecast_job.c — the forecast job of forecast_job.h, on the submit path (submit.h). */
#include "forecast_job.h"

#include <stdio.h>
#include <stdlib.h>

#include "candles_csv.h"
#include "replies.h"
#include "room.h"
#include "series_json.h"
#include "submit.h"

/* Each forecast's own tag on the scheduler, so that its end says which one it was. */
typedef struct {
    kd_sched_entry sjob;
    kd_forecast_work *owner;
    int index;
} forecast_part;

struct kd_forecast_work {
    kd_work work;
    kd_forecast_input *in; /* [n] */
    kr_forecast_result *res;
    kr_error *errs;
    forecast_part *parts;
    int n, pending;
    kd_forecast_answer answer;
    const kd_model *md;  /* the model it runs on (its request's) */
    kd_session *session; /* a session forecast's, released at the end; else NULL */
    const kr_series *series;
    kd_forecast_done_fn on_done; /* or NULL */
    void *done_ctx;
};

static void job_free(kd_forecast_work *f) {
    if (f->session) kd_sessions_release(f->work.app->sessions, f->session);
    kd_series_inputs_free(f->in, f->n);
    free(f->res);
    free(f->errs);
    free(f->parts);
    kd_models_release(&f->work.app->models, f->md);
    free(f);
}

static void discard(kd_work *w) {
    job_free((kd_forecast_work *)w);
}

/* Every forecast ended: the first failure (by index) answers for all, else the answer. */
static void finish(kd_forecast_work *f) {
    kd_app *app = f->work.app;
    kd_request *r = f->work.r;
    const kd_forecast_answer answer = f->answer;
    int failed = -1;
    unsigned long long tokens = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->errs[i].code && failed < 0) failed = i;
        if (!f->errs[i].code) tokens += (unsigned long long)f->res[i].usage.generated_tokens;
    }
    if (failed < 0 && f->on_done &&
        f->on_done(app, f->done_ctx, &f->in[0], &f->res[0], &f->errs[0]) < 0) {
        kr_forecast_result_free(&f->res[0]);
        failed = 0;
    }
    json_t *body = NULL;
    char *text = NULL;
    if (failed < 0 && answer == KD_ANSWER_SERIES)
        body = kd_series_response_json(f->in, f->res, f->n);
    else if (failed < 0 && answer == KD_ANSWER_CSV)
        text = kd_forecast_csv(&f->in[0], &f->res[0]);
    else if (failed < 0)
        body = kd_forecast_response_json(&f->in[0], &f->res[0]);
    const kr_error e = failed >= 0 ? f->errs[failed] : (kr_error){0};
    char what[32] = "forecast";
    if (answer == KD_ANSWER_SERIES) snprintf(what, sizeof what, "series[%d] forecast", failed);
    for (int i = 0; i < f->n; i++)
        if (!f->errs[i].code) kr_forecast_result_free(&f->res[i]);
    if (failed < 0) kd_metrics_add_tokens(app->metrics, tokens);
    if (failed < 0) kd_model_count_tokens(f->md, tokens);
    job_free(f); /* releases the session before the client can see the answer */
    if (failed >= 0)
        kd_work_fail(app, r, what, &e);
    else if (answer == KD_ANSWER_CSV && text)
        kd_reply_text(r, 200, "text/csv; charset=utf-8", text);
    else
        kd_reply_json(r, 200, body);
}

/* ---- admission -------------------------------------------------------------------------- */

/* Whether forecast i can ever run here; -1 after refusing 400 or 422 too_large. */
static int admit_one(kd_forecast_work *f, int i, const kr_pool_stats *st, double *gflop) {
    kd_app *app = f->work.app;
    kd_request *r = f->work.r;
    const kr_forecast_request *q = &f->in[i].req;
    kr_forecast_plan plan;
    kr_error err = {0};
    const kr_calibration *cal = f->in[i].calibration;
    if (kr_forecast_plan_make(f->md->m, q, &plan, &err) < 0 ||
        (cal && (kr_calibration_check(cal, &err) < 0 ||
                 kr_calibration_match(cal, f->md->fp_hex, q->horizon, q->samples, q->quantiles,
                                      q->n_quantiles, &err) < 0))) {
        kd_refuse_error(app, r, "forecast", &err);
        return -1;
    }
    if (plan.pool_bytes > st->bytes_total) {
        kd_refuse(app, r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "forecast: %d paths over a window of %d need %zu bytes of KV cache; the "
                  "whole pool holds %zu (pool-bytes)",
                  q->samples, plan.max_context, plan.pool_bytes, st->bytes_total);
        return -1;
    }
    if (plan.flops / 1e9 > (double)app->cfg.max_request_cost) {
        kd_refuse(app, r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "forecast: needs about %.0f GFLOP of model work (%d paths x %d steps, %d "
                  "of them recomputing a slid window); max-request-cost is %d GFLOP",
                  plan.flops / 1e9, q->samples, q->horizon, plan.recomputed_steps,
                  app->cfg.max_request_cost);
        return -1;
    }
    *gflop += plan.flops / 1e9;
    return 0;
}

static int admit(kd_work *w) {
    kd_forecast_work *f = (kd_forecast_work *)w;
    kd_app *app = w->app;
    double gflop = 0;
    kr_pool_stats st; /* the pool's size is fixed: read once for every series */
    kr_pool_stats_get(f->md->pool, &st);
    for (int i = 0; i < f->n; i++)
        if (admit_one(f, i, &st, &gflop) < 0) return -1;
    /* one request, one budget: the series together, as one request alone would be */
    if (gflop > (double)app->cfg.max_request_cost) {
        kd_refuse(app, w->r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "forecast: %d series need about %.0f GFLOP of model work together; "
                  "max-request-cost is %d GFLOP (send fewer series per request)",
                  f->n, gflop, app->cfg.max_request_cost);
        return -1;
    }
    return 0;
}

/* ---- on the scheduler --------------------------------------------------------------------- */

static void part_done(kd_sched_entry *sj, const kr_error *err) {
    forecast_part *p = (forecast_part *)sj;
    kd_forecast_work *f = p->owner;
    f->errs[p->index] = *err;
    if (--f->pending == 0) finish(f);
}

static int add_part(kr_sched *ks, kd_forecast_work *f, int i) {
    kd_sched_entry *tag = &f->parts[i].sjob;
    return f->series ? kr_sched_add_forecast_series(ks, f->series, &f->in[i].req, &f->res[i], tag,
                                                    &f->errs[i])
                     : kr_sched_add_forecast_on(ks, f->md->m, f->md->pool, &f->in[i].req,
                                                &f->res[i], tag, &f->errs[i]);
}

static int add(kr_sched *ks, kd_work *w, kr_error *err) {
    kd_forecast_work *f = (kd_forecast_work *)w;
    f->pending = 0;
    for (int i = 0; i < f->n; i++) {
        if (add_part(ks, f, i) == 0) {
            f->pending++;
            continue;
        }
        if (i == 0) { /* nothing queued: done is called once, with this error */
            *err = f->errs[0];
            return -1;
        }
        for (int k = i + 1; k < f->n; k++) /* never queued: failed as this one */
            f->errs[k] = f->errs[i];
        return 0;
    }
    return 0;
}

/* The whole job failed before any forecast was queued. */
static void done(kd_work *w, const kr_error *err) {
    kd_forecast_work *f = (kd_forecast_work *)w;
    kd_work_fail_parts(f->errs, f->n, err);
    finish(f);
}

/* ---- on a worker: the reference path ------------------------------------------------------ */

typedef struct {
    kd_forecast_work *f;
    int i;
} part_call;

static int forecast_part_call(void *ctx, kr_error *err) {
    const part_call *c = ctx;
    const kd_model *md = c->f->md;
    return kr_forecast(md->m, md->pool, &c->f->in[c->i].req, &c->f->res[c->i], err);
}

static void run(kd_work *w) {
    kd_forecast_work *f = (kd_forecast_work *)w;
    for (int i = 0; i < f->n; i++) {
        part_call c = {f, i};
        kd_with_room(w->app, forecast_part_call, &c, &f->errs[i]);
    }
    finish(f);
}

static const kd_work_ops ops = {
    .admit = admit, .add = add, .done = done, .run = run, .discard = discard};

/* ---- making one --------------------------------------------------------------------------- */

kd_forecast_work *kd_forecast_work_new(kd_app *app, kd_forecast_intake *fi) {
    kd_forecast_input *in = fi->in;
    const int n = fi->n;
    fi->in = NULL;
    if (fi->refused.status) return NULL;
    kd_forecast_work *f = calloc(1, sizeof *f);
    if (f) {
        f->in = in;
        f->n = n;
        f->res = calloc((size_t)n, sizeof *f->res);
        f->errs = calloc((size_t)n, sizeof *f->errs);
        f->parts = calloc((size_t)n, sizeof *f->parts);
    }
    if (!f || !f->res || !f->errs || !f->parts) {
        if (f) {
            f->work.app = app;
            job_free(f);
        } else {
            kd_series_inputs_free(in, n);
        }
        return NULL;
    }
    f->answer = fi->answer;
    f->md = fi->md ? fi->md : &app->models.v[0];
    kd_models_hold(&app->models, f->md); /* the job's own: its end is no request's */
    kd_work_init(&f->work, &ops, app, NULL, in[0].timeout_ms); /* r: when submitted */
    for (int i = 0; i < n; i++) {
        f->in[i].req.cancel = f->work.cancel;
        f->parts[i] = (forecast_part){{.done = part_done, .request = &f->work.sjob}, f, i};
    }
    return f;
}

void kd_forecast_work_on_series(kd_forecast_work *f, kd_session *session, const kr_series *series) {
    f->session = session;
    f->series = series;
}

void kd_forecast_work_on_done(kd_forecast_work *f, kd_forecast_done_fn fn, void *ctx) {
    f->on_done = fn;
    f->done_ctx = ctx;
}

kd_outcome kd_forecast_work_submit(kd_app *app, kd_request *r, kd_forecast_work *f,
                                   const kd_refused *refused) {
    const kd_lane lane = f && !f->in[0].req.use_cache ? KD_ON_WORKER : KD_ON_SCHEDULER;
    return kd_submit_for(app, r, f ? &f->work : NULL, refused, lane);
}

kd_outcome kd_forecast_submit(kd_app *app, kd_request *r, kd_forecast_intake *fi) {
    kd_forecast_work *f = kd_forecast_work_new(app, fi);
    return kd_forecast_work_submit(app, r, f, &fi->refused);
}
