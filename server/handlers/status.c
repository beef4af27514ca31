/* status.c — the endpoints that describe the server and run no model: GET /health (the
 * state), GET /model (the model, pool, threads, sessions and limits) and GET /metrics (the
 * Prometheus exposition, with the gauges read from the parts at scrape time). */
#include "handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kd_outcome kd_handle_health(kd_app *app, kd_request *r) {
    static const char *const names[] = {"starting", "ok", "draining"};
    const int state = atomic_load(&app->state);
    kd_reply_json(r, state == KD_READY ? 200 : 503, json_pack("{s:s}", "status", names[state]));
    return KD_REPLIED;
}

static json_t *model_json(kd_app *app) {
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(app->model);
    const kr_predictor_config *pc = kr_model_predictor_config(app->model);
    const kd_config *c = &app->cfg;
    kr_pool_stats ps;
    kd_sessions_stats ss;
    kr_pool_stats_get(app->pool, &ps);
    kd_sessions_stats_get(app->sessions, &ss);
    const kd_model *dm = &app->models.v[0]; /* /model is the default model's view */
    return json_pack(
        "{s:s,s:s,s:s,s:s,s:i,s:I,s:s,s:s,"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:b},"
        "s:{s:I,s:I,s:I,s:i,s:i,s:i},"
        "s:{s:i,s:i,s:i},s:i,"
        "s:{s:i,s:i,s:i},"
        "s:{s:I,s:i,s:i,s:i},"
        "s:{s:s}}",
        "name", dm->id, "id", dm->id, "hash", dm->hash, "version", KR_VERSION, "max_context",
        kr_model_max_context(app->model), "parameters",
        (json_int_t)kr_model_param_count(app->model), "weights",
        kr_precision_name(kr_model_weights(app->model)), "kv",
        kr_precision_name(kr_model_kv(app->model)),
        /* tokenizer */
        "tokenizer", "d_in", tc->d_in, "d_model", tc->d_model, "n_heads", tc->n_heads, "ff_dim",
        tc->ff_dim, "n_enc_layers", tc->n_enc_layers, "n_dec_layers", tc->n_dec_layers, "s1_bits",
        tc->s1_bits, "s2_bits", tc->s2_bits,
        /* predictor */
        "predictor", "d_model", pc->d_model, "n_layers", pc->n_layers, "n_heads", pc->n_heads,
        "ff_dim", pc->ff_dim, "s1_bits", pc->s1_bits, "s2_bits", pc->s2_bits, "learn_te",
        pc->learn_te, "kv_shift", pc->kv_shift,
        /* pool */
        "pool", "bytes_total", (json_int_t)ps.bytes_total, "bytes_used", (json_int_t)ps.bytes_used,
        "block_bytes", (json_int_t)ps.block_bytes, "block_positions", ps.block_len, "blocks_total",
        ps.blocks_total, "blocks_used", ps.blocks_used,
        /* threads */
        "threads", "workers", app->n_workers, "compute", kr_threads(), "http", c->http_threads,
        "queue_size", c->queue_size,
        /* sessions */
        "sessions", "held", ss.count, "max", c->max_sessions, "ttl_seconds", c->session_ttl,
        /* limits */
        "limits", "max_body_bytes", (json_int_t)c->max_body_bytes, "max_candles", c->max_candles,
        "max_horizon", c->max_horizon, "max_samples", c->max_samples,
        /* kernels: the SIMD level of kronosd's own (matmul.c, attention.c) */
        "kernels", "simd", kr_simd_name(kr_simd_level()));
}

kd_outcome kd_handle_model(kd_app *app, kd_request *r) {
    kd_reply_json(r, 200, model_json(app));
    return KD_REPLIED;
}

/* The gauges read from the parts at scrape time (they exist once the model is loaded). */
static kd_gauges gauges(kd_app *app) {
    const int state = atomic_load(&app->state);
    if (state == KD_STARTING) return (kd_gauges){.ready = false};
    kr_pool_stats ps;
    kd_sessions_stats ss;
    kd_workers_stats ws;
    kd_sched_stats st;
    kr_pool_stats_get(app->pool, &ps);
    kd_sessions_stats_get(app->sessions, &ss);
    kd_workers_stats_get(app->workers, &ws);
    kd_sched_stats_get(app->sched, &st);
    kd_journal_stats js = {0};
    if (app->journal) kd_journal_stats_get(app->journal, &js);
    return (kd_gauges){.ready = state == KD_READY,
                       .pool_bytes_used = ps.bytes_used,
                       .pool_bytes_total = ps.bytes_total,
                       .sessions = ss.count,
                       .sessions_busy = ss.busy,
                       .sessions_created = ss.created,
                       .sessions_expired = ss.expired,
                       .sessions_evicted = ss.evicted,
                       .session_memory_bytes = ss.heap_bytes,
                       .session_memory_budget = ss.heap_budget,
                       .session_pool_bytes = ss.pool_bytes,
                       .session_pool_budget = ss.pool_budget,
                       .sessions_refused_room = ss.refused_room,
                       .sessions_refused_bytes = ss.refused_bytes,
                       .journal = app->journal != NULL,
                       .journal_bytes = js.bytes,
                       .journal_live_bytes = js.live_bytes,
                       .journal_records = js.records,
                       .journal_syncs = js.syncs,
                       .journal_rewrites = js.rewrites,
                       .journal_errors = js.errors,
                       .queue_depth = ws.queued + st.waiting,
                       .queue_capacity = ws.capacity,
                       .workers_busy = ws.busy,
                       .workers = ws.threads,
                       .running = ws.busy + st.active,
                       .step_rows = st.rows_last_step,
                       .steps = st.steps,
                       .step_rows_total = st.rows,
                       .active_max = st.active_max};
}

/* The API keys in use with the sessions each holds (malloc'd, *n of them); NULL without
 * keys, before the sessions exist, or out of memory (then the series is left out). */
static kd_key_sessions *key_sessions(kd_app *app, int *n) {
    const kd_keys *keys = atomic_load(&app->api_keys);
    *n = 0;
    if (!keys || atomic_load(&app->state) == KD_STARTING) return NULL;
    kd_key_sessions *ks = calloc((size_t)keys->n, sizeof *ks);
    if (!ks) return NULL;
    for (int i = 0; i < keys->n; i++)
        ks[i] = (kd_key_sessions){keys->keys[i].name,
                                  kd_sessions_count_of(app->sessions, keys->keys[i].owner)};
    *n = keys->n;
    return ks;
}

_Static_assert(KD_SCHED_MODELS_MAX >= KD_MODELS_MAX, "the scheduler keeps every model's figures");

typedef struct {
    kd_app *app;
    kd_model_served *v;
    const kr_model **m; /* each one's weights: the key of its scheduler figures */
    int n;
} served;

static void serve_one(void *ctx, const kd_model *md) {
    served *s = ctx;
    s->m[s->n] = md->m;
    kd_model_served *e = &s->v[s->n++];
    snprintf(e->id, sizeof e->id, "%s", md->id);
    e->requests = atomic_load(&md->counts->requests);
    e->tokens = atomic_load(&md->counts->tokens);
    e->bytes = kd_model_own_bytes(&s->app->models, md);
}

/* Every listed model with what it served, copied under the registry's lock, then its
 * scheduler figures (the scheduler's lock is not taken under the registry's) (malloc'd);
 * NULL before the models load, or out of memory (then the series are left out). */
static kd_model_served *models_served(kd_app *app, int *n) {
    *n = 0;
    if (atomic_load(&app->state) == KD_STARTING) return NULL;
    served s = {app, calloc(KD_MODELS_MAX, sizeof *s.v), calloc(KD_MODELS_MAX, sizeof *s.m), 0};
    if (!s.v || !s.m) {
        free(s.v);
        free(s.m);
        return NULL;
    }
    kd_models_each(&app->models, serve_one, &s);
    for (int i = 0; i < s.n; i++) {
        kr_sched_model_stats st;
        kd_sched_model_stats(app->sched, s.m[i], &st);
        s.v[i].steps = st.steps;
        s.v[i].step_rows = st.rows;
        s.v[i].step_seconds = st.ms / 1000.0;
    }
    free(s.m);
    *n = s.n;
    return s.v;
}

kd_outcome kd_handle_metrics(kd_app *app, kd_request *r) {
    kd_gauges g = gauges(app);
    kd_key_sessions *ks = key_sessions(app, &g.n_keys);
    kd_model_served *ms = models_served(app, &g.n_models);
    if (atomic_load(&app->state) != KD_STARTING)
        kd_models_changes(&app->models, &g.model_loads, &g.model_unloads);
    g.keys = ks;
    g.models = ms;
    char *text = kd_metrics_render(app->metrics, &g);
    free(ks);
    free(ms);
    kd_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text);
    return KD_REPLIED;
}
