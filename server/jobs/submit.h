/* submit.h — the one way a model request goes to work, for every route that computes
 * (/forecast and its series, /generate, the sessions' forecast, generate and candles,
 * /tokenize, /detokenize).
 *
 * A handler parses its request on the HTTP thread, builds a job that starts with a kd_work
 * (kd_work_init: its deadline and the core's cancel check), and calls kd_submit, which
 * writes once what every route does: admission (the job's own check, then a place in the
 * queue or 503 overloaded), the metrics (refused by reason, admitted), the suspension of
 * the connection and the hand-off to the scheduler or a worker. Every refusal a handler
 * answers itself goes through kd_refuse*, so that each is counted once, by its reason.
 */
#ifndef KD_SUBMIT_H
#define KD_SUBMIT_H

#include <jansson.h>

#include "app.h"
#include "http.h"

typedef struct kd_work kd_work;

/* Where the work runs: the step scheduler (forecasts and generations on caches), or a
 * worker (tokenizer work, and the reference path, which recomputes its window alone). */
typedef enum { KD_ON_SCHEDULER, KD_ON_WORKER } kd_lane;

typedef struct {
    /* On the HTTP thread: -1 after refusing (kd_refuse*) what can never run here. NULL:
     * nothing to check. */
    int (*admit)(kd_work *w);
    /* KD_ON_SCHEDULER: queues the work on ks (kr_sched_add_*), on the scheduler thread; -1
     * with err set when it cannot, and done then gets err. */
    int (*add)(kr_sched *ks, kd_work *w, kr_error *err);
    /* KD_ON_SCHEDULER: the work ended (err->code 0: it succeeded): replies, frees w. */
    void (*done)(kd_work *w, const kr_error *err);
    /* KD_ON_WORKER: the whole work on a worker thread: replies, frees w. */
    void (*run)(kd_work *w);
    /* Frees a job that was refused before the hand-off (the reply is already set). */
    void (*discard)(kd_work *w);
} kd_work_ops;

struct kd_work {
    kd_task job;         /* the workers' link */
    kd_sched_entry sjob; /* the scheduler's link */
    const kd_work_ops *ops;
    kd_app *app;
    kd_request *r;
    double deadline;  /* monotonic seconds by which it must be answered */
    kr_cancel cancel; /* the core's check: {kd_work_check, this} */
};

/* Sets the request, the operations, the deadline (request-timeout from now, or timeout_ms
 * when sooner and > 0) and the cancel check. */
void kd_work_init(kd_work *w, const kd_work_ops *ops, kd_app *app, kd_request *r,
                  long long timeout_ms);
/* A zeroed job of size bytes (a struct that starts with its kd_work), initialised as
 * kd_work_init does; NULL after replying 500. */
void *kd_work_new(size_t size, const kd_work_ops *ops, kd_app *app, kd_request *r,
                  long long timeout_ms);
/* The core's cancel check (ctx: the kd_work): KR_E_DEADLINE past the deadline,
 * KR_E_CANCELLED when the client left, else 0. */
int kd_work_check(void *ctx);

/* Admission and hand-off (above). KD_DEFERRED: the job is the lane's, and r no longer the
 * handler's; KD_REPLIED: refused, the job discarded. */
kd_outcome kd_submit(kd_work *w, kd_lane lane);
/* The same for a job made from an intake before it met its request (the forecast routes',
 * kd_work_init with r NULL): refused answered and counted when it says so (status != 0),
 * 500 when w is NULL (out of memory), else w takes r and goes as kd_submit. */
kd_outcome kd_submit_for(kd_app *app, kd_request *r, kd_work *w, const kd_refused *refused,
                         kd_lane lane);

/* The end of a job that failed: counts a deadline or a cancellation, and replies by the
 * error table (errors.h), what naming the work ("forecast"). */
void kd_work_fail(kd_app *app, kd_request *r, const char *what, const kr_error *err);
/* A job of many parts failed as a whole (its done with err): each part that has no error
 * of its own, errs[0 .. n-1], gets err. */
void kd_work_fail_parts(kr_error *errs, int n, const kr_error *err);

/* ---- refusals before the hand-off, each counted once by its reason ---------------------- */

/* Counts why and replies status with the error code and message. */
void kd_refuse(kd_app *app, kd_request *r, kd_refusal why, int status, const char *code,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* 400 invalid_request with msg, counted as invalid. */
void kd_refuse_invalid(kd_app *app, kd_request *r, const char *msg);
/* A core error before the hand-off: replied and counted by the error table. */
void kd_refuse_error(kd_app *app, kd_request *r, const char *what, const kr_error *err);
/* What refused says: counted by its reason, and replied. */
void kd_refuse_with(kd_app *app, kd_request *r, const kd_refused *refused);
/* 500 internal for memory that a job could not get (not a refusal: the server's fault). */
void kd_reply_no_memory(kd_request *r);

#endif
