/* test_parallel.c — the thread pool (parallel.c): every item of every loop runs exactly once,
 * on a worker index below kr_parallel_threads(), with two callers sharing the pool (one
 * of them then runs its loop alone), loops nested in a task, and pauses long enough for
 * the helpers to fall asleep and be woken; a loop kept alone pausing before each item. Run at the
 * default thread count and, by meson, with KRONOS_THREADS=3 (more threads than this machine may
 * have CPUs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define MAX_ITEMS 64
#define LOOPS     20000

typedef struct {
    atomic_int hits[MAX_ITEMS];
    atomic_int bad_worker;
    int n, nested;
} loop_job;

static void count_item(void *arg, int i, int worker) {
    loop_job *j = arg;
    if (worker < 0 || worker >= kr_parallel_threads()) atomic_fetch_add(&j->bad_worker, 1);
    atomic_fetch_add(&j->hits[i], 1);
}

static void nested_item(void *arg, int i, int worker) {
    loop_job *j = arg;
    count_item(arg, i, worker);
    if (i == 0 && j->nested) { /* a loop inside a loop: runs on this thread alone */
        loop_job inner = {.n = j->nested};
        kr_parallel_for(inner.n, count_item, &inner);
        for (int k = 0; k < inner.n; k++)
            if (atomic_load(&inner.hits[k]) != 1) atomic_fetch_add(&j->bad_worker, 1);
    }
}

/* LOOPS loops of 1..64 items from this thread; the count of wrong items */
static void *run_loops(void *arg) {
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    long wrong = 0;
    for (int it = 0; it < LOOPS; it++) {
        seed = seed * 1664525u + 1013904223u;
        loop_job j = {.n = 1 + (int)(seed >> 8) % MAX_ITEMS, .nested = it % 7 == 0 ? 5 : 0};
        kr_parallel_for(j.n, nested_item, &j);
        for (int i = 0; i < MAX_ITEMS; i++)
            wrong += atomic_load(&j.hits[i]) != (i < j.n);
        wrong += atomic_load(&j.bad_worker);
        if (it % 2000 == 1999) { /* past the helpers' spin: they sleep, the next loop wakes them */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return (void *)(intptr_t)wrong;
}

static void every_item_once(void **state) {
    (void)state;
    assert_int_equal((intptr_t)run_loops((void *)(uintptr_t)1), 0);
}

static void two_callers(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_loops, (void *)(uintptr_t)2), 0);
    intptr_t here = (intptr_t)run_loops((void *)(uintptr_t)3);
    void *there;
    assert_int_equal(pthread_join(t, &there), 0);
    assert_int_equal(here, 0);
    assert_int_equal((intptr_t)there, 0);
}

/* A loop kept alone on its thread runs every item in order, pausing before each (the hook
 * sees the items done so far); without the hook, or on another thread, no pause. */
typedef struct {
    int paused, done_at_pause[MAX_ITEMS];
    loop_job *job;
} pauses;

static void note_pause(void *arg) {
    pauses *p = arg;
    int done = 0;
    for (int i = 0; i < p->job->n; i++)
        done += atomic_load(&p->job->hits[i]);
    if (p->paused < MAX_ITEMS) p->done_at_pause[p->paused] = done;
    p->paused++;
}

static void *loop_elsewhere(void *arg) {
    loop_job *j = arg;
    kr_parallel_for(j->n, count_item, j);
    return NULL;
}

static void pauses_between_items(void **state) {
    (void)state;
    loop_job j = {.n = 9};
    pauses p = {.job = &j};
    kr_parallel_alone(true);
    kr_parallel_pauses(note_pause, &p);
    kr_parallel_for(j.n, count_item, &j);
    assert_int_equal(p.paused, j.n);
    for (int i = 0; i < j.n; i++) {
        assert_int_equal(atomic_load(&j.hits[i]), 1);
        assert_int_equal(p.done_at_pause[i], i);
    }
    loop_job other = {.n = 9}; /* another thread's loops: its own hook, none */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop_elsewhere, &other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(p.paused, j.n);
    kr_parallel_pauses(NULL, NULL);
    kr_parallel_alone(false);
    loop_job again = {.n = 9};
    kr_parallel_for(again.n, count_item, &again);
    assert_int_equal(p.paused, j.n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pauses_between_items),
        cmocka_unit_test(every_item_once),
        cmocka_unit_test(two_callers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
