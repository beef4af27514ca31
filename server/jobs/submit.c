/* submit.c — kd_submit and the refusals (submit.h): admission, deadline, client watch,
 * metrics and hand-off, written once for every model request. */
#include "submit.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "replies.h"

void kd_work_init(kd_work *w, const kd_work_ops *ops, kd_app *app, kd_request *r,
                  long long timeout_ms) {
    long long ms = (long long)app->cfg.request_timeout * 1000;
    if (timeout_ms > 0 && timeout_ms < ms) ms = timeout_ms;
    w->ops = ops;
    w->app = app;
    w->r = r;
    w->deadline = kd_now_s() + (double)ms / 1e3;
    w->cancel = (kr_cancel){kd_work_check, w};
}

void *kd_work_new(size_t size, const kd_work_ops *ops, kd_app *app, kd_request *r,
                  long long timeout_ms) {
    kd_work *w = calloc(1, size);
    if (!w) {
        kd_reply_no_memory(r);
        return NULL;
    }
    kd_work_init(w, ops, app, r, timeout_ms);
    return w;
}

int kd_work_check(void *ctx) {
    const kd_work *w = ctx;
    if (kd_now_s() > w->deadline) return KR_E_DEADLINE;
    return kd_request_client_gone(w->r) ? KR_E_CANCELLED : 0;
}

/* The lanes' entry points: the job's own operations. */
static void run_on_worker(kd_task *j) {
    kd_work *w = (kd_work *)((char *)j - offsetof(kd_work, job));
    w->ops->run(w);
}

static int add_on_scheduler(kr_sched *ks, kd_sched_entry *sj, kr_error *err) {
    kd_work *w = (kd_work *)((char *)sj - offsetof(kd_work, sjob));
    return w->ops->add(ks, w, err);
}

static void done_on_scheduler(kd_sched_entry *sj, const kr_error *err) {
    kd_work *w = (kd_work *)((char *)sj - offsetof(kd_work, sjob));
    w->ops->done(w, err);
}

/* A place in the lane's queue; -1 after replying 503 overloaded, or 429 queue_share when
 * the client's requests hold its share of the scheduler's places. */
static int reserve(kd_app *app, kd_work *w, kd_lane lane) {
    kd_request *r = w->r;
    if (lane == KD_ON_WORKER) {
        if (kd_workers_reserve(app->workers) == 0) return 0;
        kd_reply_error(r, 503, "overloaded",
                       "the work queue is full (%d waiting); retry after a second",
                       app->cfg.queue_size);
        return -1;
    }
    char owner[KD_SCHED_OWNER_MAX + 1];
    kd_request_owner(r, owner, sizeof owner);
    const int rc = kd_sched_reserve(app->sched, &w->sjob, owner);
    if (rc == 0) return 0;
    kd_sched_stats st;
    kd_sched_stats_get(app->sched, &st);
    const int retry_after = st.retry_after_s < 1 ? 1 : (int)(st.retry_after_s + 0.999);
    kd_request_set_retry_after(r, retry_after);
    if (rc == -2) {
        kd_reply_error(r, 429, "queue_share",
                       "this API key (or client address) has %d requests waiting, its share of "
                       "the queue (key-queue-percent %d%% of queue-size %d); retry after about "
                       "%d s",
                       kd_sched_owner_share(app->sched), app->cfg.key_queue_percent,
                       app->cfg.queue_size, retry_after);
        return -1;
    }
    kd_reply_error(r, 503, "overloaded",
                   "%d requests are waiting (queue-size %d); retry after about %d s", st.waiting,
                   app->cfg.queue_size, retry_after);
    return -1;
}

kd_outcome kd_submit(kd_work *w, kd_lane lane) {
    kd_app *app = w->app;
    kd_request *r = w->r;
    if (w->ops->admit && w->ops->admit(w) < 0) {
        w->ops->discard(w);
        return KD_REPLIED;
    }
    if (reserve(app, w, lane) < 0) {
        kd_metrics_refuse(app->metrics, KD_REFUSED_BUSY);
        w->ops->discard(w);
        return KD_REPLIED;
    }
    kd_metrics_count(app->metrics, KD_COUNT_ADMITTED);
    /* suspended before the job is queued, so the lane's reply always finds it so */
    kd_request_suspend(r);
    if (lane == KD_ON_WORKER) {
        w->job.run = run_on_worker;
        kd_workers_submit(app->workers, &w->job);
    } else {
        w->sjob.add = add_on_scheduler;
        w->sjob.done = done_on_scheduler;
        kd_sched_submit(app->sched, &w->sjob);
    }
    return KD_DEFERRED;
}

kd_outcome kd_submit_for(kd_app *app, kd_request *r, kd_work *w, const kd_refused *refused,
                         kd_lane lane) {
    const kd_refused no_memory = {KD_NOT_REFUSED, 500, "internal",
                                  "out of memory queueing the request"};
    if (refused->status || !w) {
        kd_refuse_with(app, r, refused->status ? refused : &no_memory);
        return KD_REPLIED;
    }
    w->r = r;
    return kd_submit(w, lane);
}

void kd_work_fail(kd_app *app, kd_request *r, const char *what, const kr_error *err) {
    if (err->code == KR_E_DEADLINE) kd_metrics_count(app->metrics, KD_COUNT_TIMED_OUT);
    if (err->code == KR_E_CANCELLED) kd_metrics_count(app->metrics, KD_COUNT_CANCELLED);
    kd_reply_core_error(r, what, err);
}

/* ---- refusals ----------------------------------------------------------------------------- */

void kd_refuse(kd_app *app, kd_request *r, kd_refusal why, int status, const char *code,
               const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kd_metrics_refuse(app->metrics, why); /* KD_NOT_REFUSED counts nothing */
    kd_reply_error(r, status, code, "%s", msg);
}

void kd_refuse_invalid(kd_app *app, kd_request *r, const char *msg) {
    kd_refuse(app, r, KD_REFUSED_INVALID, 400, "invalid_request", "%s", msg);
}

void kd_refuse_error(kd_app *app, kd_request *r, const char *what, const kr_error *err) {
    kd_metrics_refuse(app->metrics, kd_error_answer_of((int)err->code)->refusal);
    kd_reply_core_error(r, what, err);
}

void kd_refuse_with(kd_app *app, kd_request *r, const kd_refused *refused) {
    kd_metrics_refuse(app->metrics, refused->why);
    kd_reply_refused(r, refused);
}

void kd_reply_no_memory(kd_request *r) {
    kd_reply_error(r, 500, "internal", "out of memory queueing the request");
}

void kd_work_fail_parts(kr_error *errs, int n, const kr_error *err) {
    for (int i = 0; i < n; i++)
        if (!errs[i].code) errs[i] = *err;
}
