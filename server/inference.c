/* inference.c — /forecast, /generate, /tokenize, /detokenize: request checks on the HTTP
 * thread, model work on a worker.
 *
 * Caches come from the one pool that sessions live in. When the pool runs dry, the least
 * recently used idle session is evicted and the call retried; the core changes nothing on
 * such a failure, so the retry starts clean. */
#include "inference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forecast_json.h"
#include "routes.h"
#include "tokens_json.h"

#define MSG_MAX 512

static bool pool_exhausted(const kr_error *e) {
    return e->code == KR_E_POOL_EXHAUSTED;
}

static bool out_of_memory(const kr_error *e) {
    return strstr(e->msg, "out of memory") != NULL;
}

/* After a core call failed: 503 (pool busy with requests in flight), 500 (memory) or 422
 * (the request is valid JSON but the model cannot serve it). */
static void reply_core_error(kd_request *r, const char *what, const kr_error *e) {
    if (pool_exhausted(e))
        kd_reply_error(r, 503, "pool_exhausted",
                       "%s: the KV cache pool is in use by requests in flight; retry: %s", what,
                       e->msg);
    else if (out_of_memory(e))
        kd_reply_error(r, 500, "internal", "%s: %s", what, e->msg);
    else
        kd_reply_error(r, 422, "unprocessable", "%s: %s", what, e->msg);
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

/* ---- /forecast ------------------------------------------------------------------------------ */

typedef struct {
    kd_job job; /* first: the worker's pointer is this struct's */
    kd_app *app;
    kd_request *r;
    kd_forecast_input in;
} forecast_job;

static void run_forecast(kd_job *j) {
    forecast_job *f = (forecast_job *)j;
    kd_app *app = f->app;
    kd_request *r = f->r;
    kr_forecast_result res;
    kr_error err = {0};
    int rc;
    while ((rc = kr_forecast(app->model, app->pool, &f->in.req, &res, &err)) < 0 &&
           pool_exhausted(&err) && kd_sessions_evict_lru(app->sessions))
        ;
    if (rc < 0) {
        kd_forecast_input_free(&f->in);
        free(f);
        reply_core_error(r, "forecast", &err);
        return;
    }
    kd_metrics_add_tokens(app->metrics, (unsigned long long)res.usage.generated_tokens);
    json_t *body = kd_forecast_response_json(&f->in, &res);
    kr_forecast_result_free(&res);
    kd_forecast_input_free(&f->in);
    free(f);
    kd_reply_json(r, 200, body);
}

kd_outcome kd_handle_forecast(kd_app *app, kd_request *r) {
    const kd_forecast_limits lim = {app->cfg.max_candles, app->cfg.max_horizon,
                                    app->cfg.max_samples};
    char msg[MSG_MAX];
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    forecast_job *f = alloc_job(r, sizeof *f);
    if (!f) {
        json_decref(body);
        return KD_REPLIED;
    }
    const int bad = kd_forecast_request_parse_limited(body, kr_model_max_context(app->model), &lim,
                                                      &f->in, msg, sizeof msg);
    json_decref(body);
    if (bad) {
        free(f);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
    }
    const kr_forecast_request *q = &f->in.req;
    const int mc = q->max_context ? q->max_context : kr_model_max_context(app->model);
    const int window = q->n_context + q->horizon < mc ? q->n_context + q->horizon : mc;
    f->app = app;
    f->r = r;
    f->job.run = run_forecast;
    if ((q->use_cache && !fits_pool(app, r, window)) || kd_request_defer(r, &f->job) < 0) {
        kd_forecast_input_free(&f->in);
        free(f);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}

/* ---- /generate -------------------------------------------------------------------------- */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_generate_input in;
    kd_session *session; /* NULL: a temporary cache */
} generate_job;

static void generate_job_free(generate_job *g) {
    if (g->session) kd_sessions_release(g->app->sessions, g->session);
    kd_generate_input_free(&g->in);
    free(g);
}

static json_t *generate_response(const generate_job *g, const int32_t *s1, const int32_t *s2,
                                 const kr_cache *c, double ms) {
    json_t *o =
        json_pack("{s:o,s:i,s:{s:i,s:i,s:I,s:f}}", "tokens", kd_tokens_json(s1, s2, g->in.n_new),
                  "length", kr_cache_length(c), "usage", "appended", g->in.n_append, "generated",
                  g->in.n_new, "cache_bytes", (json_int_t)kr_cache_bytes(c), "elapsed_ms", ms);
    if (o && g->session && json_object_set_new(o, "session", json_string(g->in.session)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One /generate job on a worker: its cache (the session's or a temporary one), buffers for
 * the new tokens, and how the core call ended. */
typedef struct {
    kr_cache *c, *tmp;
    int32_t *s1, *s2;
    kr_error err;
    int rc;
    double t0;
} generate_run;

static void generate_begin(generate_job *g, generate_run *x) {
    const int n_new = g->in.n_new;
    *x = (generate_run){.rc = -1, .t0 = now_ms()};
    x->s1 = malloc((size_t)(n_new ? n_new : 1) * sizeof *x->s1);
    x->s2 = malloc((size_t)(n_new ? n_new : 1) * sizeof *x->s2);
    if (!x->s1 || !x->s2) {
        kr_fail(&x->err, "out of memory for %d new tokens", n_new);
        return;
    }
    x->c = g->session ? kd_session_cache(g->session)
                      : (x->tmp = kr_cache_create(g->app->pool, 0, &x->err));
}

static kr_generate_request generate_request(const generate_job *g) {
    return (kr_generate_request){g->in.s1,         g->in.s2,    g->in.stamps,   g->in.n_append,
                                 g->in.new_stamps, g->in.n_new, g->in.sampling, g->in.seed};
}

/* Runs the job alone, evicting idle sessions while the pool is exhausted. */
static void generate_alone(generate_job *g, generate_run *x) {
    const kr_generate_request q = generate_request(g);
    while ((x->rc = kr_generate(x->c, &q, x->s1, x->s2, &x->err)) < 0 && pool_exhausted(&x->err) &&
           kd_sessions_evict_lru(g->app->sessions))
        ;
}

static void generate_finish(generate_job *g, generate_run *x) {
    kd_app *app = g->app;
    kd_request *r = g->r;
    json_t *body = x->rc == 0 ? generate_response(g, x->s1, x->s2, x->c, now_ms() - x->t0) : NULL;
    if (x->rc == 0) kd_metrics_add_tokens(app->metrics, (unsigned long long)g->in.n_new);
    kr_cache_free(x->tmp);
    free(x->s1);
    free(x->s2);
    const kr_error err = x->err;
    const int rc = x->rc;
    generate_job_free(g); /* releases the session before the client can see the answer */
    if (rc == 0)
        kd_reply_json(r, 200, body);
    else
        reply_core_error(r, "generate", &err);
}

static void run_generate(kd_job *j) {
    generate_job *g = (generate_job *)j;
    generate_run x;
    generate_begin(g, &x);
    if (x.c) generate_alone(g, &x);
    generate_finish(g, &x);
}

/* Generate jobs queued together decode in lockstep: one batched step for all of them (see
 * kr_generate_batch). A job the pool could not hold then runs alone, evicting idle
 * sessions as it needs. */
static void run_generate_batch(kd_job **jobs, int n) {
    generate_job *g[KD_MAX_BATCH];
    generate_run x[KD_MAX_BATCH];
    kr_cache *caches[KD_MAX_BATCH];
    kr_generate_request reqs[KD_MAX_BATCH];
    int32_t *o1[KD_MAX_BATCH], *o2[KD_MAX_BATCH];
    kr_error errs[KD_MAX_BATCH];
    int idx[KD_MAX_BATCH], m = 0;
    for (int i = 0; i < n; i++) {
        g[i] = (generate_job *)jobs[i];
        generate_begin(g[i], &x[i]);
        if (!x[i].c) continue;
        caches[m] = x[i].c;
        reqs[m] = generate_request(g[i]);
        o1[m] = x[i].s1;
        o2[m] = x[i].s2;
        idx[m++] = i;
    }
    if (m > 0) kr_generate_batch(caches, reqs, m, o1, o2, errs);
    for (int k = 0; k < m; k++) {
        generate_run *xi = &x[idx[k]];
        xi->err = errs[k];
        xi->rc = errs[k].code == 0 ? 0 : -1;
        if (xi->rc < 0 && pool_exhausted(&xi->err)) generate_alone(g[idx[k]], xi);
    }
    for (int i = 0; i < n; i++)
        generate_finish(g[i], &x[i]);
}

static int session_status(kd_session_status st) {
    return st == KD_SESSION_NOT_FOUND ? 404
           : st == KD_SESSION_BUSY    ? 409
           : st == KD_SESSION_FULL    ? 503
                                      : 500;
}

static const char *session_code(kd_session_status st) {
    return st == KD_SESSION_NOT_FOUND ? "session_not_found"
           : st == KD_SESSION_BUSY    ? "session_busy"
           : st == KD_SESSION_FULL    ? "too_many_sessions"
                                      : "internal";
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
    g->job.run_batch = run_generate_batch;
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
            kd_reply_error(r, session_status(st), session_code(st), "%s", msg);
            return KD_REPLIED;
        }
    }
    if (!generate_fits(app, r, g) || kd_request_defer(r, &g->job) < 0) {
        generate_job_free(g);
        return KD_REPLIED;
    }
    return KD_DEFERRED;
}

/* ---- /tokenize ------------------------------------------------------------------------------ */

typedef struct {
    kd_job job;
    kd_app *app;
    kd_request *r;
    kd_candles candles;
} tokenize_job;

static void run_tokenize(kd_job *j) {
    tokenize_job *t = (tokenize_job *)j;
    kd_request *r = t->r;
    const int n = t->candles.n;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    float mean[KR_D_IN], std[KR_D_IN];
    kr_error err = {0};
    kr_forecast_request req;
    kr_forecast_request_init(&req);
    kd_candles_link(&t->candles, &req);
    int rc = -1;
    if (!s1 || !s2)
        kr_fail(&err, "out of memory for %d tokens", n);
    else
        rc = kr_tokenize_candles(t->app->model, &req, s1, s2, mean, std, &err);
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
        reply_core_error(r, "tokenize", &err);
}

kd_outcome kd_handle_tokenize(kd_app *app, kd_request *r) {
    char msg[MSG_MAX];
    json_t *body = kd_request_json(r);
    if (!body) return KD_REPLIED;
    tokenize_job *t = alloc_job(r, sizeof *t);
    if (!t) {
        json_decref(body);
        return KD_REPLIED;
    }
    const int bad = kd_candles_parse(json_object_get(body, "candles"), 1, app->cfg.max_candles,
                                     &t->candles, msg, sizeof msg);
    json_decref(body);
    if (bad) {
        free(t);
        kd_reply_error(r, 400, "invalid_request", "%s", msg);
        return KD_REPLIED;
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
        reply_core_error(r, "detokenize", &err);
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
