/* workers.h — a fixed set of inference threads fed by a bounded queue.
 *
 * Tokenizer requests run here, and forecasts on the reference path (use_cache false, which
 * recomputes its window alone); forecasts and generations on caches run on the scheduler
 * (scheduler.h). HTTP threads never run the model: they reserve a
 * place in the queue (failing at once when it is full, which the caller answers with 503),
 * suspend the connection, then submit the task. Reserving first means a task can never be refused
 * after its connection was suspended, and a task can never finish before its connection is
 * suspended. */
#ifndef KD_WORKERS_H
#define KD_WORKERS_H

#include <stddef.h>

typedef struct kd_task kd_task;
struct kd_task {
    void (*run)(kd_task *task); /* runs on a worker thread; owns the task from then on */
    kd_task *next;              /* the queue's link */
};

typedef struct kd_workers kd_workers;

/* Starts n threads with a queue of queue_size waiting tasks; NULL after a message in err. */
kd_workers *kd_workers_start(int n, int queue_size, char *err, size_t errlen);
/* Runs every task still queued, then joins the threads and frees w. */
void kd_workers_stop(kd_workers *w);

/* 0 with a place held for one task, or -1 when the queue is full or stopping. */
int kd_workers_reserve(kd_workers *w);
/* Gives back a place that will not be used. */
void kd_workers_unreserve(kd_workers *w);
/* Queues a task in a place reserved before; cannot fail. */
void kd_workers_submit(kd_workers *w, kd_task *task);

typedef struct {
    int threads, busy, queued, capacity;
} kd_workers_stats;

void kd_workers_stats_get(kd_workers *w, kd_workers_stats *st);

#endif
