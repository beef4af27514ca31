/* train_loss.c — upstream's training loss (CE_s1 + CE_s2) / 2, each cross-entropy the mean
 * over every fed position, its gradient with respect to the logits, and the s1 ids drawn
 * from the s1 logits for the s2 head's sampled conditioning. */
#include "train_passes.h"

#include <math.h>
#include <stdlib.h>

/* mean cross-entropy of z[R][V] against t[R]; z becomes its gradient times `scale` */
static double cross_entropy(float *z, const int32_t *t, int R, int V, double scale) {
    double total = 0.0;
    for (int r = 0; r < R; r++) {
        float *zr = z + (size_t)r * V, mx = zr[0];
        for (int i = 1; i < V; i++)
            if (zr[i] > mx) mx = zr[i];
        double sum = 0.0;
        for (int i = 0; i < V; i++)
            sum += exp((double)zr[i] - mx);
        double lse = mx + log(sum);
        total += lse - zr[t[r]];
        for (int i = 0; i < V; i++)
            zr[i] = (float)(exp((double)zr[i] - lse) * scale / R);
        zr[t[r]] -= (float)(scale / R);
    }
    return total / R;
}

void tr_loss(const kr_train_model *m, tr_acts *a, const int32_t *t1, const int32_t *t2,
             kr_train_losses *out) {
    out->ce_s1 = cross_entropy(a->logit1, t1, a->R, 1 << m->pc.s1_bits, 0.5);
    out->ce_s2 = cross_entropy(a->logit2, t2, a->R, 1 << m->pc.s2_bits, 0.5);
    out->loss = (out->ce_s1 + out->ce_s2) / 2;
}

void tr_draw_siblings(const kr_train_model *m, tr_acts *a, uint64_t seed) {
    int V = 1 << m->pc.s1_bits;
    uint64_t key = tr_mix(seed, (uint64_t)m->steps);
    for (int r = 0; r < a->R; r++) {
        const float *z = a->logit1 + (size_t)r * V;
        float mx = z[0];
        for (int i = 1; i < V; i++)
            if (z[i] > mx) mx = z[i];
        double sum = 0.0;
        for (int i = 0; i < V; i++)
            sum += exp((double)z[i] - mx);
        double u = (double)(tr_mix(key, (uint64_t)r) >> 11) * (1.0 / 9007199254740992.0) * sum;
        double acc = 0.0;
        int pick = V - 1;
        for (int i = 0; i < V; i++) {
            acc += exp((double)z[i] - mx);
            if (u < acc) {
                pick = i;
                break;
            }
        }
        a->sib[r] = pick;
    }
}
