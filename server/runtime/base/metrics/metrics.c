/* metrics.c — request counters, latency histograms, and the text exposition. */
#include "metrics.h"

#include "kronos.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATUS_MIN   100
#define N_STATUS     500 /* 100..599 */
#define KEY_NAME_MAX 64  /* bytes of a key's name kept for its label (keys.h's are shorter) */

static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                   0.25,  0.5,    1,     2.5,  5,     10,   30};
#define N_BUCKETS (sizeof bucket_le / sizeof bucket_le[0])

/* Observations in the buckets of bucket_le, their count and sum. */
typedef struct {
    atomic_ullong bucket[N_BUCKETS + 1]; /* the last is +Inf only */
    atomic_ullong count, sum_us;
} histogram;

typedef struct {
    atomic_ullong by_status[N_STATUS];
    histogram h;
} endpoint_series;

struct kd_metrics {
    const char *const *names;
    int n;
    endpoint_series *ep;
    atomic_ullong tokens;
    atomic_ullong anomalies, anomaly_checks; /* /evaluate's flagged and checked origin-steps */
    atomic_ullong append_anomalies, append_checks; /* calibrated sessions' appended candles */
    atomic_ullong counts[KD_N_COUNTS];
    atomic_ullong refused[KD_N_REFUSALS];
    histogram queue_delay[KD_N_CLASSES];
    pthread_mutex_t key_lock; /* making a key's slot */
    atomic_int n_keys;        /* slots made; each slot's name is written before it counts */
    char (*key_names)[KEY_NAME_MAX + 1];
    atomic_ullong *key_requests;
};

static const char *const class_names[KD_N_CLASSES] = {"light", "heavy"};

static const char *const refuse_reasons[KD_N_REFUSALS] = {"invalid", "too_large", "busy"};

kd_metrics *kd_metrics_create(const char *const *endpoints, int n_endpoints) {
    kd_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->key_lock, NULL);
    /* calloc'd zeros are valid initial atomics on every platform this builds on */
    m->ep = calloc((size_t)n_endpoints, sizeof *m->ep);
    m->key_names = calloc(KD_METRICS_KEYS_MAX, sizeof *m->key_names);
    m->key_requests = calloc(KD_METRICS_KEYS_MAX, sizeof *m->key_requests);
    if (!m->ep || !m->key_names || !m->key_requests) {
        kd_metrics_free(m);
        return NULL;
    }
    m->names = endpoints;
    m->n = n_endpoints;
    return m;
}

void kd_metrics_free(kd_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->key_lock);
    free(m->key_names);
    free(m->key_requests);
    free(m->ep);
    free(m);
}

int kd_metrics_key_slot(kd_metrics *m, const char *name) {
    pthread_mutex_lock(&m->key_lock);
    const int n = atomic_load(&m->n_keys);
    int slot = -1;
    for (int i = 0; i < n && slot < 0; i++)
        if (strcmp(m->key_names[i], name) == 0) slot = i;
    if (slot < 0 && n < KD_METRICS_KEYS_MAX) {
        snprintf(m->key_names[n], sizeof m->key_names[n], "%s", name);
        atomic_store(&m->n_keys, n + 1); /* after the name: a scrape reads n first */
        slot = n;
    }
    pthread_mutex_unlock(&m->key_lock);
    return slot;
}

void kd_metrics_key_request(kd_metrics *m, int slot) {
    if (slot >= 0 && slot < KD_METRICS_KEYS_MAX)
        atomic_fetch_add_explicit(&m->key_requests[slot], 1, memory_order_relaxed);
}

static void histogram_observe(histogram *h, double seconds) {
    if (!(seconds >= 0)) seconds = 0;
    size_t b = 0;
    while (b < N_BUCKETS && seconds > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)(seconds * 1e6),
                              memory_order_relaxed);
}

void kd_metrics_observe(kd_metrics *m, int endpoint, int status, double seconds) {
    if (endpoint < 0 || endpoint >= m->n) return;
    endpoint_series *e = &m->ep[endpoint];
    if (status >= STATUS_MIN && status < STATUS_MIN + N_STATUS)
        atomic_fetch_add_explicit(&e->by_status[status - STATUS_MIN], 1, memory_order_relaxed);
    histogram_observe(&e->h, seconds);
}

void kd_metrics_observe_queue_delay(kd_metrics *m, kd_class c, double seconds) {
    if (c >= 0 && c < KD_N_CLASSES) histogram_observe(&m->queue_delay[c], seconds);
}

void kd_metrics_add_tokens(kd_metrics *m, unsigned long long generated) {
    atomic_fetch_add_explicit(&m->tokens, generated, memory_order_relaxed);
}

void kd_metrics_add_anomalies(kd_metrics *m, unsigned long long flagged,
                              unsigned long long checked) {
    atomic_fetch_add_explicit(&m->anomalies, flagged, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->anomaly_checks, checked, memory_order_relaxed);
}

void kd_metrics_add_append_anomalies(kd_metrics *m, unsigned long long flagged,
                                     unsigned long long checked) {
    atomic_fetch_add_explicit(&m->append_anomalies, flagged, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->append_checks, checked, memory_order_relaxed);
}

void kd_metrics_count(kd_metrics *m, kd_count what) {
    if (what >= 0 && what < KD_N_COUNTS)
        atomic_fetch_add_explicit(&m->counts[what], 1, memory_order_relaxed);
}

void kd_metrics_refuse(kd_metrics *m, kd_refusal why) {
    if (why >= 0 && why < KD_N_REFUSALS)
        atomic_fetch_add_explicit(&m->refused[why], 1, memory_order_relaxed);
}

static unsigned long long load(atomic_ullong *a) {
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void header(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name_bucket{label="value",le=...}, name_sum and name_count of one histogram. */
static void render_histogram(FILE *f, const char *name, const char *label, const char *value,
                             histogram *h) {
    unsigned long long cum = 0;
    for (size_t b = 0; b <= N_BUCKETS; b++) {
        cum += load(&h->bucket[b]);
        if (b < N_BUCKETS)
            fprintf(f, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name, label, value, bucket_le[b],
                    cum);
        else
            fprintf(f, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, value, cum);
    }
    fprintf(f, "%s_sum{%s=\"%s\"} %.6f\n", name, label, value, (double)load(&h->sum_us) * 1e-6);
    fprintf(f, "%s_count{%s=\"%s\"} %llu\n", name, label, value, load(&h->count));
}

static void render_requests(FILE *f, kd_metrics *m) {
    header(f, "kronosd_requests_total", "counter", "Requests answered, by endpoint and status.");
    for (int e = 0; e < m->n; e++)
        for (int s = 0; s < N_STATUS; s++) {
            unsigned long long v = load(&m->ep[e].by_status[s]);
            if (v)
                fprintf(f, "kronosd_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                        m->names[e], s + STATUS_MIN, v);
        }
    header(f, "kronosd_request_duration_seconds", "histogram",
           "Time from the first byte of a request to its answer being queued.");
    for (int e = 0; e < m->n; e++)
        render_histogram(f, "kronosd_request_duration_seconds", "endpoint", m->names[e],
                         &m->ep[e].h);
    header(f, "kronosd_queue_delay_seconds", "histogram",
           "Time from a model request's admission to the queue to its first model step, by "
           "class (light: it plans at most light-request-mflop of work).");
    for (int c = 0; c < KD_N_CLASSES; c++)
        render_histogram(f, "kronosd_queue_delay_seconds", "class", class_names[c],
                         &m->queue_delay[c]);
}

static void gauge(FILE *f, const char *name, const char *type, const char *help,
                  unsigned long long v) {
    header(f, name, type, help);
    fprintf(f, "%s %llu\n", name, v);
}

/* A counter of /evaluate's answers and of appends to sessions, one series each. */
static void by_source(FILE *f, const char *name, const char *help, unsigned long long evaluate,
                      unsigned long long append) {
    header(f, name, "counter", help);
    fprintf(f, "%s{source=\"evaluate\"} %llu\n%s{source=\"append\"} %llu\n", name, evaluate, name,
            append);
}

/* Which figure of each model a per-model series reports. */
typedef enum {
    MODEL_REQUESTS,
    MODEL_TOKENS,
    MODEL_BYTES,
    MODEL_STEPS,
    MODEL_STEP_ROWS,
    MODEL_STEP_SECONDS
} model_figure;

/* The counted figures of a model (all but its step seconds). */
static unsigned long long model_count(const kd_model_served *s, model_figure which) {
    return which == MODEL_REQUESTS ? s->requests
           : which == MODEL_TOKENS ? s->tokens
           : which == MODEL_BYTES  ? (unsigned long long)s->bytes
           : which == MODEL_STEPS  ? s->steps
                                   : s->step_rows;
}

/* One series labelled by model id, a sample per listed model. */
static void by_model(FILE *f, const kd_gauges *g, const char *name, const char *type,
                     const char *help, model_figure which) {
    header(f, name, type, help);
    for (int i = 0; i < g->n_models; i++) {
        const kd_model_served *s = &g->models[i];
        fprintf(f, "%s{model=\"%s\"} ", name, s->id);
        if (which == MODEL_STEP_SECONDS)
            fprintf(f, "%.6f\n", s->step_seconds);
        else
            fprintf(f, "%llu\n", model_count(s, which));
    }
}

/* One series of one number: a gauge or a counter. */
typedef struct {
    const char *name, *type, *help;
    unsigned long long value;
} one_series;

static void each_gauge(FILE *f, const one_series *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        gauge(f, s[i].name, s[i].type, s[i].help, s[i].value);
}

/* The sessions' gauges and counters, and the journal's when there is one. */
static void render_sessions(FILE *f, const kd_gauges *g) {
    const one_series sessions[] = {
        {"kronosd_sessions", "gauge", "Sessions held.", (unsigned long long)g->sessions},
        {"kronosd_sessions_busy", "gauge", "Sessions in use by a request.",
         (unsigned long long)g->sessions_busy},
        {"kronosd_sessions_created_total", "counter", "Sessions created.", g->sessions_created},
        {"kronosd_session_expirations_total", "counter", "Idle sessions past their TTL.",
         g->sessions_expired},
        {"kronosd_session_evictions_total", "counter",
         "Idle sessions evicted (least recently used first) to free pool memory or a slot.",
         g->sessions_evicted},
        {"kronosd_session_memory_bytes", "gauge",
         "Sessions' memory outside the KV pool (candles, tokens, tokenizer encoder caches).",
         g->session_memory_bytes},
        {"kronosd_session_memory_budget_bytes", "gauge",
         "session-memory-bytes: the budget of that memory (0: none).", g->session_memory_budget},
        {"kronosd_session_pool_bytes", "gauge",
         "KV pool bytes held by sessions' caches (blocks shared by forks counted by each).",
         g->session_pool_bytes},
        {"kronosd_session_pool_budget_bytes", "gauge",
         "session-pool-percent of pool-bytes: what sessions' caches may hold.",
         g->session_pool_budget},
        {"kronosd_session_refusals_no_room_total", "counter",
         "Session creations or appends refused (503) because the memory was held by sessions "
         "used within session-min-idle.",
         g->sessions_refused_room},
        {"kronosd_session_refusals_bytes_limit_total", "counter",
         "Session creations or appends refused (429) over max-session-bytes-per-key.",
         g->sessions_refused_bytes},
    };
    each_gauge(f, sessions, sizeof sessions / sizeof sessions[0]);
    if (!g->journal) return;
    const one_series journal[] = {
        {"kronosd_journal_bytes", "gauge", "Session journal file size.", g->journal_bytes},
        {"kronosd_journal_live_bytes", "gauge",
         "Journal bytes of the sessions alive (a rewrite would keep these).",
         g->journal_live_bytes},
        {"kronosd_journal_records_total", "counter", "Journal records written.",
         g->journal_records},
        {"kronosd_journal_syncs_total", "counter", "Journal fsyncs.", g->journal_syncs},
        {"kronosd_journal_rewrites_total", "counter", "Journal rewrites from the live sessions.",
         g->journal_rewrites},
        {"kronosd_journal_errors_total", "counter",
         "Journal writes, syncs or rewrites that failed.", g->journal_errors},
    };
    each_gauge(f, journal, sizeof journal / sizeof journal[0]);
}

char *kd_metrics_render(kd_metrics *m, const kd_gauges *g) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    render_requests(f, m);
    gauge(f, "kronosd_generated_tokens_total", "counter",
          "Token pairs generated by /forecast (all paths) and /generate.", load(&m->tokens));
    by_source(f, "kronosd_anomalies_total",
              "Flagged outside a band: origin-steps of /evaluate answers, appended candles of "
              "calibrated sessions.",
              load(&m->anomalies), load(&m->append_anomalies));
    by_source(f, "kronosd_anomaly_checks_total",
              "Checked against a band: origin-steps of /evaluate answers, appended candles of "
              "calibrated sessions.",
              load(&m->anomaly_checks), load(&m->append_checks));
    gauge(f, "kronosd_requests_admitted_total", "counter", "Model requests admitted to the queue.",
          load(&m->counts[KD_COUNT_ADMITTED]));
    gauge(f, "kronosd_requests_timed_out_total", "counter",
          "Model requests stopped by their deadline (504).", load(&m->counts[KD_COUNT_TIMED_OUT]));
    gauge(f, "kronosd_requests_cancelled_total", "counter",
          "Model requests stopped because their client left.",
          load(&m->counts[KD_COUNT_CANCELLED]));
    header(f, "kronosd_requests_refused_total", "counter",
           "Model requests refused before queueing, by reason.");
    for (int i = 0; i < KD_N_REFUSALS; i++)
        fprintf(f, "kronosd_requests_refused_total{reason=\"%s\"} %llu\n", refuse_reasons[i],
                load(&m->refused[i]));
    header(f, "kronosd_key_requests_total", "counter",
           "Requests answered, by the name of the API key that sent them (every name given "
           "since the start, removed ones included).");
    const int n_keys = atomic_load(&m->n_keys);
    for (int i = 0; i < n_keys; i++)
        fprintf(f, "kronosd_key_requests_total{key=\"%s\"} %llu\n", m->key_names[i],
                load(&m->key_requests[i]));
    header(f, "kronosd_key_sessions", "gauge", "Sessions held, by the name of the API key.");
    for (int i = 0; i < g->n_keys; i++)
        fprintf(f, "kronosd_key_sessions{key=\"%s\"} %d\n", g->keys[i].name, g->keys[i].sessions);
    by_model(f, g, "kronosd_model_requests_total", "counter",
             "Requests answered, by the model they ran on (its id).", MODEL_REQUESTS);
    by_model(f, g, "kronosd_model_generated_tokens_total", "counter",
             "Token pairs generated (forecast paths' steps and /generate), by model.",
             MODEL_TOKENS);
    gauge(f, "kronosd_models_loaded", "gauge", "Models listed (GET /models).",
          (unsigned long long)g->n_models);
    by_model(f, g, "kronosd_model_bytes", "gauge",
             "Weight bytes each listed model holds itself (a shared tokenizer counted once).",
             MODEL_BYTES);
    gauge(f, "kronosd_model_loads_total", "counter", "Models loaded while serving (POST /models).",
          g->model_loads);
    gauge(f, "kronosd_model_unloads_total", "counter",
          "Models unloaded while serving (DELETE /models/{id}).", g->model_unloads);
    by_model(f, g, "kronosd_model_scheduler_steps_total", "counter",
             "Scheduler steps that ran any of the model's rows, by model.", MODEL_STEPS);
    by_model(f, g, "kronosd_model_scheduler_rows_total", "counter",
             "Rows (decode, prefill, recompute) the scheduler's steps ran, by model.",
             MODEL_STEP_ROWS);
    by_model(f, g, "kronosd_model_scheduler_step_seconds_total", "counter",
             "Seconds of the model's forward passes in the scheduler's steps (its rows' append "
             "and s2 heads), by model; divided by its steps, its mean step time.",
             MODEL_STEP_SECONDS);
    header(f, "kronosd_kernels_info", "gauge",
           "Always 1; the label names the SIMD level of kronosd's own kernels.");
    fprintf(f, "kronosd_kernels_info{simd=\"%s\"} 1\n", kr_simd_name(kr_simd_level()));
    gauge(f, "kronosd_ready", "gauge", "1 once the model is loaded and until draining.", g->ready);
    gauge(f, "kronosd_pool_bytes_used", "gauge", "KV cache pool bytes held by caches.",
          g->pool_bytes_used);
    gauge(f, "kronosd_pool_bytes_total", "gauge", "KV cache pool budget in bytes.",
          g->pool_bytes_total);
    render_sessions(f, g);
    gauge(f, "kronosd_requests_running", "gauge",
          "Requests computing: in the scheduler's steps or on a worker.",
          (unsigned long long)g->running);
    gauge(f, "kronosd_scheduler_steps_total", "counter", "Steps of the scheduler.", g->steps);
    gauge(f, "kronosd_scheduler_rows_total", "counter",
          "Rows computed in the scheduler's steps; divided by the steps, the mean batch.",
          g->step_rows_total);
    gauge(f, "kronosd_scheduler_step_rows", "gauge",
          "Rows of the last step (every path and generation decoding, plus prefill chunks).",
          (unsigned long long)g->step_rows);
    gauge(f, "kronosd_scheduler_active_max", "gauge",
          "The most requests that ever shared one step.", (unsigned long long)g->active_max);
    gauge(f, "kronosd_queue_depth", "gauge", "Requests waiting to start.",
          (unsigned long long)g->queue_depth);
    gauge(f, "kronosd_queue_capacity", "gauge", "Requests that may wait before 503.",
          (unsigned long long)g->queue_capacity);
    gauge(f, "kronosd_workers_busy", "gauge", "Workers running a request.",
          (unsigned long long)g->workers_busy);
    gauge(f, "kronosd_workers", "gauge", "Worker threads.", (unsigned long long)g->workers);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
