/* parallel.c — kr_parallel_for on a pool of threads started on first use.
 *
 * kr_set_threads, or else KRONOS_THREADS, sets the number of threads (caller included);
 * the default is the number of online CPUs. Items are claimed one at a time from a shared counter.
 * The pool is the core's only source of parallelism, and no result depends on it (the kernels
 * give every row the same bits whichever thread computes it).
 *
 * A single-path decode step issues about forty loops of a few microseconds each, so a loop's
 * start and end cost no lock and no system call while the threads are busy: the caller
 * publishes a loop by bumping a generation word, and joins it by watching a count of finished
 * items. Each side spins for a bounded time before it sleeps on that word (a futex), so a
 * machine whose other vCPU is taken does not lose it to spinning. Only items a helper has
 * claimed are waited for: a helper that was not scheduled in time claims nothing, and the
 * caller runs the whole loop alone instead of waiting for it to wake.
 *
 * An item may claim its thread's next item ahead (kr_parallel_claim_next): the thread runs
 * it next, whoever else is faster, so the item can fetch what that one reads.
 */
#include "parallel.h"
#include "kronos.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#define KR_MAX_THREADS 64
/* How long a thread spins on a word before it sleeps: longer than the serial work between two
 * loops of a decode step (norms, attention of a few rows), far shorter than a scheduler tick. */
#define KR_SPIN_NS 200000

static struct {
    pthread_once_t once;
    int n_helpers;
    int requested; /* kr_set_threads, before start */
    atomic_bool started;
    atomic_flag busy; /* held by the caller whose loop runs on the pool */
    /* the loop: set before its generation is published, read by helpers after */
    _Alignas(64) _Atomic(kr_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n;
    atomic_uint generation; /* helpers sleep on it */
    atomic_int sleepers;    /* helpers asleep or about to be */
    /* (generation << 32) | next item: a claim is valid only within its own loop */
    _Alignas(64) _Atomic uint64_t next;
    _Alignas(64) atomic_uint done; /* items finished; the caller sleeps on it */
    atomic_bool joiner_sleeps;
} P = {.once = PTHREAD_ONCE_INIT, .busy = ATOMIC_FLAG_INIT};

/* ---- waiting on a word ------------------------------------------------------------------- */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins until *w != v or KR_SPIN_NS pass; true when it changed. */
static bool spin_while(atomic_uint *w, unsigned v) {
    uint64_t t0 = 0;
    for (int i = 1;; i++) {
        if (atomic_load_explicit(w, memory_order_acquire) != v) return true;
        cpu_relax();
        if (i % 64 == 0) { /* a clock read every 64 pauses */
            uint64_t t = now_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > KR_SPIN_NS)
                return false;
        }
    }
}

#ifdef __linux__
/* Sleeps while *w == v (returns at once if it already differs); may wake spuriously. */
static void word_wait(atomic_uint *w, unsigned v) {
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void word_wake(atomic_uint *w) {
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
static pthread_mutex_t word_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t word_cv = PTHREAD_COND_INITIALIZER;
static void word_wait(atomic_uint *w, unsigned v) {
    pthread_mutex_lock(&word_mu);
    if (atomic_load(w) == v) pthread_cond_wait(&word_cv, &word_mu);
    pthread_mutex_unlock(&word_mu);
}
static void word_wake(atomic_uint *w) {
    (void)w;
    pthread_mutex_lock(&word_mu);
    pthread_cond_broadcast(&word_cv);
    pthread_mutex_unlock(&word_mu);
}
#endif

/* ---- the loop ---------------------------------------------------------------------------- */

/* The loop this thread is running an item of, for kr_parallel_claim_next: on the pool (gen, n,
 * and the item claimed ahead, or -1), or serial (items in order: the next is cur + 1). */
typedef struct {
    bool active, serial;
    unsigned gen;
    int n, cur, ahead;
} running;
static _Thread_local running here;
static _Thread_local bool alone;                  /* kr_parallel_alone */
static _Thread_local void (*pause_fn)(void *ctx); /* kr_parallel_pauses */
static _Thread_local void *pause_ctx;

void kr_parallel_alone(bool on) {
    alone = on;
}

void kr_parallel_pauses(void (*pause)(void *ctx), void *ctx) {
    pause_fn = pause;
    pause_ctx = ctx;
}

/* One claim of loop gen's next item: -1 when none is left or another loop has started. */
static int claim(unsigned gen, int n) {
    uint64_t cur = atomic_load_explicit(&P.next, memory_order_relaxed);
    for (;;) {
        if ((unsigned)(cur >> 32) != gen || (int)(uint32_t)cur >= n) return -1;
        if (atomic_compare_exchange_weak(&P.next, &cur, cur + 1)) return (int)(uint32_t)cur;
    }
}

int kr_parallel_claim_next(void) {
    if (!here.active || here.ahead >= 0) return -1;
    if (here.serial) return here.ahead = here.cur + 1 < here.n ? here.cur + 1 : -1;
    return here.ahead = claim(here.gen, here.n);
}

/* Claims and runs items of loop `gen` until none is left or another loop has started (a late
 * helper's claim then fails: it never runs an item of a loop it did not read). */
static void drain(unsigned gen, kr_task_fn fn, void *ctx, int n, int worker) {
    running outer = here;
    here = (running){true, false, gen, n, -1, -1};
    for (int item = claim(gen, n); item >= 0;) {
        here.cur = item;
        fn(ctx, item, worker);
        unsigned finished = atomic_fetch_add(&P.done, 1) + 1;
        if ((int)finished == n && atomic_load(&P.joiner_sleeps)) word_wake(&P.done);
        item = here.ahead >= 0 ? here.ahead : claim(gen, n);
        here.ahead = -1;
    }
    here = outer;
}

static void *helper(void *arg) {
    int worker = (int)(intptr_t)arg;
    unsigned seen = 0;
    for (;;) {
        if (!spin_while(&P.generation, seen)) {
            atomic_fetch_add(&P.sleepers, 1);
            while (atomic_load(&P.generation) == seen)
                word_wait(&P.generation, seen);
            atomic_fetch_sub(&P.sleepers, 1);
        }
        seen = atomic_load_explicit(&P.generation, memory_order_acquire);
        kr_task_fn fn = atomic_load_explicit(&P.fn, memory_order_acquire);
        void *ctx = atomic_load_explicit(&P.ctx, memory_order_acquire);
        int n = atomic_load_explicit(&P.n, memory_order_acquire);
        drain(seen, fn, ctx, n, worker);
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
    running outer = here;
    here = (running){true, true, 0, n, -1, -1};
    for (int i = 0; i < n; i++) {
        if (pause_fn) pause_fn(pause_ctx);
        here.cur = i;
        fn(ctx, i, 0);
        here.ahead = -1;
    }
    here = outer;
}

void kr_parallel_for_if(bool worth_a_join, int n, kr_task_fn fn, void *ctx) {
    if (worth_a_join)
        kr_parallel_for(n, fn, ctx);
    else
        kr_serial_for(n, fn, ctx);
}

/* Waits until every item of the caller's loop of n has finished. */
static void join(int n) {
    unsigned finished;
    while ((int)(finished = atomic_load_explicit(&P.done, memory_order_acquire)) != n) {
        if (spin_while(&P.done, finished)) continue;
        atomic_store(&P.joiner_sleeps, true);
        while ((int)(finished = atomic_load(&P.done)) != n)
            word_wait(&P.done, finished);
        atomic_store(&P.joiner_sleeps, false);
    }
}

void kr_parallel_for(int n, kr_task_fn fn, void *ctx) {
    if (n <= 0) return;
    pthread_once(&P.once, start);
    if (n == 1 || alone || P.n_helpers == 0 || atomic_flag_test_and_set(&P.busy)) {
        kr_serial_for(n, fn, ctx);
        return;
    }
    /* The claim word moves to the new generation first: a late helper of the previous loop
     * that reads any of the new fields (acquire) then sees it, and its claim fails. */
    unsigned gen = atomic_load_explicit(&P.generation, memory_order_relaxed) + 1;
    atomic_store(&P.next, (uint64_t)gen << 32);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.fn, fn, memory_order_release);
    atomic_store_explicit(&P.ctx, ctx, memory_order_release);
    atomic_store_explicit(&P.n, n, memory_order_release);
    atomic_store(&P.generation, gen); /* publishes the loop */
    if (atomic_load(&P.sleepers) > 0) word_wake(&P.generation);
    drain(gen, fn, ctx, n, 0);
    join(n); /* every item is claimed: wait for those a helper is still running */
    atomic_flag_clear(&P.busy);
}
