/* work.h — what a phase of Kronos computes and reads, for the bench's tables: its FLOPs
 * (attention's apart) and the bytes of its weights and of its KV cache. */
#ifndef KB_WORK_H
#define KB_WORK_H

#include "kronos.h"

/* A phase's FLOPs, and those of them that attention computes (its ceiling counts their
 * bytes apart from the products'). */
typedef struct {
    double all, attn;
} kb_flops;

/* Sums and multiples of FLOP counts. */
kb_flops kb_flops_plus(kb_flops a, kb_flops b);
kb_flops kb_flops_times(double k, kb_flops a);

/* FLOPs of one decode step for one path at `keys` cached positions. */
kb_flops kb_step_flops(const kr_predictor_config *c, int keys);

/* FLOPs of appending positions [p0, p0 + n) to a cache, the heads run once at the end. */
kb_flops kb_append_flops(const kr_predictor_config *c, int p0, int n);

/* FLOPs of the tokenizer's decoder over n tokens (its blocks and its two linear layers). */
kb_flops kb_detok_flops(const kr_tokenizer_config *c, int n);

/* Bytes of the tokenizer decoder's float32 weights (kb_detok_flops' matrices) and of the keys
 * and values its blocks' attention reads over n tokens. */
double kb_detok_weight_bytes(const kr_tokenizer_config *c);
double kb_detok_kv_bytes(const kr_tokenizer_config *c, int n);

/* Bytes of the weights a decode step streams in weights mode w: the trunk, the fusion, the
 * s1 head, the dependency layer's k, v and o, the s2 head (not dep_q: a step looks its output
 * up). BF16 is two bytes a weight; int8 a byte and a float scale a block of 32 for the trunk,
 * the fusion and the dependency layer, its heads float32 as the loader packs them. */
double kb_weight_bytes(const kr_predictor_config *c, kr_precision w);

/* Bytes of KV cache a decode step at `keys` cached positions reads: the keys and values of
 * every position in every layer and in the dependency layer. */
double kb_kv_bytes(const kr_predictor_config *c, int keys);

#endif
