/* kronos_train.h — fine-tuning the predictor (core/train/): a trainable copy of a
 * checkpoint's predictor tensors, upstream's training step over a batch of token windows
 * (forward, the loss (CE_s1 + CE_s2) / 2, backward of every part), global-norm gradient
 * clipping, AdamW with decoupled weight decay and OneCycleLR's cosine schedule. Every
 * reduction runs in a fixed order: the same gradients and weights, bit for bit, at any thread
 * count and SIMD level. */
#ifndef KRONOS_TRAIN_H
#define KRONOS_TRAIN_H

#include "kronos.h"

#include <stddef.h>
#include <stdint.h>

/* The predictor's tensors, under the checkpoint's names, in the file's order: the weights,
 * and for each trainable one its gradient and AdamW's two moments. */
typedef struct kr_train_model kr_train_model;

/* Reads DIR/config.json and DIR/model.safetensors (a predictor folder in the released
 * layout). Refuses a kv_shift predictor (its training is not implemented). */
kr_train_model *kr_train_load(const char *predictor_dir, kr_error *err);
void kr_train_free(kr_train_model *m);

const kr_predictor_config *kr_train_config(const kr_train_model *m);
int kr_train_tensor_count(const kr_train_model *m);
/* Index of the tensor of that checkpoint name, or -1. */
int kr_train_tensor_find(const kr_train_model *m, const char *name);
const char *kr_train_tensor_name(const kr_train_model *m, int i);
/* Tensor i's weights (numel floats, writable: a caller may set them), its shape. */
float *kr_train_tensor_weights(kr_train_model *m, int i, size_t *numel);
int kr_train_tensor_shape(const kr_train_model *m, int i, int64_t shape[2]);
/* Tensor i's gradient from the last kr_train_gradients, or NULL when it has none (a
 * buffer such as RoPE's inv_freq, a fixed temporal embedding, a tensor frozen by depth). */
const float *kr_train_tensor_gradient(const kr_train_model *m, int i);

/* Which parameters train: 0 all of them; N > 0 only the top N transformer blocks, the final
 * norm, the dependency-aware layer and both heads (the blocks below are not back-propagated
 * at all). Refused (KR_E_INVALID) above n_layers. */
int kr_train_set_depth(kr_train_model *m, int depth, kr_error *err);

typedef enum {
    KR_S2_TEACHER, /* the s2 head is conditioned on the target s1 ids */
    KR_S2_SAMPLED  /* on s1 ids drawn from the s1 logits (upstream's train_predictor.py) */
} kr_s2_condition;

/* B windows of T + 1 tokens each, row-major [B][T + 1]: the model is fed tokens 0..T-1 of
 * each window, the targets are tokens 1..T. */
typedef struct {
    int batch, len; /* B, T */
    const int32_t *s1, *s2;
    const kr_stamp *stamps;
    kr_s2_condition condition;
    /* KR_S2_SAMPLED: [B][T] s1 ids to condition on, or NULL to draw them from the s1
     * logits with `seed` */
    const int32_t *sibling;
    uint64_t seed; /* the drawn ids and the dropout masks (with the step's number) */
} kr_train_batch;

typedef struct {
    double loss, ce_s1, ce_s2;
} kr_train_losses;

/* Forward, loss and backward at the current weights: every trainable tensor's gradient
 * is set (not accumulated). Dropout as config.json gives it, its masks drawn from seed and
 * the model's step count. */
int kr_train_gradients(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out,
                       kr_error *err);

/* torch.nn.utils.clip_grad_norm_: the global L2 norm of every gradient (returned in
 * *norm), then each gradient scaled by max_norm / (norm + 1e-6) when that is below 1. */
void kr_train_clip(kr_train_model *m, double max_norm, double *norm);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
} kr_adamw;

/* One AdamW step (torch.optim.AdamW) on every tensor that has a gradient. */
void kr_train_adamw(kr_train_model *m, const kr_adamw *o);
/* Steps taken so far (AdamW's bias corrections count them). */
int kr_train_steps(const kr_train_model *m);

typedef struct {
    double max_lr, pct_start, div_factor, final_div_factor;
    int total_steps;
} kr_one_cycle;

/* torch.optim.lr_scheduler.OneCycleLR (cosine, two phases): the learning rate before step
 * `step` (0-based). */
double kr_one_cycle_lr(const kr_one_cycle *s, int step);

/* ---- the data (train_data.c), as upstream's finetune/dataset.py makes it ---- */

/* A series of candles: wall-clock seconds (kr_stamp_from_wall) and the KR_D_IN columns. */
typedef struct {
    int n;
    const int64_t *wall;
    const double *const *cols;
} kr_train_series;

/* B windows of lookback + predict + 1 candles, window b from row starts[b]: each normalised
 * by the mean and (population) std of its first lookback rows, std + 1e-5, clipped to ±5, in
 * float32 as numpy computes it (xn[B][W][6], NULL to skip), tokenized by m's frozen tokenizer
 * (s1, s2 [B][W]) and stamped (stamps [B][W]). A window past the series' end is refused
 * (KR_E_INVALID naming it). */
int kr_train_windows(const kr_model *m, const kr_train_series *s, const int *starts, int B,
                     int lookback, int predict, float *xn, int32_t *s1, int32_t *s2,
                     kr_stamp *stamps, kr_error *err);

#endif
