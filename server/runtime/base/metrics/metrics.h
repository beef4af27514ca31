/* metrics.h — counters and histograms for GET /metrics (Prometheus text format 0.0.4).
 * Updates are lock-free atomics, safe from any thread. */
#ifndef KD_METRICS_H
#define KD_METRICS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kd_metrics kd_metrics;

/* endpoints: the label values of the per-endpoint series (kept, not copied). */
kd_metrics *kd_metrics_create(const char *const *endpoints, int n_endpoints);
void kd_metrics_free(kd_metrics *m);

/* One answered request. endpoint indexes the list given at creation. */
void kd_metrics_observe(kd_metrics *m, int endpoint, int status, double seconds);
void kd_metrics_add_tokens(kd_metrics *m, unsigned long long generated);
/* The origin-steps an /evaluate answer flagged as anomalies, and those it checked. */
void kd_metrics_add_anomalies(kd_metrics *m, unsigned long long flagged,
                              unsigned long long checked);
/* The appended candles a calibrated session's forecasts had covered (checked) and of them
 * those outside a band (flagged). */
void kd_metrics_add_append_anomalies(kd_metrics *m, unsigned long long flagged,
                                     unsigned long long checked);

/* A model request's class: light when the core's job plans at most light-request-mflop of
 * work (the label of the queueing-delay histogram). */
typedef enum { KD_CLASS_LIGHT, KD_CLASS_HEAVY, KD_N_CLASSES } kd_class;
/* One request's time from admission (its place in the queue) to its first model step. */
void kd_metrics_observe_queue_delay(kd_metrics *m, kd_class c, double seconds);

/* How model requests end up: admitted to the queue, stopped by their deadline, cancelled
 * by their client leaving. */
typedef enum { KD_COUNT_ADMITTED, KD_COUNT_TIMED_OUT, KD_COUNT_CANCELLED, KD_N_COUNTS } kd_count;
void kd_metrics_count(kd_metrics *m, kd_count what);
/* Why a request was refused before it was queued (the label of the refusal counter). */
typedef enum {
    KD_NOT_REFUSED = -1, /* an outcome that is no refusal (errors.h's table says so) */
    KD_REFUSED_INVALID,
    KD_REFUSED_TOO_LARGE,
    KD_REFUSED_BUSY,
    KD_N_REFUSALS
} kd_refusal;
/* Counts a refusal by reason; KD_NOT_REFUSED counts nothing. */
void kd_metrics_refuse(kd_metrics *m, kd_refusal why);

/* Per API key name: requests counted under a slot, one slot a name ever given (the key
 * files bound them). The slot of name, made on first use; -1 once KD_METRICS_KEYS_MAX names
 * have slots. Thread-safe. */
#define KD_METRICS_KEYS_MAX 1024
int kd_metrics_key_slot(kd_metrics *m, const char *name);
/* One answered request authenticated by the key of slot (< 0: counts nothing). */
void kd_metrics_key_request(kd_metrics *m, int slot);

/* Sessions one key holds, read at scrape time. */
typedef struct {
    const char *name;
    int sessions;
} kd_key_sessions;

/* What one model served, read at scrape time. */
typedef struct {
    char id[72];
    unsigned long long requests, tokens;
    size_t bytes;                        /* the weights it holds itself */
    unsigned long long steps, step_rows; /* scheduler steps that ran its rows, and those rows */
    double step_seconds;                 /* its forward passes' time in those steps */
} kd_model_served;

/* Values read from elsewhere at scrape time. */
typedef struct {
    bool ready;
    size_t pool_bytes_used, pool_bytes_total;
    int sessions, sessions_busy;
    unsigned long long sessions_created, sessions_expired, sessions_evicted;
    size_t session_memory_bytes, session_memory_budget; /* outside the pool */
    size_t session_pool_bytes, session_pool_budget;     /* in it */
    unsigned long long sessions_refused_room, sessions_refused_bytes;
    bool journal; /* state-dir set: the journal_ gauges */
    size_t journal_bytes, journal_live_bytes;
    unsigned long long journal_records, journal_syncs, journal_rewrites, journal_errors;
    int queue_depth, queue_capacity, workers_busy, workers;
    int running;    /* requests computing: in the scheduler's steps or on a worker */
    int step_rows;  /* rows of the scheduler's last step */
    int active_max; /* most requests ever in one step */
    unsigned long long steps, step_rows_total;
    const kd_key_sessions *keys; /* the API keys now, with the sessions each holds */
    int n_keys;
    const kd_model_served *models; /* every listed model, with what it served */
    int n_models;
    unsigned long long model_loads, model_unloads; /* while serving */
} kd_gauges;

/* The exposition text (malloc'd), or NULL when out of memory. */
char *kd_metrics_render(kd_metrics *m, const kd_gauges *g);

#endif
