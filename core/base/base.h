/* base.h — the ground floor of core/: what every floor above uses. Error reporting
 * (kr_fail, kr_fail_code in kronos.h; the caller's cancel check here) and memory for large
 * buffers. Internal to core/; the floors above include it, it includes nothing of theirs.
 *
 * core/ in floors, each including only its own headers and those of the floors below
 * (meson gives each floor only those include directories):
 *
 *   train/     fine-tuning the predictor (include/kronos_train.h): the data windows and the
 *              run on top; under them step/ (the passes), ops/ (their operations) and
 *              model/ (the tensors, loading and saving, clipping, AdamW, OneCycleLR)
 *                                         train_passes.h, train_ops.h, train_model.h
 *   evaluate/  walk-forward evaluation: the origins' forecasts, the scores   evaluate_impl.h
 *   drivers/   one-shot runs to completion: kr_forecast(_batch), kr_forecast_series,
 *              kr_generate(_batch), all through one driver over the scheduler   run.h
 *   sched/     the step scheduler and its job kinds (a table of operations per kind)
 *                                                          sched_impl.h, step_batch.h
 *   forecast/  candles, plans, series, summaries, the reference path   forecast_impl.h
 *   decode/    KV pool and caches, the tokenizer, the predictor, sampling, time stamps
 *                                                  cache.h, predictor.h, tokenizer.h
 *   model/     safetensors files, the loader, the weights      model.h, safetensors.h
 *   kernels/   in floors of their own: nn/ (the transformer block, the row-wise steps)
 *              over attention/, matmul/ (the products), simd/ (the per-level templates)
 *              and parallel/ (the thread pool)
 *                                  nn.h, attention.h, matmul.h, lanes.h, parallel.h
 *   base/      errors, allocation, the layer and KV-view types the kernels compute on
 *                                                      base.h, layers.h, kv_view.h
 *
 * The headers named on the right are internal: the library's users include only
 * include/kronos.h; core/ and the tests (which reach test hooks such as
 * kr_forecast_window or kr_series_tokens) include these.
 */
#ifndef KR_BASE_H
#define KR_BASE_H

#include "kronos.h"

#include <stddef.h>

/* Milliseconds on the monotonic clock (clock.c): for intervals only. */
double kr_now_ms(void);

/* Memory for weights and KV blocks: large buffers are 2 MiB-aligned and marked for
 * transparent huge pages, which saves page faults and TLB misses on every pass over them.
 * Free with free(). */
void *kr_alloc_large(size_t bytes);
/* calloc(1, bytes), or NULL with KR_E_NO_MEMORY and the message `what` in err. */
void *kr_zalloc(size_t bytes, kr_error *err, const char *what);
/* free() of each pointer listed, NULLs included: an object's arrays released in one
 * statement, KR_FREE_ALL(o->a, o->b, o->c) */
#define KR_FREE_ALL(...)                                                                           \
    kr_free_each((void *const[]){__VA_ARGS__},                                                     \
                 sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))
void kr_free_each(void *const *ptrs, size_t n);

/* Run scratch kept per thread between calls (scratch.c): kr_scratch_take gives `bytes` of
 * uninitialised memory, 64-byte aligned when it comes from the thread's slot, or NULL when
 * out of memory; kr_scratch_release gives it back (to the slot, or to free() when the slot
 * was busy or the request too large to keep). One use of a slot at a time per thread. */
typedef enum {
    KR_SCRATCH_BLOCK,     /* a transformer block's scratch (kernels/nn/nn.c) */
    KR_SCRATCH_ATTENTION, /* attention's per-call tile tables (kernels/attention/attention.c) */
    KR_SCRATCH_APPEND,    /* a cache append's rows (decode/decoder.c) */
    KR_SCRATCH_TOKENIZER, /* the tokenizer's activations and keys (decode/tokenizer.c) */
    KR_SCRATCH_PATHS,     /* the tokenizer's sample paths: their rows and own keys (same) */
    KR_SCRATCH_S2,        /* the s2 head's rows (decode/predictor.c) */
    KR_SCRATCH_SLOTS
} kr_scratch_slot;
typedef struct { /* all zero: holds nothing (release does nothing) */
    void *p;
    int slot, kept; /* kept: p is the thread's slot, else it came from malloc */
} kr_scratch;
void *kr_scratch_take(kr_scratch *s, kr_scratch_slot slot, size_t bytes);
void kr_scratch_release(kr_scratch *s);
/* One array of `bytes` carved from a scratch buffer at offset `at`, arrays 64 bytes apart:
 * *out = base + at (base NULL: nothing is set, only the size is summed). Returns the offset
 * after it: a layout run once with NULL gives the bytes to take, once more the arrays. */
static inline size_t kr_carve(char *base, size_t at, void **out, size_t bytes) {
    if (base) *out = base + at;
    return at + (bytes + 63) / 64 * 64;
}

/* The caller's cancel check (kr_cancel): 0 to go on, else -1 with KR_E_DEADLINE or
 * KR_E_CANCELLED and a message naming `what` ("forecast"). */
int kr_check_cancel(const kr_cancel *c, const char *what, kr_error *err);

#endif
