/* thread.h — the daemon's background threads (scheduler, workers, journal flusher, connection
 * guard, fine-tuning trainer): starting one with a failure reported the house's way, and the
 * stop request each of them waits for. */
#ifndef KD_THREAD_H
#define KD_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Starts body(arg) on *t; 0, or -1 with "NAME: cannot start its thread: REASON" in err. */
int kd_thread_start(pthread_t *t, void *(*body)(void *), void *arg, const char *name, char *err,
                    size_t errlen);

/* Sets *stopping under mu and wakes every thread waiting on wake; the caller joins them. */
void kd_thread_ask_stop(pthread_mutex_t *mu, pthread_cond_t *wake, bool *stopping);

#endif
