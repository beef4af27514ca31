/* step_batch.c — one step's rows, gathered job by job for the scheduler's one ragged append:
 * each group a run of rows of one cache, with where its s1 logits go; and the growth of the
 * scheduler's buffers. */
#include "step_batch.h"

#include "base.h"

#include <stdlib.h>
#include <string.h>

int sched_next_cap(int cap, int need) {
    int n = cap ? cap : 64;
    while (n < need)
        n *= 2;
    return n;
}

int sched_resize(void **p, int n, size_t elem) {
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q;
    return 0;
}

int step_batch_add(step_batch *b, sched_job *owner, kr_cache *c, int n, const int32_t *s1,
                   const int32_t *s2, const kr_stamp *st, int st_stride, float *l1) {
    if (b->n_groups + 1 > b->cap_groups) {
        int cap = sched_next_cap(b->cap_groups, b->n_groups + 1);
        if (sched_resize((void **)&b->caches, cap, sizeof *b->caches) ||
            sched_resize((void **)&b->T, cap, sizeof *b->T) ||
            sched_resize((void **)&b->l1, cap, sizeof *b->l1) ||
            sched_resize((void **)&b->owner, cap, sizeof *b->owner))
            return -1;
        b->cap_groups = cap;
    }
    if (b->n_rows + n > b->cap_rows) {
        int cap = sched_next_cap(b->cap_rows, b->n_rows + n);
        if (sched_resize((void **)&b->s1, cap, sizeof *b->s1) ||
            sched_resize((void **)&b->s2, cap, sizeof *b->s2) ||
            sched_resize((void **)&b->st, cap, sizeof *b->st))
            return -1;
        b->cap_rows = cap;
    }
    b->caches[b->n_groups] = c;
    b->T[b->n_groups] = n;
    b->l1[b->n_groups] = l1;
    b->owner[b->n_groups++] = owner;
    memcpy(b->s1 + b->n_rows, s1, (size_t)n * sizeof *s1);
    memcpy(b->s2 + b->n_rows, s2, (size_t)n * sizeof *s2);
    for (int t = 0; t < n; t++)
        b->st[b->n_rows + t] = st[(size_t)t * st_stride];
    b->n_rows += n;
    return 0;
}

void step_batch_free(step_batch *b) {
    KR_FREE_ALL(b->caches, b->T, b->l1, b->owner, b->s1, b->s2, b->st);
}
