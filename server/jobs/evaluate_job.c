/* evaluate_job.c — the evaluation job of evaluate_job.h, on the submit path (submit.h). */
#include "evaluate_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "errors.h"
#include "evaluate_series_json.h"
#include "json_out.h"
#include "replies.h"
#include "room.h"
#include "stream.h"
#include "submit.h"

/* Each origin's own tag on the scheduler, so that its end says which one it was. The
 * origins of every series form one list, series by series. */
typedef struct {
    kd_sched_entry sjob;
    struct evaluate_job *owner;
    int series, index; /* its series, and its index among that series' origins */
} origin_part;

typedef struct evaluate_job {
    kd_work work;
    kd_evaluate_series_input set; /* one series, or the "series" form's */
    bool series_form;             /* answered with the cross-section */
    kr_evaluate_plan *plans;      /* [set.n] */
    kr_evaluation *evs;           /* [set.n] */
    int n_ready;                  /* evaluations initialised */
    int origins;                  /* every series' together */
    double flops;                 /* the whole request's planned work */
    size_t pool_bytes;            /* the most one origin holds */
    kr_forecast_request *reqs;    /* [origins] */
    kr_forecast_result *res;      /* [origins]: each freed once scored */
    kr_error *errs;               /* [origins] */
    origin_part *parts;           /* [origins] */
    kr_sched *ks;                 /* the scheduler the origins run on (its thread's) */
    const kd_model *md;           /* the model they run on (the request's) */
    int next;                     /* the next origin to queue */
    int in_flight;                /* queued and not ended */
    int window;                   /* the most origins in flight at once */
    int pending;                  /* origins not ended (queued or not) */
    int done;                     /* origins ended */
    bool hold; /* a hold on the request's place in the queue while origins remain to queue */
    double t0;
    kr_series *series; /* live mode: the first window, appended origin by origin */
    int series_of;     /* live mode: the series (index in set) it is */
    bool wants_stream;
    kd_stream *stream; /* progress events, then the result; the request is then its */
} evaluate_job;

static void job_free(evaluate_job *j) {
    kr_series_free(j->series);
    for (int k = 0; j->res && k < j->origins; k++)
        kr_forecast_result_free(&j->res[k]);
    for (int i = 0; i < j->n_ready; i++)
        kr_evaluation_free(&j->evs[i]);
    kd_evaluate_series_input_free(&j->set);
    free(j->plans);
    free(j->evs);
    free(j->reqs);
    free(j->res);
    free(j->errs);
    free(j->parts);
    kd_models_release(&j->work.app->models, j->md); /* last: the series was on its pool */
    free(j);
}

static void discard(kd_work *w) {
    job_free((evaluate_job *)w);
}

/* The end on a stream: the result, or the error as the error table answers it. */
static void finish_stream(evaluate_job *j, json_t *body, const kr_error *e) {
    kd_app *app = j->work.app;
    kd_stream *s = j->stream;
    if (e->code) {
        const kd_error_answer *a = kd_error_answer_of((int)e->code);
        char msg[KR_ERR_MAX + 128];
        kd_error_message(a, "evaluate", e->msg, msg, sizeof msg);
        if (e->code == KR_E_DEADLINE) kd_metrics_count(app->metrics, KD_COUNT_TIMED_OUT);
        if (e->code == KR_E_CANCELLED) kd_metrics_count(app->metrics, KD_COUNT_CANCELLED);
        body = json_pack("{s:{s:s,s:s,s:i}}", "error", "code", a->code, "message", msg, "status",
                         a->status);
    }
    if (body && !e->code && kd_model_tag_json(body, j->md->id, j->md->hash) < 0) {
        json_decref(body);
        body = NULL;
    }
    char *text = body ? kd_json_dumps(body, 0) : NULL;
    json_decref(body);
    kd_stream_event(s, e->code ? "error" : "result",
                    text ? text
                         : "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory writing "
                           "the evaluation\",\"status\":500}}");
    free(text);
    kd_stream_end(s);
}

/* Every series' scores, then the answer: one series', or theirs with the cross-section;
 * NULL with *e set when scoring failed, or with *e clear when out of memory. */
static json_t *answer(evaluate_job *j, kr_error *e) {
    const double elapsed = kd_now_ms() - j->t0;
    long long tokens = 0;
    for (int i = 0; i < j->set.n; i++) {
        if (kr_evaluation_finish(&j->evs[i], &j->set.in[i].req, e) < 0) return NULL;
        j->evs[i].usage.elapsed_ms = elapsed; /* the whole request's */
        tokens += j->evs[i].usage.generated_tokens;
        const kr_anomalies *an = j->evs[i].anomalies;
        if (an)
            kd_metrics_add_anomalies(j->work.app->metrics, (unsigned long long)an->count,
                                     (unsigned long long)an->checked);
    }
    kd_metrics_add_tokens(j->work.app->metrics, (unsigned long long)tokens);
    kd_model_count_tokens(j->md, (unsigned long long)tokens);
    if (!j->series_form) return kd_evaluate_response_json(&j->set.in[0], &j->plans[0], &j->evs[0]);
    kr_cross_section cs;
    if (kr_cross_section_score(j->evs, j->set.n, j->set.top_k, &cs, e) < 0) return NULL;
    json_t *body = kd_evaluate_series_response_json(&j->set, j->plans, j->evs, &cs);
    kr_cross_section_free(&cs);
    return body;
}

/* Every origin ended: the first failure (by origin) answers for all, else the scores. */
static void finish(evaluate_job *j) {
    kd_app *app = j->work.app;
    kd_request *r = j->work.r;
    kr_error e = {0};
    for (int k = 0; k < j->origins && !e.code; k++)
        e = j->errs[k];
    json_t *body = e.code ? NULL : answer(j, &e);
    if (j->stream) { /* the request is the stream's: r is not touched */
        finish_stream(j, body, &e);
        job_free(j);
        return;
    }
    job_free(j);
    if (e.code)
        kd_work_fail(app, r, "evaluate", &e);
    else if (!body)
        kd_reply_error(r, 500, "internal", "out of memory writing the evaluation");
    else
        kd_reply_json(r, 200, body);
}

static void progress(evaluate_job *j) {
    char data[128];
    snprintf(data, sizeof data, "{\"done\":%d,\"total\":%d,\"elapsed_ms\":%.1f}", j->done,
             j->origins, kd_now_ms() - j->t0);
    kd_stream_event(j->stream, "progress", data);
}

/* The core's cancel check: the deadline, then the client (once streaming, through the
 * stream, since the request is then the stream's). */
static int check(void *ctx) {
    evaluate_job *j = ctx;
    if (!j->stream) return kd_work_check(&j->work);
    if (kd_now_s() > j->work.deadline) return KR_E_DEADLINE;
    return kd_stream_closed(j->stream) ? KR_E_CANCELLED : 0;
}

/* ---- admission (HTTP thread) --------------------------------------------------------------- */

/* Every series' plan (a failure names the series in the "series" form), their origins and
 * cost together, and in the "series" form their alignment; -1 with err set. */
static int plan_all(evaluate_job *j, kr_error *err) {
    for (int i = 0; i < j->set.n; i++) {
        if (kr_evaluate_plan_make(j->md->m, &j->set.in[i].req, &j->plans[i], err) < 0) {
            if (j->series_form) {
                char msg[KR_ERR_MAX];
                snprintf(msg, sizeof msg, "%s", err->msg);
                snprintf(err->msg, sizeof err->msg, "series[%d].%.*s", i, (int)sizeof err->msg - 24,
                         msg); /* room for the prefix */
            }
            return -1;
        }
        j->origins += j->plans[i].origins;
        j->flops += j->plans[i].flops;
        if (j->plans[i].pool_bytes > j->pool_bytes) j->pool_bytes = j->plans[i].pool_bytes;
    }
    if (!j->series_form) return 0;
    kr_evaluate_request *reqs = malloc((size_t)j->set.n * sizeof *reqs);
    if (!reqs) return kr_fail_code(err, KR_E_NO_MEMORY, "evaluate: out of memory");
    for (int i = 0; i < j->set.n; i++)
        reqs[i] = j->set.in[i].req;
    const int rc = kr_cross_section_check(reqs, j->plans, j->set.n, j->set.top_k, err);
    free(reqs);
    return rc;
}

/* Each origin's forecast request, its series' place in the list, and its tag. */
static void make_origins(evaluate_job *j) {
    for (int i = 0, g = 0; i < j->set.n; i++)
        for (int k = 0; k < j->plans[i].origins; k++, g++) {
            kr_evaluate_origin_request(&j->set.in[i].req, &j->plans[i], k, &j->reqs[g]);
            j->reqs[g].class_flops = j->flops; /* the whole request's, every series' */
            j->reqs[g].cancel = (kr_cancel){check, j};
            j->parts[g].owner = j;
            j->parts[g].series = i;
            j->parts[g].index = k;
            j->parts[g].sjob.request = &j->work.sjob; /* the evaluation counts as one request */
        }
}

static int admit(kd_work *w) {
    evaluate_job *j = (evaluate_job *)w;
    kd_app *app = w->app;
    kr_error err = {0};
    kr_pool_stats st;
    j->plans = calloc((size_t)j->set.n, sizeof *j->plans);
    j->evs = calloc((size_t)j->set.n, sizeof *j->evs);
    if (!j->plans || !j->evs) {
        kd_reply_no_memory(w->r);
        return -1;
    }
    if (plan_all(j, &err) < 0) {
        kd_refuse_error(app, w->r, "evaluate", &err);
        return -1;
    }
    kr_pool_stats_get(j->md->pool, &st);
    if (j->pool_bytes > st.bytes_total) {
        kd_refuse(app, w->r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "evaluate: an origin's %d paths need %zu bytes of KV cache; the whole pool "
                  "holds %zu (pool-bytes)",
                  j->set.in[0].req.samples, j->pool_bytes, st.bytes_total);
        return -1;
    }
    /* one request, one budget: the origins together (of every series), as their forecasts
     * alone would be */
    if (j->flops / 1e9 > (double)app->cfg.max_request_cost) {
        char of[48] = "";
        if (j->series_form) snprintf(of, sizeof of, " of %d series", j->set.n);
        kd_refuse(app, w->r, KD_REFUSED_TOO_LARGE, 422, "too_large",
                  "evaluate: %d origins%s need about %.0f GFLOP of model work together; "
                  "max-request-cost is %d GFLOP (fewer origins: a larger stride, or "
                  "first_origin / last_origin)",
                  j->origins, of, j->flops / 1e9, app->cfg.max_request_cost);
        return -1;
    }
    const size_t n = (size_t)j->origins;
    j->reqs = calloc(n, sizeof *j->reqs);
    j->res = calloc(n, sizeof *j->res);
    j->errs = calloc(n, sizeof *j->errs);
    j->parts = calloc(n, sizeof *j->parts);
    if (!j->reqs || !j->res || !j->errs || !j->parts) {
        kd_reply_no_memory(w->r);
        return -1;
    }
    for (; j->n_ready < j->set.n; j->n_ready++)
        if (kr_evaluation_init(&j->set.in[j->n_ready].req, &j->plans[j->n_ready],
                               &j->evs[j->n_ready], &err) < 0) {
            kd_reply_no_memory(w->r);
            return -1;
        }
    make_origins(j);
    return 0;
}

/* ---- on the scheduler ---------------------------------------------------------------------- */

static void origin_done(kd_sched_entry *sj, const kr_error *err);

/* ---- live mode: one series, grown origin by origin ---------------------------------------- */

typedef struct {
    evaluate_job *j;
    int s;           /* the series (index in set) */
    kr_candles more; /* the candles to append, or none: create the series of the first window */
} series_call;

static int series_step(void *ctx, kr_error *err) {
    series_call *c = ctx;
    evaluate_job *j = c->j;
    if (c->more.n) return kr_series_append(j->series, &c->more, err);
    const kr_evaluate_request *r = &j->set.in[c->s].req;
    const int start = j->plans[c->s].first_origin - r->lookback;
    kr_candles w = {.n = r->lookback, .timestamps = r->candles.timestamps + start};
    for (int i = 0; i < KR_D_IN; i++)
        w.columns[i] = r->candles.columns[i] ? r->candles.columns[i] + start : NULL;
    /* no predictor cache: growing it here, on the scheduler's thread, would refill a window
     * for every origin once it slides, outside any step's budget; each origin fills its own */
    j->series = kr_series_create_cacheless(j->md->m, j->md->pool, &w, &r->norm, 0, err);
    return j->series ? 0 : -1;
}

/* The series holds the candles before origin g (created at its series' first), its request
 * points at them; -1 with err set. The origins run one at a time, series by series: the
 * series before is done when the next one's first origin is queued. */
static int grow_series(evaluate_job *j, int g, kr_error *err) {
    const int s = j->parts[g].series, k = j->parts[g].index;
    const kr_evaluate_request *r = &j->set.in[s].req;
    const kr_evaluate_plan *plan = &j->plans[s];
    series_call c = {j, s, {0}};
    if (j->series && j->series_of != s) {
        kr_series_free(j->series);
        j->series = NULL;
    }
    j->series_of = s;
    if (!j->series && kd_with_room(j->work.app, series_step, &c, err) < 0) return -1;
    const int have = plan->first_origin - r->lookback + kr_series_length(j->series);
    const int o = plan->first_origin + k * plan->stride;
    if (o > have) {
        c.more.n = o - have;
        c.more.timestamps = r->candles.timestamps + have;
        for (int i = 0; i < KR_D_IN; i++)
            c.more.columns[i] = r->candles.columns[i] ? r->candles.columns[i] + have : NULL;
        if (kd_with_room(j->work.app, series_step, &c, err) < 0) return -1;
    }
    kr_series_request(j->series, &j->reqs[g]);
    return 0;
}

/* Origin k onto the scheduler; -1 with errs[k] set when it cannot be queued. Live mode: a
 * fork of the series' cache, grown to the origin (one origin at a time: the series must
 * not change while a forecast from it runs). */
static int queue_origin(evaluate_job *j, int k) {
    j->parts[k].sjob.done = origin_done;
    if (j->set.in[0].req.mode == KR_EVAL_LIVE) /* the mode is shared by every series */
        return grow_series(j, k, &j->errs[k]) < 0
                   ? -1
                   : kr_sched_add_forecast_series(j->ks, j->series, &j->reqs[k], &j->res[k],
                                                  &j->parts[k].sjob, &j->errs[k]);
    return kr_sched_add_forecast_on(j->ks, j->md->m, j->md->pool, &j->reqs[k], &j->res[k],
                                    &j->parts[k].sjob, &j->errs[k]);
}

/* The origins not queued yet will not be: they fail as origin k did. */
static void give_up(evaluate_job *j, int k) {
    for (int i = j->next; i < j->origins; i++)
        j->errs[i] = j->errs[k];
    j->pending -= j->origins - j->next;
    j->next = j->origins;
}

/* Queues origins while fewer than the window are in flight; after a failure, none. */
static void queue_more(evaluate_job *j) {
    while (j->next < j->origins && j->in_flight < j->window) {
        const int k = j->next++;
        if (queue_origin(j, k) == 0) {
            j->in_flight++;
            if (j->hold) j->work.sjob.core_jobs++; /* add's own are counted by the scheduler */
            continue;
        }
        j->pending--;
        give_up(j, k);
    }
}

/* Origin k ended (on the scheduler thread, inside its step): scored, and the next origin
 * queued in its place (the scheduler takes jobs added from a done callback into its
 * waiting line). */
static void origin_done(kd_sched_entry *sj, const kr_error *err) {
    origin_part *p = (origin_part *)sj;
    evaluate_job *j = p->owner;
    const int k = (int)(p - j->parts), s = p->series; /* k in the list, p->index in s */
    j->errs[k] = *err;
    /* scored now, so that only the scores outlive the origin's paths */
    if (!err->code)
        kr_evaluation_add(&j->evs[s], &j->set.in[s].req, p->index, &j->res[k], &j->errs[k]);
    kr_forecast_result_free(&j->res[k]);
    j->done++;
    j->in_flight--;
    j->pending--;
    if (j->errs[k].code)
        give_up(j, k);
    else
        queue_more(j);
    if (j->hold && j->next == j->origins) {
        j->hold = false;
        kd_sched_release(j->work.app->sched, &j->work.sjob);
    }
    if (j->pending == 0)
        finish(j);
    else if (j->stream)
        progress(j);
}

/* The first origins, as many as the pool can run at once and a few more, so that the
 * scheduler always has the next one while an evaluation holds one place in the queue and
 * other requests are served between its origins. */
static int add(kr_sched *ks, kd_work *w, kr_error *err) {
    evaluate_job *j = (evaluate_job *)w;
    kr_pool_stats st;
    kr_pool_stats_get(j->md->pool, &st);
    /* as many as can run at once: by the pool, and by the decode rows of a step */
    size_t fit = j->pool_bytes ? st.bytes_total / j->pool_bytes : 1;
    const int rows = w->app->cfg.max_batch_rows > 0 ? w->app->cfg.max_batch_rows : 512;
    const size_t by_rows = (size_t)(rows / j->set.in[0].req.samples); /* shared */
    if (by_rows < fit) fit = by_rows;
    j->ks = ks;
    j->window = j->set.in[0].req.mode == KR_EVAL_LIVE ? 1 : (fit > 64 ? 64 : (int)fit) + 2;
    j->pending = j->origins;
    /* on the scheduler thread, which alone runs the cancel checks: from here on they ask
     * the stream */
    if (j->wants_stream && (j->stream = kd_reply_stream(w->r, 200, "text/event-stream")))
        progress(j);
    j->next = 1;
    if (queue_origin(j, 0) < 0) { /* nothing queued: done is called once, with this error */
        *err = j->errs[0];
        return -1;
    }
    j->in_flight = 1;
    queue_more(j);
    if (j->next < j->origins) { /* more to queue from origin_done: hold the place */
        j->hold = true;
        w->sjob.core_jobs = 1;
    }
    return 0;
}

/* The whole job failed before any origin was queued. */
static void done(kd_work *w, const kr_error *err) {
    evaluate_job *j = (evaluate_job *)w;
    kd_work_fail_parts(j->errs, j->origins, err);
    finish(j);
}

static const kd_work_ops ops = {.admit = admit, .add = add, .done = done, .discard = discard};

/* The job of ei's inputs (taken), or NULL (refused, or out of memory). */
static evaluate_job *job_new(kd_app *app, kd_evaluate_intake *ei) {
    evaluate_job *j = ei->refused.status ? NULL : calloc(1, sizeof *j);
    if (!j) {
        kd_evaluate_series_input_free(&ei->set);
        return NULL;
    }
    j->set = ei->set;
    memset(&ei->set, 0, sizeof ei->set);
    j->series_form = ei->series_form;
    j->wants_stream = ei->stream;
    j->md = ei->md ? ei->md : &app->models.v[0];
    kd_models_hold(&app->models, j->md); /* a streamed job may outlive its request */
    j->t0 = kd_now_ms();
    kd_work_init(&j->work, &ops, app, NULL, j->set.in[0].timeout_ms); /* r: when submitted */
    for (int i = 0; i < j->set.n; i++)
        j->set.in[i].req.cancel = j->work.cancel;
    return j;
}

kd_outcome kd_evaluate_submit(kd_app *app, kd_request *r, kd_evaluate_intake *ei) {
    evaluate_job *j = job_new(app, ei);
    return kd_submit_for(app, r, j ? &j->work : NULL, &ei->refused, KD_ON_SCHEDULER);
}
