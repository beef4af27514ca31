/* workers.c — worker threads and their bounded FIFO queue. */
#include "workers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thread.h"

struct kd_workers {
    pthread_mutex_t mu;
    pthread_cond_t ready;
    kd_task *head, *tail;
    int queued, reserved, capacity; /* queued + reserved <= capacity */
    int busy;
    bool stopping;
    int n;
    pthread_t *threads;
};

/* Takes the task at the head of the queue. Called with the lock held. */
static kd_task *take(kd_workers *w) {
    kd_task *task = w->head;
    w->head = task->next;
    if (!w->head) w->tail = NULL;
    w->queued--;
    return task;
}

static void *worker_main(void *arg) {
    kd_workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* a reserved place is a task still to come: stopping waits for it */
        while (!w->head && !(w->stopping && w->reserved == 0))
            pthread_cond_wait(&w->ready, &w->mu);
        if (!w->head) break;
        kd_task *task = take(w);
        w->busy++;
        pthread_mutex_unlock(&w->mu);
        task->run(task);
        pthread_mutex_lock(&w->mu);
        w->busy--;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

kd_workers *kd_workers_start(int n, int queue_size, char *err, size_t errlen) {
    kd_workers *w = calloc(1, sizeof *w);
    if (!w || !(w->threads = calloc((size_t)n, sizeof *w->threads))) {
        free(w);
        snprintf(err, errlen, "workers: out of memory for %d threads", n);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->ready, NULL);
    w->capacity = queue_size;
    for (int i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "worker %d of %d", i + 1, n);
        if (kd_thread_start(&w->threads[i], worker_main, w, name, err, errlen) < 0) {
            kd_workers_stop(w);
            return NULL;
        }
        w->n++;
    }
    return w;
}

void kd_workers_stop(kd_workers *w) {
    if (!w) return;
    kd_thread_ask_stop(&w->mu, &w->ready, &w->stopping);
    for (int i = 0; i < w->n; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->mu);
    free(w->threads);
    free(w);
}

int kd_workers_reserve(kd_workers *w) {
    pthread_mutex_lock(&w->mu);
    const bool ok = !w->stopping && w->queued + w->reserved < w->capacity;
    if (ok) w->reserved++;
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

void kd_workers_unreserve(kd_workers *w) {
    pthread_mutex_lock(&w->mu);
    w->reserved--;
    pthread_cond_broadcast(&w->ready);
    pthread_mutex_unlock(&w->mu);
}

void kd_workers_submit(kd_workers *w, kd_task *task) {
    task->next = NULL;
    pthread_mutex_lock(&w->mu);
    w->reserved--;
    w->queued++;
    if (w->tail)
        w->tail->next = task;
    else
        w->head = task;
    w->tail = task;
    pthread_cond_signal(&w->ready);
    pthread_mutex_unlock(&w->mu);
}

void kd_workers_stats_get(kd_workers *w, kd_workers_stats *st) {
    pthread_mutex_lock(&w->mu);
    st->threads = w->n;
    st->busy = w->busy;
    st->queued = w->queued + w->reserved;
    st->capacity = w->capacity;
    pthread_mutex_unlock(&w->mu);
}
