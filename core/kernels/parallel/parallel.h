/* parallel.h — the persistent thread pool the products, attention and row-wise steps split
 * their loops over. Internal to core/. */
#ifndef KR_PARALLEL_H
#define KR_PARALLEL_H

#include <stdbool.h>

/* worker: which thread runs the item, in [0, kr_parallel_threads()), for per-thread scratch */
typedef void (*kr_task_fn)(void *ctx, int i, int worker);

/* Runs fn(ctx, i, worker) for i in [0, n) on the pool's threads and the caller's. When
 * another thread is already using the pool, the caller runs the loop alone rather than
 * wait. The split never changes a result: each i is computed the same way on any thread. */
void kr_parallel_for(int n, kr_task_fn fn, void *ctx);
/* The same loop on the calling thread alone (worker 0): for loops too small to repay even a
 * lock-free start and join, such as the row-wise steps of a few rows. */
void kr_serial_for(int n, kr_task_fn fn, void *ctx);
/* kr_parallel_for when `worth_a_join` (the loop is large enough to repay its start and
 * join), else kr_serial_for: the same items, the same bits either way. */
void kr_parallel_for_if(bool worth_a_join, int n, kr_task_fn fn, void *ctx);
/* From inside an item: claims the item its thread runs next, now (-1: none left), so that the
 * item can prepare it (a product's task fetches the weights of its next one). Without it a
 * thread can only guess which item it gets next. At most one claim per item. */
int kr_parallel_claim_next(void);
/* on: kr_parallel_for on the calling thread runs as kr_serial_for (a low-priority thread
 * keeps its loops, and never holds the pool that serving's threads share). */
void kr_parallel_alone(bool on);
/* pause(ctx) before each item the calling thread's serial loops run (a loop kept alone runs
 * serially), so that a low-priority thread can wait while more urgent work runs; NULL: none.
 * Waiting between items changes no result. */
void kr_parallel_pauses(void (*pause)(void *ctx), void *ctx);
/* Threads a loop may run on (caller included): the bound on `worker`. */
int kr_parallel_threads(void);

#endif
