/* train_optim.c — what happens to the gradients after the backward, as torch does it:
 * clip_grad_norm_ (the global L2 norm over every gradient, summed in a fixed order), AdamW
 * with decoupled weight decay, and OneCycleLR's learning rate. */
#include "train_impl.h"

#include <math.h>

void kr_train_clip(kr_train_model *m, double max_norm, double *norm) {
    double ss = 0.0;
    for (int i = 0; i < m->n; i++) {
        const tr_tensor *t = &m->t[i];
        if (!t->trains) continue;
        double s = 0.0; /* each tensor's norm, then the norm of the norms, as torch */
        for (size_t k = 0; k < t->n; k++)
            s += (double)t->g[k] * t->g[k];
        float tn = (float)sqrt(s);
        ss += (double)tn * tn;
    }
    float total = (float)sqrt(ss);
    if (norm) *norm = total;
    float coef = (float)max_norm / (total + 1e-6f);
    if (coef >= 1.0f) return;
    for (int i = 0; i < m->n; i++) {
        tr_tensor *t = &m->t[i];
        if (!t->trains) continue;
        for (size_t k = 0; k < t->n; k++)
            t->g[k] *= coef;
    }
}

void kr_train_adamw(kr_train_model *m, const kr_adamw *o) {
    m->steps++;
    double bc1 = 1.0 - pow(o->beta1, m->steps), bc2 = 1.0 - pow(o->beta2, m->steps);
    float decay = (float)(1.0 - o->lr * o->weight_decay), step = (float)(o->lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2), b1 = (float)o->beta1, b2 = (float)o->beta2;
    float eps = (float)o->eps;
    for (int i = 0; i < m->n; i++) {
        tr_tensor *t = &m->t[i];
        if (!t->trains) continue;
        for (size_t k = 0; k < t->n; k++) {
            float g = t->g[k];
            t->w[k] *= decay;
            t->m[k] += (g - t->m[k]) * (1.0f - b1);
            t->v[k] = t->v[k] * b2 + (1.0f - b2) * g * g;
            float denom = sqrtf(t->v[k]) / bc2_sqrt + eps;
            t->w[k] -= step * t->m[k] / denom;
        }
    }
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
