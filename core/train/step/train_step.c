/* train_step.c — one training step's gradients (kr_train_gradients) or its loss alone
 * (kr_train_loss, a validation batch): the batch checked
 * and laid out as the model is fed (tokens 0..T-1 of each window, targets 1..T), the s2
 * head's conditioning chosen, then forward, loss and backward. */
#include "train_passes.h"

#include <stdlib.h>
#include <string.h>

static int check_batch(const kr_train_model *m, const kr_train_batch *b, kr_error *err) {
    if (b->batch < 1 || b->len < 1)
        return kr_fail_code(err, KR_E_INVALID,
                            "batch: needs at least 1 window of 2 tokens, got "
                            "%d windows of %d",
                            b->batch, b->len + 1);
    if (!b->s1 || !b->s2 || !b->stamps)
        return kr_fail_code(err, KR_E_INVALID, "batch: s1, s2 and stamps are required");
    if (b->condition != KR_S2_TEACHER && b->condition != KR_S2_SAMPLED)
        return kr_fail_code(err, KR_E_INVALID, "batch.condition: must be teacher or sampled");
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits, W = b->len + 1;
    for (int w = 0; w < b->batch; w++)
        for (int t = 0; t < W; t++) {
            size_t i = (size_t)w * W + t;
            if (b->s1[i] < 0 || b->s1[i] >= v1)
                return kr_fail_code(err, KR_E_INVALID, "batch.s1[%d][%d]: %d is outside [0, %d)", w,
                                    t, (int)b->s1[i], v1);
            if (b->s2[i] < 0 || b->s2[i] >= v2)
                return kr_fail_code(err, KR_E_INVALID, "batch.s2[%d][%d]: %d is outside [0, %d)", w,
                                    t, (int)b->s2[i], v2);
            kr_error e;
            if (kr_stamp_check(&b->stamps[i], &e))
                return kr_fail_code(err, KR_E_INVALID, "batch.stamps[%d][%d]: %s", w, t, e.msg);
            if (t < b->len && b->condition == KR_S2_SAMPLED && b->sibling &&
                (b->sibling[(size_t)w * b->len + t] < 0 ||
                 b->sibling[(size_t)w * b->len + t] >= v1))
                return kr_fail_code(err, KR_E_INVALID,
                                    "batch.sibling[%d][%d]: %d is outside [0, %d)", w, t,
                                    (int)b->sibling[(size_t)w * b->len + t], v1);
        }
    return 0;
}

static int run(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out, bool backward,
               kr_error *err);

static int step(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out, bool backward,
                kr_error *err) {
    if (check_batch(m, b, err)) return -1;
    /* a validation batch runs as upstream's model.eval(): no dropout */
    float p[4] = {m->p_token, m->p_attn, m->p_resid, m->p_ffn};
    if (!backward) m->p_token = m->p_attn = m->p_resid = m->p_ffn = 0.0f;
    int rc = run(m, b, out, backward, err);
    m->p_token = p[0], m->p_attn = p[1], m->p_resid = p[2], m->p_ffn = p[3];
    return rc;
}

static int run(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out, bool backward,
               kr_error *err) {
    int B = b->batch, T = b->len, R = B * T;
    tr_acts a;
    if (tr_acts_alloc(&a, m, B, T, err)) return -1;
    int32_t *in = malloc((size_t)R * 4 * sizeof(int32_t));
    kr_stamp *st = malloc((size_t)R * sizeof(kr_stamp));
    int rc = -1;
    if (!in || !st) {
        kr_fail_code(err, KR_E_NO_MEMORY, "training step: out of memory for the batch");
        goto out;
    }
    int32_t *in1 = in, *in2 = in + R, *t1 = in + 2 * R, *t2 = in + 3 * R;
    for (int w = 0; w < B; w++)
        for (int t = 0; t < T; t++) {
            size_t src = (size_t)w * (T + 1) + t, r = (size_t)w * T + t;
            in1[r] = b->s1[src], in2[r] = b->s2[src], st[r] = b->stamps[src];
            t1[r] = b->s1[src + 1], t2[r] = b->s2[src + 1];
        }
    a.in_s1 = in1, a.in_s2 = in2, a.stamps = st;
    a.key = tr_mix(b->seed, (uint64_t)m->steps);
    for (int i = 0; backward && i < m->n; i++)
        if (m->t[i].trains) memset(m->t[i].g, 0, m->t[i].n * sizeof(float));
    if (tr_forward_trunk(m, &a, err)) goto out;
    if (b->condition == KR_S2_TEACHER)
        memcpy(a.sib, t1, (size_t)R * sizeof(int32_t));
    else if (b->sibling)
        memcpy(a.sib, b->sibling, (size_t)R * sizeof(int32_t));
    else
        tr_draw_siblings(m, &a, b->seed);
    if (tr_forward_s2(m, &a, err)) goto out;
    tr_loss(m, &a, t1, t2, out);
    rc = backward ? tr_backward(m, &a, err) : 0;
out:
    free(in);
    free(st);
    tr_acts_free(&a, m);
    return rc;
}

int kr_train_gradients(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out,
                       kr_error *err) {
    return step(m, b, out, true, err);
}

int kr_train_loss(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out, kr_error *err) {
    return step(m, b, out, false, err);
}
