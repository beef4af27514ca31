/* work.c — FLOPs and bytes of Kronos's phases (work.h). */
#include "work.h"

kb_flops kb_flops_plus(kb_flops a, kb_flops b) {
    return (kb_flops){a.all + b.all, a.attn + b.attn};
}

kb_flops kb_flops_times(double k, kb_flops a) {
    return (kb_flops){k * a.all, k * a.attn};
}

/* FLOPs of the predictor for one token whose attention sees `keys` positions: every weight
 * matrix of the trunk once (2 flops a weight), attention over the keys, and, when `heads`,
 * the s1 head, the dependency layer and the s2 head (computed once a step, at the last row).
 * The dependency layer's query projection is not counted: its output for each s1 token is a
 * table computed at load, a step looks it up. */
static kb_flops token_flops(const kr_predictor_config *c, int keys, bool heads) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double trunk = c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d /* fusion */;
    double head = d * v1 + 3 * d * d /* dependency layer: k, v, o */ + d * v2;
    double attn = c->n_layers * 4.0 * keys * d + (heads ? 4.0 * keys * d : 0);
    return (kb_flops){2 * (trunk + (heads ? head : 0)) + attn, attn};
}

kb_flops kb_step_flops(const kr_predictor_config *c, int keys) {
    return token_flops(c, keys, true);
}

kb_flops kb_append_flops(const kr_predictor_config *c, int p0, int n) {
    kb_flops f = {0, 0};
    for (int p = p0; p < p0 + n; p++)
        f = kb_flops_plus(f, token_flops(c, p + 1, false));
    kb_flops last = token_flops(c, p0 + n, true), bare = token_flops(c, p0 + n, false);
    return kb_flops_plus(f, (kb_flops){last.all - bare.all, last.attn - bare.attn});
}

kb_flops kb_detok_flops(const kr_tokenizer_config *c, int n) {
    double d = c->d_model, ff = c->ff_dim, blocks = c->n_dec_layers - 1;
    double per =
        2 * (blocks * (4 * d * d + 3 * d * ff) + (c->s1_bits + c->s2_bits) * d + d * c->d_in);
    double attn = blocks * 4.0 * d * (double)n * (n + 1) / 2;
    return (kb_flops){n * per + attn, attn};
}

double kb_detok_weight_bytes(const kr_tokenizer_config *c) {
    double d = c->d_model, ff = c->ff_dim, blocks = c->n_dec_layers - 1;
    return 4 * (blocks * (4 * d * d + 3 * d * ff) + (c->s1_bits + c->s2_bits) * d + d * c->d_in);
}
double kb_detok_kv_bytes(const kr_tokenizer_config *c, int n) {
    return 4.0 * (c->n_dec_layers - 1) * 2.0 * n * c->d_model;
}

double kb_weight_bytes(const kr_predictor_config *c, kr_precision w) {
    double d = c->d_model, ff = c->ff_dim, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    double inner = c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d + 3 * d * d;
    double edges = d * v1 + d * v2;
    if (w == KR_PREC_BF16) return 2 * (inner + edges);
    if (w == KR_PREC_INT8) return inner * (1 + 4.0 / 32) + 4 * edges;
    return 4 * (inner + edges);
}

double kb_kv_bytes(const kr_predictor_config *c, int keys) {
    return 4.0 * (c->n_layers + 1) * 2.0 * keys * c->d_model;
}
