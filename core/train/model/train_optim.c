/* train_optim.c — what happens to the gradients after the backward, as torch does it:
 * clip_grad_norm_ (the global L2 norm over every gradient, summed in a fixed order), AdamW
 * with decoupled weight decay, and OneCycleLR's learning rate. */
#include "train_model.h"

#include "parallel.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    kr_train_model *m;
    double *sums; /* [n]: tensor i's sum of squares */
    float coef;
} clip_job;

/* one tensor's sum of squares, in its own order: any thread gives the same bits */
static double sum_squares(const tr_tensor *t) {
    double s = 0.0;
    for (size_t k = 0; t->trains && k < t->n; k++)
        s += (double)t->g[k] * t->g[k];
    return s;
}

static void clip_sum(void *ctx, int i, int worker) {
    (void)worker;
    const clip_job *j = ctx;
    j->sums[i] = sum_squares(&j->m->t[i]);
}

static void clip_scale(void *ctx, int i, int worker) {
    (void)worker;
    const clip_job *j = ctx;
    tr_tensor *t = &j->m->t[i];
    for (size_t k = 0; t->trains && k < t->n; k++)
        t->g[k] *= j->coef;
}

void kr_train_clip(kr_train_model *m, double max_norm, double *norm) {
    clip_job j = {m, malloc((size_t)m->n * sizeof(double)), 1.0f};
    if (j.sums) kr_parallel_for(m->n, clip_sum, &j);
    double ss = 0.0;
    for (int i = 0; i < m->n; i++) {
        if (!m->t[i].trains) continue;
        /* no room for the sums: the same ones on this thread */
        double s = j.sums ? j.sums[i] : sum_squares(&m->t[i]);
        float tn = (float)sqrt(s); /* each tensor's norm, then the norm of the norms, as torch */
        ss += (double)tn * tn;
    }
    float total = (float)sqrt(ss);
    if (norm) *norm = total;
    j.coef = (float)max_norm / (total + 1e-6f);
    if (j.coef < 1.0f) kr_parallel_for(m->n, clip_scale, &j);
    free(j.sums);
}

#define ADAM_CHUNK 16384

typedef struct {
    kr_train_model *m;
    int *tensor, *first; /* item i: chunk first[i] of tensor[i] */
    float decay, step, bc2_sqrt, b1, b2, eps;
} adam_job;

#define KR_LANES_TEMPLATE "train_optim_lanes.h"
#include "lanes.h"

KR_DISPATCH(adam_chunk, (void *ctx, int i, int worker), (ctx, i, worker))

void kr_train_adamw(kr_train_model *m, const kr_adamw *o) {
    m->steps++;
    double bc1 = 1.0 - pow(o->beta1, m->steps), bc2 = 1.0 - pow(o->beta2, m->steps);
    adam_job j = {.m = m,
                  .decay = (float)(1.0 - o->lr * o->weight_decay),
                  .step = (float)(o->lr / bc1),
                  .bc2_sqrt = (float)sqrt(bc2),
                  .b1 = (float)o->beta1,
                  .b2 = (float)o->beta2,
                  .eps = (float)o->eps};
    int items = 0;
    for (int i = 0; i < m->n; i++)
        if (m->t[i].trains) items += (int)((m->t[i].n + ADAM_CHUNK - 1) / ADAM_CHUNK);
    j.tensor = malloc((size_t)items * 2 * sizeof(int));
    if (!j.tensor) { /* no room for the chunk table: the same updates on this thread */
        for (int i = 0; i < m->n; i++) {
            if (!m->t[i].trains) continue;
            int one[2] = {i, 0};
            adam_job s = j;
            s.tensor = one, s.first = one + 1;
            for (one[1] = 0; (size_t)one[1] * ADAM_CHUNK < m->t[i].n; one[1]++)
                adam_chunk(&s, 0, 0);
        }
        return;
    }
    j.first = j.tensor + items;
    int n = 0;
    for (int i = 0; i < m->n; i++)
        for (size_t c = 0; m->t[i].trains && c * ADAM_CHUNK < m->t[i].n; c++)
            j.tensor[n] = i, j.first[n++] = (int)c;
    kr_parallel_for(items, adam_chunk, &j);
    free(j.tensor);
}

/* torch's _annealing_cos */
static double anneal_cos(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1.0);
}

double kr_one_cycle_lr(const kr_one_cycle *s, int step) {
    double initial = s->max_lr / s->div_factor, min_lr = initial / s->final_div_factor;
    double end1 = s->pct_start * s->total_steps - 1, end2 = s->total_steps - 1;
    if (step <= end1 && end1 > 0) return anneal_cos(initial, s->max_lr, step / end1);
    if (end2 <= end1) return s->max_lr; /* a schedule too short for its phases */
    /* torch's second phase from end1, whatever its sign (end1 = 0: torch divides by zero in
     * the first phase; here step 0 starts the second at max_lr) */
    return anneal_cos(s->max_lr, min_lr, (step - end1) / (end2 - end1));
}
