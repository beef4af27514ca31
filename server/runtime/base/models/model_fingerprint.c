/* model_fingerprint.c — kd_model_fingerprint (model_fingerprint.h). */
#include "model_fingerprint.h"

#include "hash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FINGER_CANDLES 16
/* the seed every journal's fingerprint was made with: a new one would refuse them all */
#define FINGERPRINT_SEED 1469598103934665603ULL

int kd_model_fingerprint(const kr_model *m, const char *name, uint64_t *fp, char *desc,
                         size_t desclen, kr_error *err) {
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
    const kr_predictor_config *pc = kr_model_predictor_config(m);
    const int shape[] = {tc->d_in,
                         tc->d_model,
                         tc->n_heads,
                         tc->ff_dim,
                         tc->n_enc_layers,
                         tc->n_dec_layers,
                         tc->s1_bits,
                         tc->s2_bits,
                         pc->d_model,
                         pc->n_layers,
                         pc->n_heads,
                         pc->ff_dim,
                         pc->s1_bits,
                         pc->s2_bits,
                         pc->learn_te,
                         pc->kv_shift,
                         kr_model_max_context(m)};
    uint64_t h = kd_hash(FINGERPRINT_SEED, shape, sizeof shape);
    /* what the weights compute on a fixed input: any changed weight shows */
    enum { N = FINGER_CANDLES };
    float x[N * KR_D_IN];
    int32_t s1[N], s2[N];
    kr_stamp stamps[N];
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < KR_D_IN; c++)
            x[i * KR_D_IN + c] = (float)(2.0 * sin(0.7 * i + c));
        stamps[i] = kr_stamp_from_wall(1700000000LL + 300LL * i);
    }
    const size_t n1 = (size_t)1 << pc->s1_bits, n2 = (size_t)1 << pc->s2_bits;
    float *logits = malloc(n1 * sizeof *logits), *l2 = malloc(n2 * sizeof *l2);
    float *context = malloc((size_t)N * (size_t)pc->d_model * sizeof *context);
    float *back = malloc(sizeof x);
    int rc = -1;
    if (!logits || !l2 || !context || !back)
        kr_fail_code(err, KR_E_NO_MEMORY, "fingerprint: out of memory");
    else
        rc = kr_tokenizer_encode(m, x, N, s1, s2, err) ||
             kr_tokenizer_decode(m, s1, s2, N, back, err) ||
             kr_predictor_window(m, s1, s2, stamps, N, logits, context, err) ||
             kr_predictor_s2_logits(m, context, N, s1[N - 1], l2, err);
    if (rc == 0) {
        h = kd_hash(h, s1, sizeof s1);
        h = kd_hash(h, s2, sizeof s2);
        h = kd_hash(h, back, sizeof x);
        h = kd_hash(h, logits, n1 * sizeof *logits);
        h = kd_hash(h, l2, n2 * sizeof *l2);
    }
    free(logits);
    free(l2);
    free(context);
    free(back);
    if (rc) return -1;
    *fp = h;
    snprintf(desc, desclen, "%s: predictor d_model %d, %d layers, max_context %d", name,
             pc->d_model, pc->n_layers, kr_model_max_context(m));
    return 0;
}
