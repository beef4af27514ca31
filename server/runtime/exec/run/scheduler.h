/* scheduler.h — the thread that runs all forecast and generation work on the core's step
 * scheduler (kr_sched): every step, one product per weight matrix for the rows of every
 * request in flight; a request joins at the next step and leaves when it ends.
 *
 * HTTP threads reserve a place (failing at once when queue-size requests already wait,
 * which the caller answers with 503 and a Retry-After from the queued work), suspend the
 * connection, then submit. The entry's add and done functions run on the scheduler thread;
 * done replies. Thread-safe.
 */
#ifndef KD_SCHEDULER_H
#define KD_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>

#include "kronos.h"

#define KD_SCHED_OWNER_MAX  64 /* bytes of an owner's name (an API key's owner, an address) */
#define KD_SCHED_MODELS_MAX 64 /* models whose step figures are kept: the daemon's slots */

typedef struct kd_sched_entry kd_sched_entry;
struct kd_sched_entry {
    /* queues the work on ks with tag = this entry (kr_sched_add_*); -1 with err set when it
     * cannot, and done is then called with that error */
    int (*add)(kr_sched *ks, kd_sched_entry *entry, kr_error *err);
    /* the work ended (err->code 0: it succeeded); replies and frees the entry */
    void (*done)(kd_sched_entry *entry, const kr_error *err);
    kd_sched_entry *next;
    /* A request's jobs in the core count as one request in the queue (queue-size), however
     * many (a request of many series adds one per series): request is the entry that was
     * submitted (NULL: this one), whose core_jobs the scheduler counts down. */
    kd_sched_entry *request;
    int core_jobs;
    double submitted; /* monotonic seconds: when kd_sched_submit took it */
    bool started;     /* one of its core jobs has started (cfg.started was called) */
    /* who sent it (kd_request_owner), and whether it still counts against that owner's
     * share of the waiting places (until it starts or ends) */
    char owner[KD_SCHED_OWNER_MAX + 1];
    bool owner_waiting;
};

typedef struct kd_sched kd_sched;

typedef struct {
    /* the steps' knobs (0: the core's defaults); its callbacks and ctx are the scheduler's */
    kr_sched_config steps;
    int queue_size;
    /* the waiting places one owner may hold: this percent of queue_size (at least one) */
    int owner_queue_percent;
    /* what the scheduler asks of its owner, on the scheduler thread */
    struct {
        bool (*make_room)(void *ctx);                   /* the pool ran dry: free an idle session */
        bool (*make_room_in)(kr_pool *pool, void *ctx); /* that pool (a model's) ran dry */
        /* a request's first core job started, waited_s after it was submitted (light: the
         * core's class of that entry); NULL: not told */
        void (*started)(void *ctx, bool light, double waited_s);
        void *ctx;
    } hooks;
} kd_sched_config;

kd_sched *kd_sched_start(const kr_model *m, kr_pool *pool, const kd_sched_config *cfg, char *err,
                         size_t errlen);
/* Finishes every entry held, then joins the thread and frees s. */
void kd_sched_stop(kd_sched *s);

/* 0 with a place held for one request of owner, -1 when queue-size requests already wait (a
 * request waits while one of its core jobs does), or -2 when owner's requests already hold
 * its share of the places (owner_queue_percent of queue_size): one client's flood cannot
 * take every place. owner is copied into entry, which must then be submitted. */
int kd_sched_reserve(kd_sched *s, kd_sched_entry *entry, const char *owner);
/* Queues an entry in a place reserved before; cannot fail. */
void kd_sched_submit(kd_sched *s, kd_sched_entry *entry);
/* The waiting places one owner may hold. */
int kd_sched_owner_share(const kd_sched *s);
/* For a request that adds core jobs later, from its jobs' done callbacks (an evaluation's
 * origins): its add takes a hold (req->core_jobs = 1 before it returns), each job added
 * later counts itself (req->core_jobs++), and the hold is released here once nothing more
 * will be added, so that the request counts as waiting, and as one, until its last job
 * ends. The scheduler thread's (a done callback's). */
void kd_sched_release(kd_sched *s, kd_sched_entry *req);

typedef struct {
    int waiting, active; /* requests not yet started (at most); jobs in the steps */
    int rows_last_step;  /* rows of the last step (decode + prefill) */
    int active_max;      /* the most jobs that ever shared a step */
    unsigned long long steps, rows;
    double retry_after_s; /* an estimate of when a place frees up */
} kd_sched_stats;

void kd_sched_stats_get(kd_sched *s, kd_sched_stats *st);
/* Whether a request holds a place or has jobs in the steps (any thread). */
bool kd_sched_busy(kd_sched *s);
/* What model m's rows took in the steps (kr_sched_model_stats), as of the last step; all 0
 * when none of its rows ran yet. */
void kd_sched_model_stats(kd_sched *s, const kr_model *m, kr_sched_model_stats *out);
/* Model m is being freed: its figures go at once (a model loaded later at its address
 * starts from zero); the core's, before the scheduler takes any new work. */
void kd_sched_forget_model(kd_sched *s, const kr_model *m);

#endif
