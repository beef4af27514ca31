/* scheduler.c — the scheduler thread: takes submitted jobs into the core's step scheduler
 * between steps and steps it while it holds any. */
#include "scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "thread.h"

struct kd_sched {
    kr_sched *ks;
    kd_sched_config cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    kd_sched_entry *inbox, *inbox_tail;
    int reserved;     /* places held: reserved or in the inbox */
    int core_waiting; /* requests the core holds but has not started (at most: as of the last
                         step, plus those taken from the inbox since) */
    int requests;     /* requests with jobs in the core (the scheduler thread's) */
    /* owners with requests waiting (reserved, in the inbox or not yet started in the core)
     * and how many each: n_owners entries, those at 0 free for reuse */
    struct owner_count {
        char name[KD_SCHED_OWNER_MAX + 1];
        int waiting;
    } * owners;
    int n_owners;
    bool stopping;
    kd_sched_stats stats;
    /* the core's per-model figures, copied after each step: the first KD_SCHED_MODELS_MAX
     * models it ran (the daemon holds no more) */
    kr_sched_model_stats models[KD_SCHED_MODELS_MAX];
    int n_models;
    /* models freed whose figures the core still keeps: dropped before new work is taken */
    const kr_model **forget;
    int n_forget, forget_cap;
    /* completions per second, smoothed: with the jobs waiting, when a place frees up */
    double done_rate, rate_t0;
    int done_since;
};

/* The entry of an owner (a free one taken when it has none); NULL when out of memory. */
static struct owner_count *owner_entry(kd_sched *s, const char *name) {
    struct owner_count *free_one = NULL;
    for (int i = 0; i < s->n_owners; i++) {
        if (strcmp(s->owners[i].name, name) == 0) return &s->owners[i];
        if (s->owners[i].waiting == 0 && !free_one) free_one = &s->owners[i];
    }
    if (!free_one) {
        struct owner_count *grown = realloc(s->owners, (size_t)(s->n_owners + 1) * sizeof *grown);
        if (!grown) return NULL;
        s->owners = grown;
        free_one = &s->owners[s->n_owners++];
    }
    snprintf(free_one->name, sizeof free_one->name, "%s", name);
    free_one->waiting = 0;
    return free_one;
}

/* req no longer waits (it started, or ended without starting): its owner's place is free. */
static void owner_leaves(kd_sched *s, kd_sched_entry *req) {
    pthread_mutex_lock(&s->mu);
    if (req->owner_waiting) {
        req->owner_waiting = false;
        struct owner_count *o = owner_entry(s, req->owner);
        if (o && o->waiting > 0) o->waiting--;
    }
    pthread_mutex_unlock(&s->mu);
}

/* One of req's core jobs (or its hold) ended: the request leaves the core with its last. */
static void count_down(kd_sched *s, kd_sched_entry *req) {
    if (--req->core_jobs == 0) {
        owner_leaves(s, req); /* ended without ever starting (cancelled while waiting) */
        s->requests--;
        s->done_since++; /* the scheduler thread's own counters */
    }
}

void kd_sched_release(kd_sched *s, kd_sched_entry *req) {
    count_down(s, req);
}

static void job_done(void *tag, const kr_error *err, void *ctx) {
    kd_sched *s = ctx;
    kd_sched_entry *entry = tag;
    count_down(s, entry->request ? entry->request : entry); /* before done, which may free it */
    entry->done(entry, err);
}

/* Waiting requests, at most: each has a job waiting in the core, and each is in the core. */
static int waiting_requests(const kd_sched *s, int core_jobs_waiting) {
    return core_jobs_waiting < s->requests ? core_jobs_waiting : s->requests;
}

/* A core job left the waiting line: its request's queueing delay, told once. */
static void job_started(void *tag, bool light, void *ctx) {
    kd_sched *s = ctx;
    kd_sched_entry *entry = tag;
    kd_sched_entry *req = entry->request ? entry->request : entry;
    if (req->started) return;
    req->started = true;
    owner_leaves(s, req);
    if (s->cfg.hooks.started)
        s->cfg.hooks.started(s->cfg.hooks.ctx, light, kd_now_s() - req->submitted);
}

static bool make_room_in(kr_pool *pool, void *ctx) {
    kd_sched *s = ctx;
    return s->cfg.hooks.make_room_in
               ? s->cfg.hooks.make_room_in(pool, s->cfg.hooks.ctx)
               : s->cfg.hooks.make_room && s->cfg.hooks.make_room(s->cfg.hooks.ctx);
}

static bool make_room(void *ctx) {
    kd_sched *s = ctx;
    return s->cfg.hooks.make_room && s->cfg.hooks.make_room(s->cfg.hooks.ctx);
}

/* Every second or so: the completion rate, smoothed over the last few seconds. */
static void update_rate(kd_sched *s, double now) {
    double dt = now - s->rate_t0;
    if (dt < 1.0) return;
    double rate = s->done_since / dt;
    s->done_rate = s->done_rate > 0 ? 0.7 * s->done_rate + 0.3 * rate : rate;
    s->done_since = 0;
    s->rate_t0 = now;
}

/* m's figures out of the copy the scrapes read; with s->mu held */
static void drop_model(kd_sched *s, const kr_model *m) {
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i].m == m) {
            memmove(&s->models[i], &s->models[i + 1],
                    (size_t)(s->n_models - i - 1) * sizeof *s->models);
            s->n_models--;
            return;
        }
}

static void *run(void *arg) {
    kd_sched *s = arg;
    kr_sched_stats ks;
    s->rate_t0 = kd_now_s();
    for (;;) {
        pthread_mutex_lock(&s->mu);
        kr_sched_stats_get(s->ks, &ks);
        while (!s->inbox && ks.waiting + ks.active == 0 && !s->stopping)
            pthread_cond_wait(&s->wake, &s->mu);
        kd_sched_entry *in = s->inbox;
        const kr_model **forget = s->forget;
        const int n_forget = s->n_forget;
        s->forget = NULL, s->n_forget = s->forget_cap = 0;
        int n_in = 0;
        for (kd_sched_entry *j = in; j; j = j->next)
            n_in++;
        s->inbox = s->inbox_tail = NULL;
        s->reserved -= n_in;
        /* taken into the core, they count as waiting there until this step's figures say
         * how many started: a place is never free between the inbox and the core */
        s->core_waiting += n_in;
        bool stop = s->stopping && !in && ks.waiting + ks.active == 0;
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n_forget; i++) /* before new work: a model may reuse an address */
            kr_sched_model_stats_forget(s->ks, forget[i]);
        free(forget);
        if (stop) break;
        while (in) {
            kd_sched_entry *j = in;
            in = in->next;
            kr_error err = {0};
            kr_sched_stats before, after;
            kr_sched_stats_get(s->ks, &before);
            if (j->add(s->ks, j, &err) < 0) {
                owner_leaves(s, j);
                j->done(j, &err);
                continue;
            }
            /* the core jobs it queued, counted down as they end */
            kr_sched_stats_get(s->ks, &after);
            j->core_jobs += after.waiting - before.waiting; /* beside a hold add took */
            if (j->core_jobs > 0)
                s->requests++;
            else
                owner_leaves(s, j);
        }
        kr_sched_step(s->ks);
        kr_sched_stats_get(s->ks, &ks);
        update_rate(s, kd_now_s());
        pthread_mutex_lock(&s->mu);
        const int nm = kr_sched_model_stats_get(s->ks, s->models, KD_SCHED_MODELS_MAX);
        s->n_models = nm < KD_SCHED_MODELS_MAX ? nm : KD_SCHED_MODELS_MAX;
        for (int i = 0; i < s->n_forget; i++) /* freed during the step */
            drop_model(s, s->forget[i]);
        s->core_waiting = waiting_requests(s, ks.waiting);
        s->stats.waiting = s->core_waiting + s->reserved;
        s->stats.active = ks.active;
        if (ks.active > s->stats.active_max) s->stats.active_max = ks.active;
        s->stats.rows_last_step = ks.rows_last_step;
        s->stats.steps = ks.steps;
        s->stats.rows = ks.rows;
        double ahead = s->core_waiting + s->reserved + 1;
        s->stats.retry_after_s = s->done_rate > 0 ? ahead / s->done_rate : 1.0;
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

kd_sched *kd_sched_start(const kr_model *m, kr_pool *pool, const kd_sched_config *cfg, char *err,
                         size_t errlen) {
    kd_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "scheduler: out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    kr_sched_config kc = cfg->steps;
    kc.started = job_started;
    kc.done = job_done;
    kc.make_room = make_room;
    kc.make_room_in = make_room_in;
    kc.ctx = s;
    kr_error ke;
    if (!(s->ks = kr_sched_create(m, pool, &kc, &ke))) {
        snprintf(err, errlen, "scheduler: %s", ke.msg);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (kd_thread_start(&s->thread, run, s, "scheduler", err, errlen) < 0) {
        kr_sched_free(s->ks);
        free(s);
        return NULL;
    }
    return s;
}

void kd_sched_stop(kd_sched *s) {
    if (!s) return;
    kd_thread_ask_stop(&s->mu, &s->wake, &s->stopping);
    pthread_join(s->thread, NULL);
    kr_sched_free(s->ks);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->wake);
    free(s->owners);
    free(s->forget);
    free(s);
}

int kd_sched_owner_share(const kd_sched *s) {
    long share = (long)s->cfg.queue_size * s->cfg.owner_queue_percent / 100;
    return share < 1 ? 1 : (int)share;
}

int kd_sched_reserve(kd_sched *s, kd_sched_entry *entry, const char *owner) {
    snprintf(entry->owner, sizeof entry->owner, "%s", owner);
    entry->owner_waiting = false;
    pthread_mutex_lock(&s->mu);
    int rc = !s->stopping && s->reserved + s->core_waiting < s->cfg.queue_size ? 0 : -1;
    struct owner_count *o = rc == 0 ? owner_entry(s, owner) : NULL;
    if (rc == 0 && o && o->waiting >= kd_sched_owner_share(s)) rc = -2;
    if (rc == 0) {
        s->reserved++;
        if (o) { /* out of memory for the entry: the place is not counted, not refused */
            o->waiting++;
            entry->owner_waiting = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void kd_sched_submit(kd_sched *s, kd_sched_entry *entry) {
    entry->next = NULL;
    entry->submitted = kd_now_s();
    entry->started = false;
    pthread_mutex_lock(&s->mu);
    if (s->inbox_tail)
        s->inbox_tail->next = entry;
    else
        s->inbox = entry;
    s->inbox_tail = entry;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

void kd_sched_stats_get(kd_sched *s, kd_sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    pthread_mutex_unlock(&s->mu);
}

bool kd_sched_busy(kd_sched *s) {
    pthread_mutex_lock(&s->mu);
    const bool busy = s->inbox || s->reserved + s->core_waiting + s->stats.active > 0;
    pthread_mutex_unlock(&s->mu);
    return busy;
}

void kd_sched_forget_model(kd_sched *s, const kr_model *m) {
    pthread_mutex_lock(&s->mu);
    drop_model(s, m);
    bool queued = false;
    for (int i = 0; i < s->n_forget && !queued; i++)
        queued = s->forget[i] == m;
    if (!queued && s->n_forget == s->forget_cap) {
        const int cap = s->forget_cap ? 2 * s->forget_cap : 8;
        const kr_model **grown = realloc(s->forget, (size_t)cap * sizeof *grown);
        if (grown) s->forget = grown, s->forget_cap = cap;
    }
    if (!queued && s->n_forget < s->forget_cap) s->forget[s->n_forget++] = m;
    pthread_mutex_unlock(&s->mu);
}

void kd_sched_model_stats(kd_sched *s, const kr_model *m, kr_sched_model_stats *out) {
    *out = (kr_sched_model_stats){.m = m};
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i].m == m) *out = s->models[i];
    pthread_mutex_unlock(&s->mu);
}
