/* thread.c — starting a background thread and asking it to stop. */
#include "thread.h"

#include "fail.h"

#include <string.h>
#include <time.h>

int kd_thread_start(pthread_t *t, void *(*body)(void *), void *arg, const char *name, char *err,
                    size_t errlen) {
    const int rc = pthread_create(t, NULL, body, arg);
    return rc ? kd_fail(err, errlen, "%s: cannot start its thread: %s", name, strerror(rc)) : 0;
}

void kd_thread_cond_init(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

void kd_thread_wait(pthread_cond_t *cv, pthread_mutex_t *mu, long ns) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec += ns % 1000000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &until);
}

void kd_thread_ask_stop(pthread_mutex_t *mu, pthread_cond_t *wake, bool *stopping) {
    pthread_mutex_lock(mu);
    *stopping = true;
    pthread_cond_broadcast(wake);
    pthread_mutex_unlock(mu);
}
