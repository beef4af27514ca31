/* inference.c — /forecast, /generate, /tokenize, /detokenize: request checks on the HTTP
 * thread, model work on a worker.
 *
 * Caches come from the one pool that sessions live in. When the pool runs dry, the least
 * recently used idle session is evicted and the call retried; the core changes nothing on
 * such a failure, so the retry starts clean. */
#include "inference.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "candles_csv.h"
#include "forecast_json.h"
#include "forecast_series.h"
#include "series_json.h"
#include "json_fields.h"
#include "query_params.h"
#include "scheduler.h"
#include "routes.h"
#include "tokens_json.h"

#define MSG_MAX 512

static bool pool_exhausted(const kr_error *e) {
    return e->code == KR_E_POOL_EXHAUSTED;
}

/* A failed core call, by its error code: the client's fault (400, 422), busy (503), the
 * deadline (504), the client gone (499, which nobody reads but the log), or ours (500). */
void kd_reply_core_error(kd_request *r, const char *what, const kr_error *e) {
    switch (e->code) {
    case KR_E_INVALID:
        kd_reply_error(r, 400, "invalid_request", "%s", e->msg);
        break;
    case KR_E_TOO_LARGE:
        kd_reply_error(r, 422, "too_large", "%s", e->msg);
        break;
    case KR_E_POOL_EXHAUSTED:
        kd_reply_error(r, 503, "pool_exhausted",
                       "%s: the KV cache pool is in use by requests in flight; retry: %s", what,
                       e->msg);
        break;
    case KR_E_NO_MEMORY:
        kd_reply_error(r, 500, "internal", "%s: %s", what, e->msg);
        break;
    case KR_E_DEADLINE:
        kd_reply_error(r, 504, "deadline_exceeded", "%s: %s (timeout_ms or request-timeout)", what,
                       e->msg);
        break;
    case KR_E_CANCELLED:
        kd_reply_error(r, 499, "client_closed", "%s: the client closed the connection", what);
        break;
    default:
        kd_reply_error(r, 422, "unprocessable", "%s: %s", what, e->msg);
        break;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* When a request must be answered by: request-timeout from now, or sooner when the request
 * asks (timeout_ms, 0 when absent). */
double kd_deadline_of(const kd_app *app, long long timeout_ms) {
    long long ms = (long long)app->cfg.request_timeout * 1000;
    if (timeout_ms > 0 && timeout_ms < ms) ms = timeout_ms;
    return now_s() + (double)ms / 1e3;
}

int kd_watch_check(void *ctx) {
    const kd_request_watch *w = ctx;
    if (now_s() > w->deadline) return KR_E_DEADLINE;
    return kd_request_client_gone(w->r) ? KR_E_CANCELLED : 0;
}

static void count_end(kd_app *app, const kr_error *e) {
    if (e->code == KR_E_DEADLINE) kd_metrics_count(app->metrics, KD_COUNT_TIMED_OUT);
    if (e->code == KR_E_CANCELLED) kd_metrics_count(app->metrics, KD_COUNT_CANCELLED);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static kd_token_limits token_limits(const kd_app *app) {
    const kr_predictor_config *pc = kr_model_predictor_config(app->model);
    return (kd_token_limits){1 << pc->s1_bits, 1 << pc->s2_bits, app->cfg.max_candles};
}

/* 422 when even an empty pool could not hold `positions` positions of one cache. */
static bool fits_pool(kd_app *app, kd_request *r, int positions) {
    kr_pool_stats st;
    kr_pool_stats_get(app->pool, &st);
    const size_t need = kr_pool_bytes_for(app->model, positions);
    if (need <= st.bytes_total) return true;
    kd_reply_error(r, 422, "pool_too_small",
                   "%d positions need %zu bytes of KV cache; the pool holds %zu (pool-bytes)",
                   positions, need, st.bytes_total);
    return false;
}

static void *alloc_job(kd_request *r, size_t size) {
    void *job = calloc(1, size);
    if (!job) kd_reply_error(r, 500, "internal", "out of memory queueing the request");
    return job;
}

/* ---- CSV bodies and query parameters ---------------------------------------------------- */

/* What the query says: the request's fields (for a CSV body) and the answer's format. */
typedef struct {
    json_t *opts;
    const char *const *known; /* fields that may come in the query */
    bool csv_in, csv_out, has_format;
    char *err;
    size_t errlen;
} query_ctx;

static int on_query(void *ctx, const char *key, const char *value) {
    query_ctx *q = ctx;
    char v[KD_QUOTE_MAX * 2];
    if (!strcmp(key, "format") && q->known) {
        if (q->has_format)
            return kd_fail(q->err, q->errlen, "query parameter \"format\": given twice");
        q->has_format = true;
        if (value && (!strcmp(value, "csv") || !strcmp(value, "json"))) {
            q->csv_out = !strcmp(value, "csv");
            return 0;
        }
        kd_quote(value ? value : "", v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"format\": must be csv or json, got \"%s\"", v);
    }
    if (!q->csv_in && q->known) {
        kd_quote(key, v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"%s\": with a JSON body every field goes in the body; "
                       "query parameters (other than format) are for a text/csv body",
                       v);
    }
    static const char *const none[] = {NULL};
    return kd_query_option(q->opts, key, value, q->known ? q->known : none, q->err, q->errlen);
}

/* Reads the query into q (q->known NULL: the endpoint takes no query parameters); false
 * after replying 400. */
static bool read_query(kd_request *r, query_ctx *q, char *msg, size_t msglen) {
    const char *accept = kd_request_header(r, "Accept");
    q->csv_in = kd_request_is_csv(r);
    q->csv_out = q->known && accept && strstr(accept, "text/csv");
    q->err = msg;
    q->errlen = msglen;
    if (!(q->opts = json_object())) {
        kd_reply_error(r, 500, "internal", "out of memory reading the query");
        return false;
    }
    if (kd_request_query_each(r, on_query, q) != 0) {
        json_decref(q->opts);
        q->opts = NULL;
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return false;
    }
    return true;
}

/* The candles of a text/csv body; false after replying 400. */
static bool csv_candles(kd_request *r, int min_count, int max_count, kd_candles *out, char *msg,
                        size_t msglen) {
    size_t len;
    const char *body = kd_request_body(r, &len);
    if (kd_candles_csv_parse(body ? body : "", len, min_count, max_count, out, msg, msglen) < 0) {
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return false;
    }
    return true;
}

/* ---- /forecast ------------------------------------------------------------------------------ */

typedef struct {
    kd_job job;        /* first: the worker's pointer is this struct's */
    kd_sched_job sjob; /* or the scheduler's */
    kd_app *app;
    kd_request *r;
    kd_forecast_input in;
    kr_forecast_result res;
    kd_request_watch watch;
    bool csv_out;
} forecast_job;

static void forecast_finish(forecast_job *f, kr_forecast_result *res, const kr_error *err) {
    kd_app *app = f->app;
    kd_request *r = f->r;
    json_t *body = NULL;
    char *text = NULL;
    if (err->code == 0) {
        kd_metrics_add_tokens(app->metrics, (unsigned long long)res->usage.generated_tokens);
        if (f->csv_out)
            text = kd_forecast_csv(&f->in, res);
        else
            body = kd_forecast_response_json(&f->in, res);
        kr_forecast_result_free(res);
    }
    count_end(app, err);
    kd_forecast_input_free(&f->in);
    free(f);
    if (err->code)
        kd_reply_core_error(r, "forecast", err);
    else if (text)
        kd_reply_text(r, 200, "text/csv; charset=utf-8", text);
    else
        kd_reply_json(r, 200, body);
}

/* On the scheduler: the forecast joins the steps of every request in flight. */
static int forecast_add(kr_sched *ks, kd_sched_job *sj, kr_error *err) {
    forecast_job *f = (forecast_job *)((char *)sj - offsetof(forecast_job, sjob));
    return kr_sched_add_forecast(ks, &f->in.req, &f->res, sj, err);
}

static void forecast_done(kd_sched_job *sj, const kr_error *err) {
    forecast_job *f = (forecast_job *)((char *)sj - offsetof(forecast_job, sjob));
    forecast_finish(f, &f->res, err);
}

/* On a worker, alone: the reference path (use_cache false), or every forecast when
 * batching is off. One the pool cannot hold evicts idle sessions while there are some. */
static void run_forecast(kd_job *j) {
    forecast_job *f = (forecast_job *)j;
    kd_app *app = f->app;
    kr_error err = {0};
    while (kr_forecast(app->model, app->pool, &f->in.req, &f->res, &err) < 0 &&
           pool_exhausted(&err) && kd_sessions_evict_lru(app->sessions))
        ;
    forecast_finish(f, &f->res, &err);
}

/* Whether the plan can ever run here; false after replying 400 or 422 too_large. */
bool kd_admit_forecast(kd_app *app, kd_request *r, const kr_forecast_request *q) {
    kr_forecast_plan plan;
    kr_error err = {0};
    kr_pool_stats st;
    kr_pool_stats_get(app->pool, &st);
    int refused = -1; /* a kd_refusal once refused */
    if (kr_forecast_plan_make(app->model, q, &plan, &err) < 0) {
        refused = err.code == KR_E_INVALID ? KD_REFUSED_INVALID : KD_REFUSED_TOO_LARGE;
        kd_reply_core_error(r, "forecast", &err);
    } else if (plan.pool_bytes > st.bytes_total) {
        refused = KD_REFUSED_TOO_LARGE;
        kd_reply_error(r, 422, "too_large",
                       "forecast: %d paths over a window of %d need %zu bytes of KV cache; the "
                       "whole pool holds %zu (pool-bytes)",
                       q->samples, plan.max_context, plan.pool_bytes, st.bytes_total);
    } else if (plan.flops / 1e9 > (double)app->cfg.max_request_cost) {
        refused = KD_REFUSED_TOO_LARGE;
        kd_reply_error(r, 422, "too_large",
                       "forecast: needs about %.0f GFLOP of model work (%d paths x %d steps, %d "
                       "of them recomputing a slid window); max-request-cost is %d GFLOP",
                       plan.flops / 1e9, q->samples, q->horizon, plan.recomputed_steps,
                       app->cfg.max_request_cost);
    }
    if (refused >= 0) kd_metrics_refuse(app->metrics, (kd_refusal)refused);
    return refused < 0;
}

/* The request from a JSON body, or from a CSV body and the query. */
static int parse_forecast(kd_app *app, kd_request *r, query_ctx *q, const json_t *body,
                          forecast_job *f, char *msg, size_t msglen) {
    const kd_forecast_limits lim = {app->cfg.max_candles, app->cfg.max_horizon,
                                    app->cfg.max_samples};
    const int mc = kr_model_max_context(app->model);
    if (q->csv_in) {
        kd_candles candles;
        if (!csv_candles(r, 2, app->cfg.max_candles, &candles, msg, msglen)) return -1;
        if (kd_forecast_request_with_candles(q->opts, &candles, mc, &lim, &f->in, msg, msglen) <
            0) {
            kd_reply_error(r, 400, "invalid_request", "%s", msg);
            return -1;
        }
        return 0;
    }
    const int bad = kd_forecast_request_parse_limited(body, mc, &lim, &f->in, msg, msglen);
    if (bad) kd_reply_error(r, 400, "invalid_request", "%s", msg);
    return bad ? -1 : 0;
}

kd_outcome kd_handle_forecast(kd_app *app, kd_request *r) {
    const char *known[32] = {"format"}; /* and the request's fields but candles */
    const char *const *names = kd_forecast_option_names();
    char msg[MSG_MAX];
    for (int i = 0, n = 1; names[i] && n < 31; i++)
        known[n++] = names[i];
    query_ctx qc = {.known = known};
    if (!read_query(r, &qc, msg, sizeof msg)) return KD_REPLIED;
    json_t *body = NULL; /* a JSON body, parsed once */
    if (!qc.csv_in) {
        if (!(body = kd_request_json(r))) {
            json_decref(qc.opts);
            return KD_REPLIED;
        }
        if (kd_is_series_request(body)) { /* many series: forecast_series.c */
            kd_outcome out = KD_REPLIED;
            if (qc.csv_out)
                kd_reply_error(r, 400, "invalid_request",
                               "format: csv answers one series; a \"series\" request answers JSON");
            else
                out = kd_handle_forecast_series(app, r, body);
            json_decref(body);
            json_decref(qc.opts);
            return out;
        }
    }
    forecast_job *f = alloc_job(r, sizeof *f);
    const int bad = !f || parse_forecast(app, r, &qc, body, f, msg, sizeof msg) < 0;
    json_decref(body);
    if (bad) {
        json_decref(qc.opts);
        free(f);
        kd_metrics_refuse(app->metrics, KD_REFUSED_INVALID);
        return KD_REPLIED;
    }
    json_decref(qc.opts);
    f->csv_out = qc.csv_out;
    f->watch.deadline = kd_deadline_of(app, f->in.timeout_ms);
    f->app = app;
    f->r = r;
    f->watch.r = r;
    f->in.req.cancel = (kr_cancel){kd_watch_check, &f->watch};
    f->job.run = run_forecast;
    f->sjob.add = forecast_add;
    f->sjob.done = forecast_done;
    bool queued = kd_admit_forecast(app, r, &f->in.req);
    if (queued && (app->sched && f->in.req.use_cache ? kd_request_defer_sched(r, &f->sjob)
                                                     : kd_request_defer(r, &f->job)) < 0) {
        kd_metrics_refuse(app->metrics, KD_REFUSED_BUSY);
        queued = false;
    }
    if (!queued) {
        kd_forecast_input_free(&f->in);
        free(f);
        return KD_REPLIED;
    }
    kd_metrics_count(app->metrics, KD_COUNT_ADMITTED);
    return KD_DEFERRED;
}

/* ---- /generate -------------------------------------------------------------------------- */

/* One /generate request: its cache (the session's or a temporary one), buffers for the new
 * tokens, and how the core call ended. */
typedef struct {
    kd_job job;        /* first: the worker's pointer is this struct's */
    kd_sched_job sjob; /* or the scheduler's */
    kd_app *app;
    kd_request *r;
    kd_generate_input in;
    kd_session *session; /* NULL: a temporary cache */
    kr_generate_request req;
    kd_request_watch watch;
    kr_cache *c, *tmp;
    int32_t *s1, *s2;
    double t0;
} generate_job;

static void generate_job_free(generate_job *g) {
    if (g->session) kd_sessions_release(g->app->sessions, g->session);
    kr_cache_free(g->tmp);
    free(g->s1);
    free(g->s2);
    kd_generate_input_free(&g->in);
    free(g);
}

static json_t *generate_response(const generate_job *g, double ms) {
    json_t *o = json_pack(
        "{s:o,s:i,s:{s:i,s:i,s:I,s:f}}", "tokens", kd_tokens_json(g->s1, g->s2, g->in.n_new),
        "length", kr_cache_length(g->c), "usage", "appended", g->in.n_append, "generated",
        g->in.n_new, "cache_bytes", (json_int_t)kr_cache_bytes(g->c), "elapsed_ms", ms);
    if (o && g->session && json_object_set_new(o, "session", json_string(g->in.session)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Its cache and token buffers; -1 with err set when there is no memory for them. */
static int generate_begin(generate_job *g, kr_error *err) {
    const int n_new = g->in.n_new;
    g->t0 = now_ms();
    g->s1 = malloc((size_t)(n_new ? n_new : 1) * sizeof *g->s1);
    g->s2 = malloc((size_t)(n_new ? n_new : 1) * sizeof *g->s2);
    if (!g->s1 || !g->s2)
        return kr_fail_code(err, KR_E_NO_MEMORY, "generate: out of memory for %d new tokens",
                            n_new);
    g->c = g->session ? kd_session_cache(g->session)
                      : (g->tmp = kr_cache_create(g->app->pool, 0, err));
    return g->c ? 0 : -1;
}

static void generate_finish(generate_job *g, const kr_error *err) {
    kd_app *app = g->app;
    kd_request *r = g->r;
    json_t *body = err->code == 0 ? generate_response(g, now_ms() - g->t0) : NULL;
    if (err->code == 0) kd_metrics_add_tokens(app->metrics, (unsigned long long)g->in.n_new);
    count_end(app, err);
    const kr_error e = *err;
    generate_job_free(g); /* releases the session before the client can see the answer */
    if (e.code == 0)
        kd_reply_json(r, 200, body);
    else
        kd_reply_core_error(r, "generate", &e);
}

static int generate_add(kr_sched *ks, kd_sched_job *sj, kr_error *err) {
    generate_job *g = (generate_job *)((char *)sj - offsetof(generate_job, sjob));
    if (generate_begin(g, err)) return -1;
    return kr_sched_add_generate(ks, g->c, &g->req, g->s1, g->s2, sj, err);
}

static void generate_done(kd_sched_job *sj, const kr_error *err) {
    generate_finish((generate_job *)((char *)sj - offsetof(generate_job, sjob)), err);
}

/* On a worker, alone (batching off), evicting idle sessions while the pool is exhausted. */
static void run_generate(kd_job *j) {
    generate_job *g = (generate_job *)j;
    kr_error err = {0};
    if (generate_begin(g, &err) == 0)
        while (kr_generate(g->c, &g->req, g->s1, g->s2, &err) < 0 && pool_exhausted(&err) &&
               kd_sessions_evict_lru(g->app->sessions))
            ;
    generate_finish(g, &err);
}

/* Checks what only the session's state can tell; false after replying. */
static bool generate_fits(kd_app *app, kd_request *r, const generate_job *g) {
    const int len = g->session ? kr_cache_length(kd_session_cache(g->session)) : 0;
    const int cap = kr_model_max_context(app->model);
    const long need = (long)len + g->in.n_append + g->in.n_new;
    if (need > cap) {
        kd_reply_error(r, 422, "context_overflow",
                       "%d cached + %d tokens + %d max_new_tokens = %ld positions exceed "
                       "max_context %d; start a new session or send fewer tokens",
                       len, g->in.n_append, g->in.n_new, need, cap);
        return false;
    }
    if (g->in.n_new > 0 && len + g->in.n_append == 0) {
        kd_reply_error(r, 422, "no_context",
                       "max_new_tokens: %d, but there is no context to generate from; send "
                       "tokens first",
                       g->in.n_new);
        return false;
    }
    return fits_pool(app, r, (int)need);
}

kd_outcome kd_handle_generate(kd_app *app, kd_request *r) {
    const kd_token_limits lim = token_limits(app);
    char msg[MSG_MAX];
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    generate_job *g = alloc_job(r, sizeof *g);
    if (!g) {
        json_decref(body);
        return KD_REPLIED;
    }
    g->app = app;
    g->r = r;
    g->job.run = run_generate;
    g->sjob.add = generate_add;
    g->sjob.done = generate_done;
    char path_id[KD_SESSION_ARG_MAX + 2]; /* /sessions/{id}/generate names the session */
    const int bad = kd_generate_request_parse(body, &lim, &g->in, msg, sizeof msg) < 0 ||
                    (kd_path_session(kd_request_path(r), path_id, sizeof path_id) &&
                     kd_generate_set_session(&g->in, path_id, msg, sizeof msg) < 0);
    json_decref(body);
    if (bad) {
        generate_job_free(g);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    if (g->in.has_session) {
        kd_session_status st =
            kd_sessions_acquire(app->sessions, g->in.session, &g->session, msg, sizeof msg);
        if (st != KD_SESSION_OK) {
            generate_job_free(g);
            kd_reply_session_error(r, st, msg);
            return KD_REPLIED;
        }
        if (kd_session_kind_of(g->session)) { /* a candle session has no token cache */
            kd_reply_error(r, 400, "wrong_session_kind",
                           "session %s is a candle session: append candles with POST "
                           "/sessions/{id}/candles and forecast with POST /sessions/{id}/forecast",
                           g->in.session);
            generate_job_free(g);
            return KD_REPLIED;
        }
    }
    g->req = (kr_generate_request){.s1 = g->in.s1,
                                   .s2 = g->in.s2,
                                   .stamps = g->in.stamps,
                                   .n_append = g->in.n_append,
                                   .new_stamps = g->in.new_stamps,
                                   .n_new = g->in.n_new,
                                   .sampling = g->in.sampling,
                                   .seed = g->in.seed,
                                   .cancel = {kd_watch_check, &g->watch}};
    g->watch = (kd_request_watch){r, kd_deadline_of(app, g->in.timeout_ms)};
    if (!generate_fits(app, r, g)) {
        generate_job_free(g);
        return KD_REPLIED;
    }
    if ((app->sched ? kd_request_defer_sched(r, &g->sjob) : kd_request_defer(r, &g->job)) < 0) {
        kd_metrics_refuse(app->metrics, KD_REFUSED_BUSY);
        generate_job_free(g);
        return KD_REPLIED;
    }
    kd_metrics_count(app->metrics, KD_COUNT_ADMITTED);
    return KD_DEFERRED;
}

/* ---- /tokenize ------------------------------------------------------------------------------ */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_candles candles;
    kr_norm norm; /* its pinned statistics, if any */
} tokenize_job;

static void run_tokenize(kd_job *j) {
    tokenize_job *t = (tokenize_job *)j;
    kd_request *r = t->r;
    const int n = t->candles.n;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    float mean[KR_D_IN], std[KR_D_IN];
    kr_error err = {0};
    kr_candles req;
    kd_candles_link(&t->candles, &req);
    int rc = -1;
    if (!s1 || !s2)
        kr_fail(&err, "out of memory for %d tokens", n);
    else
        rc = kr_tokenize_candles(t->app->model, &req, &t->norm, s1, s2, mean, std, &err);
    for (int c = 0; rc == 0 && c < KR_D_IN; c++)
        if (!isfinite(mean[c]) || !isfinite(std[c]))
            rc = kr_fail(&err, "candles.%s: its mean or spread overflows float32; scale it down",
                         kr_column_names[c]);
    json_t *body = rc == 0 ? kd_tokenize_response_json(s1, s2, n, mean, std) : NULL;
    free(s1);
    free(s2);
    kd_candles_free(&t->candles);
    free(t);
    if (rc == 0)
        kd_reply_json(r, 200, body);
    else
        kd_reply_core_error(r, "tokenize", &err);
}

static const char *const tokenize_fields[] = {"candles", "normalization", NULL};

kd_outcome kd_handle_tokenize(kd_app *app, kd_request *r) {
    char msg[MSG_MAX];
    query_ctx qc = {0};
    if (!read_query(r, &qc, msg, sizeof msg)) return KD_REPLIED;
    json_decref(qc.opts);
    tokenize_job *t = alloc_job(r, sizeof *t);
    if (!t) return KD_REPLIED;
    t->norm = (kr_norm){0};
    if (qc.csv_in) {
        if (!csv_candles(r, 1, app->cfg.max_candles, &t->candles, msg, sizeof msg)) {
            free(t);
            return KD_REPLIED;
        }
    } else {
        json_t *body = kd_request_json(r);
        const int bad =
            !body || kd_check_fields(body, "", tokenize_fields, msg, sizeof msg) < 0 ||
            kd_candles_parse(json_object_get(body, "candles"), 1, app->cfg.max_candles, &t->candles,
                             msg, sizeof msg) < 0 ||
            kd_normalization_parse(kd_field(body, "normalization"), &t->norm, msg, sizeof msg) < 0;
        if (bad && body) kd_reply_error(r, 400, "invalid_request", "%s", msg);
        json_decref(body);
        if (bad) {
            kd_candles_free(&t->candles);
            free(t);
            return KD_REPLIED;
        }
    }
    t->app = app;
    t->r = r;
    t->job.run = run_tokenize;
    if (kd_request_defer(r, &t->job) < 0) {
        kd_candles_free(&t->candles);
        free(t);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}

/* ---- /detokenize ---------------------------------------------------------------------------- */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_detokenize_input in;
} detokenize_job;

static void run_detokenize(kd_job *j) {
    detokenize_job *d = (detokenize_job *)j;
    kd_request *r = d->r;
    const int n = d->in.n;
    double *out = malloc((size_t)n * KR_D_IN * sizeof *out);
    kr_error err = {0};
    int rc = -1;
    if (!out)
        kr_fail(&err, "out of memory for %d candles", n);
    else
        rc = kr_detokenize(d->app->model, d->in.s1, d->in.s2, n, d->in.mean, d->in.std, out, &err);
    json_t *body = rc == 0 ? kd_detokenize_response_json(out, n) : NULL;
    free(out);
    kd_detokenize_input_free(&d->in);
    free(d);
    if (rc == 0)
        kd_reply_json(r, 200, body);
    else
        kd_reply_core_error(r, "detokenize", &err);
}

kd_outcome kd_handle_detokenize(kd_app *app, kd_request *r) {
    const kd_token_limits lim = token_limits(app);
    char msg[MSG_MAX];
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    detokenize_job *d = alloc_job(r, sizeof *d);
    if (!d) {
        json_decref(body);
        return KD_REPLIED;
    }
    const int bad = kd_detokenize_request_parse(body, &lim, &d->in, msg, sizeof msg);
    json_decref(body);
    if (bad) {
        kd_detokenize_input_free(&d->in);
        free(d);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    d->app = app;
    d->r = r;
    d->job.run = run_detokenize;
    if (kd_request_defer(r, &d->job) < 0) {
        kd_detokenize_input_free(&d->in);
        free(d);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}
