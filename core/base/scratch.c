/* scratch.c — per-thread run scratch kept from one call to the next.
 *
 * A prefill, a decode step or a tokenizer decode needs megabytes of scratch. Freshly
 * allocated each call, its pages are faulted in and zeroed by the kernel inside every call
 * (malloc hands large blocks back to the system on free): 6-8% of a bench run's time.
 * Here each thread keeps one buffer per kind of use (kr_scratch_slot), grown when a call
 * needs more and kept until the thread exits, so a long-lived thread (the daemon's
 * scheduler, a worker) touches its scratch pages once. A slot already in use on the thread
 * (a nested call) or a request above KR_SCRATCH_KEEP_MAX gets a plain malloc instead.
 */
#include "base.h"

#include <pthread.h>
#include <stdlib.h>

/* Larger requests are not kept: a thread should not hold on to more than this per slot. */
#define KR_SCRATCH_KEEP_MAX ((size_t)256 << 20)
#define ALIGN               64

typedef struct {
    void *buf[KR_SCRATCH_SLOTS];
    size_t cap[KR_SCRATCH_SLOTS];
    unsigned char busy[KR_SCRATCH_SLOTS];
    int registered;
} thread_scratch;

static _Thread_local thread_scratch tls;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void free_at_exit(void *arg) {
    thread_scratch *t = arg;
    for (int s = 0; s < KR_SCRATCH_SLOTS; s++) {
        free(t->buf[s]);
        t->buf[s] = NULL;
        t->cap[s] = 0;
    }
}

static void make_key(void) {
    pthread_key_create(&exit_key, free_at_exit);
}

void *kr_scratch_take(kr_scratch *s, kr_scratch_slot slot, size_t bytes) {
    if (bytes == 0) bytes = 1;
    size_t rounded = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    s->slot = (int)slot;
    s->kept = 0;
    s->p = NULL;
    if ((int)slot < 0 || slot >= KR_SCRATCH_SLOTS || tls.busy[slot] ||
        rounded > KR_SCRATCH_KEEP_MAX)
        return s->p = malloc(bytes);
    if (tls.cap[slot] < rounded) {
        /* half as much again at least: a need that grows a little every call (a long
         * context encoded in chunks, its keys growing) is not reallocated, its pages faulted
         * in afresh, every time */
        size_t grown = tls.cap[slot] + tls.cap[slot] / 2;
        grown = grown > KR_SCRATCH_KEEP_MAX ? KR_SCRATCH_KEEP_MAX : grown / ALIGN * ALIGN;
        if (grown > rounded) rounded = grown;
        free(tls.buf[slot]);
        tls.cap[slot] = 0;
        tls.buf[slot] = aligned_alloc(ALIGN, rounded);
        if (!tls.buf[slot]) return NULL;
        tls.cap[slot] = rounded;
        if (!tls.registered) { /* freed when the thread exits */
            pthread_once(&exit_once, make_key);
            tls.registered = pthread_setspecific(exit_key, &tls) == 0;
        }
    }
    tls.busy[slot] = 1;
    s->kept = 1;
    return s->p = tls.buf[slot];
}

void kr_scratch_release(kr_scratch *s) {
    if (s->p && s->kept)
        tls.busy[s->slot] = 0;
    else
        free(s->p);
    s->kept = 0;
    s->p = NULL;
}
