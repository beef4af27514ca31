/* parallel.c — kr_parallel_for on a pool of threads started on first use.
 *
 * kr_set_threads, or else KRONOS_THREADS, sets the number of threads (caller included);
 * the default is the number of online CPUs. Items are claimed one at a time from a shared counter.
 * The pool is the core's only source of parallelism, and no result depends on it (the kernels
 * give every row the same bits whichever thread computes it).
 */
#include "parallel.h"
#include "kronos.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define KR_MAX_THREADS 64

static struct {
    pthread_once_t once;
    pthread_mutex_t busy; /* held by the caller whose loop runs on the pool */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int n_helpers;
    int requested; /* kr_set_threads, before start */
    atomic_bool started;
    unsigned long generation;
    atomic_ulong published; /* generation, readable without the lock */
    atomic_int active;      /* helpers still working on the current loop */
    kr_task_fn fn;
    void *ctx;
    int n;
    atomic_int next;
} P = {.once = PTHREAD_ONCE_INIT,
       .busy = PTHREAD_MUTEX_INITIALIZER,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

static void drain(kr_task_fn fn, void *ctx, int n, int worker) {
    for (int i; (i = atomic_fetch_add(&P.next, 1)) < n;)
        fn(ctx, i, worker);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A decode step hands out loops back to back; spinning a little before sleeping saves a
 * wake-up (tens of microseconds) per loop. */
#define KR_SPIN 4000

static void *helper(void *arg) {
    int worker = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        if (P.generation == seen) {
            pthread_mutex_unlock(&P.mu);
            for (int i = 0; i < KR_SPIN && atomic_load(&P.published) == seen; i++)
                cpu_relax();
            pthread_mutex_lock(&P.mu);
        }
        while (P.generation == seen)
            pthread_cond_wait(&P.wake, &P.mu);
        seen = P.generation;
        kr_task_fn fn = P.fn;
        void *ctx = P.ctx;
        int n = P.n;
        pthread_mutex_unlock(&P.mu);
        drain(fn, ctx, n, worker);
        pthread_mutex_lock(&P.mu);
        if (--P.active == 0) pthread_cond_signal(&P.done);
    }
    return NULL;
}

static void start(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("KRONOS_THREADS");
    int want = P.requested > 0 ? P.requested : env ? atoi(env) : (int)(cpus > 0 ? cpus : 1);
    if (want < 1) want = 1;
    if (want > KR_MAX_THREADS) want = KR_MAX_THREADS;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < want - 1; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, helper, (void *)(intptr_t)(i + 1)) != 0)
            break; /* fewer threads still work */
        P.n_helpers++;
    }
    pthread_attr_destroy(&attr);
    atomic_store(&P.started, true);
}

int kr_set_threads(int n) {
    if (atomic_load(&P.started) || n < 0) return -1;
    P.requested = n;
    return 0;
}

int kr_threads(void) {
    return kr_parallel_threads();
}

int kr_parallel_threads(void) {
    pthread_once(&P.once, start);
    return P.n_helpers + 1;
}

void kr_serial_for(int n, kr_task_fn fn, void *ctx) {
    for (int i = 0; i < n; i++)
        fn(ctx, i, 0);
}

void kr_parallel_for(int n, kr_task_fn fn, void *ctx) {
    if (n <= 0) return;
    pthread_once(&P.once, start);
    if (n == 1 || P.n_helpers == 0 || pthread_mutex_trylock(&P.busy) != 0) {
        for (int i = 0; i < n; i++)
            fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&P.mu);
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    atomic_store(&P.next, 0);
    P.active = P.n_helpers;
    P.generation++;
    atomic_store(&P.published, P.generation);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    drain(fn, ctx, n, 0);
    pthread_mutex_lock(&P.mu);
    while (P.active > 0)
        pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&P.busy);
}
