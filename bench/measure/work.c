/* work.c — FLOPs and bytes of Kronos's phases (work.h). */
#include "work.h"

kb_flops kb_flops_plus(kb_flops a, kb_flops b) {
    return (kb_flops){a.all + b.all, a.attn + b.attn};
}

kb_flops kb_flops_times(double k, kb_flops a) {
    return (kb_flops){k * a.all, k * a.attn};
}

/* The predictor's weights by part: the trunk (every layer's attention and feed-forward, and
 * the fusion of the code embeddings), the dependency layer's k, v and o (its query
 * projection's output for each s1 token is a table computed at load: a step looks it up),
 * and the s1 and s2 heads. */
static double trunk_weights(const kr_predictor_config *c) {
    double d = c->d_model, ff = c->ff_dim;
    return c->n_layers * (4 * d * d + 3 * d * ff) + 2 * d * d;
}
static double dependency_weights(const kr_predictor_config *c) {
    return 3.0 * c->d_model * c->d_model;
}
static double head_weights(const kr_predictor_config *c) {
    return (double)c->d_model * ((1 << c->s1_bits) + (1 << c->s2_bits));
}

/* FLOPs of the predictor for one token whose attention sees `keys` positions: every weight
 * of the trunk once (2 flops a weight), attention over the keys, and, when `heads`, the
 * dependency layer and the heads (computed once a step, at the last row). */
static kb_flops token_flops(const kr_predictor_config *c, int keys, bool heads) {
    double d = c->d_model;
    double head = dependency_weights(c) + head_weights(c);
    double attn = c->n_layers * 4.0 * keys * d + (heads ? 4.0 * keys * d : 0);
    return (kb_flops){2 * (trunk_weights(c) + (heads ? head : 0)) + attn, attn};
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

/* The tokenizer decoder's weights: its blocks and its two linear layers. */
static double detok_weights(const kr_tokenizer_config *c) {
    double d = c->d_model, ff = c->ff_dim, blocks = c->n_dec_layers - 1;
    return blocks * (4 * d * d + 3 * d * ff) + (c->s1_bits + c->s2_bits) * d + d * c->d_in;
}

kb_flops kb_detok_flops(const kr_tokenizer_config *c, int n) {
    double attn = (c->n_dec_layers - 1) * 4.0 * c->d_model * (double)n * (n + 1) / 2;
    return (kb_flops){n * 2 * detok_weights(c) + attn, attn};
}

double kb_detok_weight_bytes(const kr_tokenizer_config *c) {
    return 4 * detok_weights(c);
}
double kb_detok_kv_bytes(const kr_tokenizer_config *c, int n) {
    return 4.0 * (c->n_dec_layers - 1) * 2.0 * n * c->d_model;
}

double kb_weight_bytes(const kr_predictor_config *c, kr_precision w) {
    double inner = trunk_weights(c) + dependency_weights(c), edges = head_weights(c);
    if (w == KR_PREC_BF16) return 2 * (inner + edges);
    if (w == KR_PREC_INT8) return inner * (1 + 4.0 / 32) + 4 * edges;
    return 4 * (inner + edges);
}

double kb_kv_bytes(const kr_predictor_config *c, int keys) {
    return 4.0 * (c->n_layers + 1) * 2.0 * keys * c->d_model;
}
