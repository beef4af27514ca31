/* step_batch.h — one step's rows, gathered job by job for the scheduler's one ragged
 * append, and the growth of the scheduler's buffers. Internal to core/. */
#ifndef KR_STEP_BATCH_H
#define KR_STEP_BATCH_H

#include "kronos.h"

typedef struct sched_job sched_job; /* the job a group of rows belongs to (sched_impl.h) */

/* Groups of consecutive rows of one cache, in the order they are appended, and where each
 * group's s1 logits go (NULL: not needed). side_rows: the work the jobs do on their own in
 * this step, outside the append (contexts' encodes: `encoded` candles), in rows of the
 * step's cost. */
typedef struct {
    int n_groups, cap_groups, n_rows, cap_rows, side_rows, encoded;
    kr_cache **caches;
    int *T;
    float **l1;
    sched_job **owner;
    int32_t *s1, *s2;
    kr_stamp *st;
} step_batch;

int step_batch_add(step_batch *b, sched_job *owner, kr_cache *c, int n, const int32_t *s1,
                   const int32_t *s2, const kr_stamp *st, int st_stride, float *l1);
void step_batch_free(step_batch *b);
/* A capacity for need items: the old one doubled until it is enough (64 at first). */
int sched_next_cap(int cap, int need);
/* *p reallocated to n elements of elem bytes; -1, *p as it was, when out of memory. */
int sched_resize(void **p, int n, size_t elem);

#endif
