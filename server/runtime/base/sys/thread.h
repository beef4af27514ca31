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

/* cv made to time its waits on the monotonic clock (kd_thread_wait), which never steps. */
void kd_thread_cond_init(pthread_cond_t *cv);
/* Waits on cv (made by kd_thread_cond_init; mu held) until woken or ns nanoseconds passed. */
void kd_thread_wait(pthread_cond_t *cv, pthread_mutex_t *mu, long ns);

/* Sets *stopping under mu and wakes every thread waiting on wake; the caller joins them. */
void kd_thread_ask_stop(pthread_mutex_t *mu, pthread_cond_t *wake, bool *stopping);

#endif
