/* kronos_train.h — fine-tuning the predictor (core/train/): a trainable copy of a
 * checkpoint's predictor tensors, upstream's training step over a batch of token windows
 * (forward, the loss (CE_s1 + CE_s2) / 2, backward of every part), global-norm gradient
 * clipping, AdamW with decoupled weight decay and OneCycleLR's cosine schedule. Every
 * reduction runs in a fixed order: the same gradients and weights, bit for bit, at any thread
 * count and SIMD level. */
#ifndef KRONOS_TRAIN_H
#define KRONOS_TRAIN_H

#include "kronos.h"

#include <stdbool.h>
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

/* The losses alone (no gradient changes): a validation batch. */
int kr_train_loss(kr_train_model *m, const kr_train_batch *b, kr_train_losses *out, kr_error *err);

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

/* Writes the predictor in the released layout: DIR/config.json as it was loaded and
 * DIR/model.safetensors with every tensor it was loaded with (float ones as float32, integer
 * buffers unchanged), DIR created if missing. */
int kr_train_save(const kr_train_model *m, const char *dir, kr_error *err);

/* ---- the data (train_data.c), as upstream's finetune/dataset.py makes it ---- */

/* B windows of lookback + predict + 1 candles of c (kronos.h's candles: volume and amount
 * filled in as a forecast fills them), window b from row starts[b]: each normalised
 * by the mean and (population) std of its first lookback rows, std + 1e-5, clipped to ±5, in
 * float32 as numpy computes it (xn[B][W][6], NULL to skip), tokenized by m's frozen tokenizer
 * (s1, s2 [B][W]) and stamped (stamps [B][W]). A window past the series' end is refused
 * (KR_E_INVALID naming it). */
int kr_train_windows(const kr_model *m, const kr_candles *s, const int *starts, int B, int lookback,
                     int predict, float *xn, int32_t *s1, int32_t *s2, kr_stamp *stamps,
                     kr_error *err);

/* ---- a fine-tuning run (train_run.c) ---- */

typedef struct {
    int lookback, predict, batch;
    int steps;  /* optimiser steps; 0: epochs passes over the training windows */
    int epochs; /* used when steps is 0 */
    int depth;  /* kr_train_set_depth's: 0 trains everything */
    double lr;  /* OneCycleLR's max_lr */
    double weight_decay, beta1, beta2, clip, pct_start, div_factor, final_div_factor;
    /* the last share of every series is for validation alone (0: no validation) */
    double validation_share;
    int max_validation_windows; /* evenly spaced; 0: all */
    int eval_every;             /* steps between validation losses; 0: a tenth of the run */
    int patience;               /* validations without a better loss before stopping; 0: never */
    kr_s2_condition condition;
    uint64_t seed;
} kr_finetune_settings;

#define KR_FINETUNE_MAX_LEN   65536 /* lookback, predict */
#define KR_FINETUNE_MAX_BATCH 4096
#define KR_FINETUNE_MAX_STEPS 10000000 /* steps, epochs */

/* Every rule the settings must meet (KR_E_INVALID naming the field: "batch: must be in
 * [1, 4096], got 0"); with pc, the depth against its n_layers. kr_finetune checks them too:
 * a caller checks first to refuse a request before it queues it. */
int kr_finetune_check(const kr_finetune_settings *s, const kr_predictor_config *pc, kr_error *err);

/* The gate's paths per origin (its walk-forward evaluation's samples): 0 (no gate) to
 * KR_FINETUNE_MAX_GATE_SAMPLES, else KR_E_INVALID naming gate_samples. */
#define KR_FINETUNE_MAX_GATE_SAMPLES 1024
int kr_finetune_gate_check(int gate_samples, kr_error *err);

/* on: the loops of the calling thread's kr_finetune (and anything else it runs) stay on that
 * thread instead of the shared thread pool, so that a thread running at a low priority keeps
 * all of its work there. The same bits either way. */
void kr_finetune_this_thread_alone(bool on);
/* pause(ctx) between the work items of the calling thread's loops kept alone (a few hundred
 * microseconds of training each), so that it can wait while serving has work: a thread at
 * the lowest priority still holds a core until the kernel moves the waiting threads over.
 * NULL: none. Where it waits changes no result. */
void kr_finetune_this_thread_pauses(void (*pause)(void *ctx), void *ctx);

/* upstream's finetune/config.py (lookback 90, predict 10, AdamW betas 0.9/0.95, weight decay
 * 0.1, clip 3.0, OneCycle pct_start 0.03, div_factor 10), the learning rate at the safer
 * 1e-5, batch 16, one epoch, validation on the last 20% */
void kr_finetune_defaults(kr_finetune_settings *s);

typedef struct {
    int step, steps;      /* steps done (0: before the first), steps in all */
    double loss;          /* the step's training loss */
    double validation;    /* NAN when not evaluated at this step */
    bool evaluated, best; /* best: the checkpoint was written */
    double seconds, tokens_per_s;
} kr_finetune_progress;

/* Called before the first step and after each; nonzero cancels the run (KR_E_CANCELLED). */
typedef int (*kr_finetune_report)(void *ctx, const kr_finetune_progress *p);

typedef struct {
    int steps;    /* run */
    double *loss; /* [steps] the training loss of each */
    int n_validation;
    int *validation_step; /* [n_validation] the step each was taken after (0: before any) */
    double *validation;   /* [n_validation] */
    int best_step;        /* the checkpoint written: the best validation's step */
    double best_validation;
    long train_windows, validation_windows;
    bool stopped_early, cancelled;
} kr_finetune_result;
void kr_finetune_result_free(kr_finetune_result *r);

/* Fine-tunes m on the series (the tokenizer of `tokenizer` frozen), writing the best
 * checkpoint by validation loss to best_dir (kr_train_save; without validation, the last). */
int kr_finetune(const kr_model *tokenizer, kr_train_model *m, const kr_candles *series,
                int n_series, const kr_finetune_settings *s, const char *best_dir,
                kr_finetune_report report, void *ctx, kr_finetune_result *out, kr_error *err);

#endif
