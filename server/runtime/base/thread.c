/* thread.c — starting a background thread and asking it to stop. */
#include "thread.h"

#include "fail.h"

#include <string.h>

int kd_thread_start(pthread_t *t, void *(*body)(void *), void *arg, const char *name, char *err,
                    size_t errlen) {
    const int rc = pthread_create(t, NULL, body, arg);
    return rc ? kd_fail(err, errlen, "%s: cannot start its thread: %s", name, strerror(rc)) : 0;
}

void kd_thread_ask_stop(pthread_mutex_t *mu, pthread_cond_t *wake, bool *stopping) {
    pthread_mutex_lock(mu);
    *stopping = true;
    pthread_cond_broadcast(wake);
    pthread_mutex_unlock(mu);
}
