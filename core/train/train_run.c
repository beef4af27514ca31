/* train_run.c — a fine-tuning run (kr_finetune), as upstream's train_predictor.py runs one:
 * windows drawn with a seed from the training part of every series, OneCycleLR over the
 * run, clipping and AdamW each step; the validation loss (teacher-forced, no dropout) on the
 * last part of every series, which is never trained on, before the first step and every
 * eval_every steps; the best checkpoint by it written out; early stopping. */
#include "train_ops.h"

#include "forecast_impl.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kr_finetune_defaults(kr_finetune_settings *s) {
    *s = (kr_finetune_settings){.lookback = 90,
                                .predict = 10,
                                .batch = 16,
                                .epochs = 1,
                                .lr = 1e-5,
                                .weight_decay = 0.1,
                                .beta1 = 0.9,
                                .beta2 = 0.95,
                                .clip = 3.0,
                                .pct_start = 0.03,
                                .div_factor = 10,
                                .final_div_factor = 1e4,
                                .validation_share = 0.2,
                                .max_validation_windows = 256,
                                .condition = KR_S2_TEACHER};
}

void kr_finetune_result_free(kr_finetune_result *r) {
    free(r->loss);
    free(r->validation);
    free(r->validation_step);
    memset(r, 0, sizeof *r);
}

typedef struct {
    const kr_model *tok;
    kr_train_model *m;
    const kr_candles *series;
    int n_series, W;
    const kr_finetune_settings *s;
    int *cut;                    /* [n_series] the first validation row of each */
    long train_total, val_total; /* windows */
    int32_t *s1, *s2;
    kr_stamp *st;
    int *starts, *which; /* [batch] */
} run_ctx;

/* pooled window i of the training (or validation) windows: its series and start */
static void window_at(const run_ctx *c, long i, bool val, int *series, int *start) {
    for (int k = 0; k < c->n_series; k++) {
        int n = c->series[k].n, lo = val ? c->cut[k] : 0, hi = val ? n - c->W : c->cut[k] - c->W;
        long count = hi >= lo ? hi - lo + 1 : 0;
        if (i < count) {
            *series = k, *start = lo + (int)i;
            return;
        }
        i -= count;
    }
}

#define BAD(...) kr_fail_code(err, KR_E_INVALID, __VA_ARGS__)

int kr_finetune_check(const kr_finetune_settings *s, const kr_predictor_config *pc, kr_error *err) {
    if (s->lookback < 1 || s->lookback > KR_FINETUNE_MAX_LEN)
        return BAD("lookback: must be in [1, %d], got %d", KR_FINETUNE_MAX_LEN, s->lookback);
    if (s->predict < 0 || s->predict > KR_FINETUNE_MAX_LEN)
        return BAD("predict: must be in [0, %d], got %d", KR_FINETUNE_MAX_LEN, s->predict);
    if (s->batch < 1 || s->batch > KR_FINETUNE_MAX_BATCH)
        return BAD("batch: must be in [1, %d], got %d", KR_FINETUNE_MAX_BATCH, s->batch);
    if (s->steps < 0 || s->steps > KR_FINETUNE_MAX_STEPS)
        return BAD("steps: must be in [0, %d] (0: epochs), got %d", KR_FINETUNE_MAX_STEPS,
                   s->steps);
    if (s->epochs < 0 || s->epochs > KR_FINETUNE_MAX_STEPS)
        return BAD("epochs: must be in [0, %d], got %d", KR_FINETUNE_MAX_STEPS, s->epochs);
    if (s->steps == 0 && s->epochs == 0)
        return BAD("steps: steps or epochs must be >= 1, both are 0");
    if (!(s->lr > 0 && isfinite(s->lr)))
        return BAD("lr: must be a finite number > 0, got %g", s->lr);
    if (!(s->validation_share >= 0 && s->validation_share <= 0.9))
        return BAD("validation_share: must be in [0, 0.9], got %g", s->validation_share);
    if (!(s->clip > 0)) return BAD("clip: must be > 0, got %g", s->clip);
    if (s->eval_every < 0) return BAD("eval_every: must be >= 0, got %d", s->eval_every);
    if (s->patience < 0) return BAD("patience: must be >= 0, got %d", s->patience);
    if (s->depth < 0 || (pc && s->depth > pc->n_layers))
        return BAD("depth: must be in [0, %d] (the predictor's n_layers; 0: every block), "
                   "got %d",
                   pc ? pc->n_layers : KR_FINETUNE_MAX_LEN, s->depth);
    return 0;
}

/* the split of every series and the count of windows on each side */
static int split(run_ctx *c, kr_error *err) {
    c->cut = malloc((size_t)c->n_series * sizeof(int));
    if (!c->cut) return kr_fail_code(err, KR_E_NO_MEMORY, "finetune: out of memory");
    for (int k = 0; k < c->n_series; k++) {
        int n = c->series[k].n;
        c->cut[k] = n - (int)floor(n * c->s->validation_share);
        if (c->cut[k] >= c->W) c->train_total += c->cut[k] - c->W + 1;
        if (n - c->cut[k] >= c->W) c->val_total += n - c->cut[k] - c->W + 1;
    }
    if (c->train_total == 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "series: no training window of lookback + predict + 1 = %d candles "
                            "fits before any series' validation part",
                            c->W);
    if (c->s->validation_share > 0 && c->val_total == 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "validation_share: %g leaves no series a validation part of %d "
                            "candles (lookback + predict + 1)",
                            c->s->validation_share, c->W);
    return 0;
}

/* tokens and stamps of the windows in c->which/c->starts, into the batch */
static int load_batch(run_ctx *c, int B, kr_train_batch *b, kr_error *err) {
    for (int i = 0; i < B; i++) {
        size_t o = (size_t)i * c->W;
        if (kr_train_windows(c->tok, &c->series[c->which[i]], &c->starts[i], 1, c->s->lookback,
                             c->s->predict, NULL, c->s1 + o, c->s2 + o, c->st + o, err))
            return -1;
    }
    *b = (kr_train_batch){B, c->W - 1, c->s1, c->s2, c->st, c->s->condition, NULL, c->s->seed};
    return 0;
}

/* the mean loss over up to max_validation_windows validation windows, evenly spaced */
static int validate(run_ctx *c, double *out, kr_error *err) {
    long n = c->val_total < c->s->max_validation_windows || c->s->max_validation_windows < 1
                 ? c->val_total
                 : c->s->max_validation_windows;
    double sum = 0;
    for (long i0 = 0; i0 < n; i0 += c->s->batch) {
        int B = (int)(n - i0 < c->s->batch ? n - i0 : c->s->batch);
        for (int i = 0; i < B; i++)
            window_at(c, (i0 + i) * c->val_total / n, true, &c->which[i], &c->starts[i]);
        kr_train_batch b;
        kr_train_losses l;
        if (load_batch(c, B, &b, err)) return -1;
        b.condition = KR_S2_TEACHER;
        if (kr_train_loss(c->m, &b, &l, err)) return -1;
        sum += l.loss * B;
    }
    *out = sum / n;
    return 0;
}

static int record_validation(kr_finetune_result *r, int step, double v, kr_error *err) {
    int *st = realloc(r->validation_step, (size_t)(r->n_validation + 1) * sizeof(int));
    if (st) r->validation_step = st;
    double *va = st ? realloc(r->validation, (size_t)(r->n_validation + 1) * sizeof(double)) : NULL;
    if (!va) return kr_fail_code(err, KR_E_NO_MEMORY, "finetune: out of memory");
    r->validation = va;
    r->validation_step[r->n_validation] = step, r->validation[r->n_validation++] = v;
    return 0;
}

static int train_step(run_ctx *c, int step, int steps, double *loss, kr_error *err) {
    const kr_finetune_settings *s = c->s;
    uint64_t key = tr_mix(s->seed, 0x7261696eULL);
    for (int i = 0; i < s->batch; i++) {
        long w = (long)(tr_mix(key, (uint64_t)step * s->batch + i) % (uint64_t)c->train_total);
        window_at(c, w, false, &c->which[i], &c->starts[i]);
    }
    kr_train_batch b;
    kr_train_losses l;
    kr_one_cycle oc = {s->lr, s->pct_start, s->div_factor, s->final_div_factor, steps};
    kr_adamw o = {kr_one_cycle_lr(&oc, step), s->beta1, s->beta2, 1e-8, s->weight_decay};
    double norm;
    if (load_batch(c, s->batch, &b, err) || kr_train_gradients(c->m, &b, &l, err)) return -1;
    kr_train_clip(c->m, s->clip, &norm);
    kr_train_adamw(c->m, &o);
    *loss = l.loss;
    return 0;
}

/* the steps, their reports, the validations and the best checkpoint */
static int loop(run_ctx *c, const char *best_dir, kr_finetune_report report, void *ctx,
                kr_finetune_result *r, kr_error *err) {
    const kr_finetune_settings *s = c->s;
    int steps =
        s->steps ? s->steps : (int)(s->epochs * ((c->train_total + s->batch - 1) / s->batch));
    int every = s->eval_every ? s->eval_every : (steps / 10 > 0 ? steps / 10 : 1), stale = 0;
    r->loss = malloc((size_t)steps * sizeof(double));
    if (!r->loss) return kr_fail_code(err, KR_E_NO_MEMORY, "finetune: out of memory");
    r->best_validation = INFINITY;
    double t0 = kr_now_ms();
    for (int step = 0; step <= steps; step++) {
        kr_finetune_progress p = {.step = step, .steps = steps, .validation = NAN};
        if (step > 0) {
            if (train_step(c, step - 1, steps, &r->loss[step - 1], err)) return -1;
            r->steps = step;
            p.loss = r->loss[step - 1];
        }
        p.seconds = (kr_now_ms() - t0) / 1000;
        p.tokens_per_s = step ? (double)step * s->batch * (c->W - 1) / p.seconds : 0;
        bool eval = c->val_total > 0 && (step % every == 0 || step == steps);
        if (eval) {
            if (validate(c, &p.validation, err) || record_validation(r, step, p.validation, err))
                return -1;
            p.evaluated = true;
            p.best = p.validation < r->best_validation;
            stale = p.best ? 0 : stale + 1;
        }
        if ((p.best || (c->val_total == 0 && step == steps)) && best_dir) {
            if (kr_train_save(c->m, best_dir, err)) return -1;
        }
        if (p.best) r->best_validation = p.validation, r->best_step = step;
        if (report && report(ctx, &p)) {
            r->cancelled = true;
            return kr_fail_code(err, KR_E_CANCELLED, "finetune: cancelled at step %d", step);
        }
        if (eval && s->patience && stale >= s->patience && step < steps) {
            r->stopped_early = true;
            break;
        }
    }
    if (c->val_total == 0) r->best_step = r->steps;
    return 0;
}

int kr_finetune_gate_check(int gate_samples, kr_error *err) {
    if (gate_samples < 0 || gate_samples > KR_FINETUNE_MAX_GATE_SAMPLES)
        return BAD("gate_samples: must be in [0, %d] (0: no gate), got %d",
                   KR_FINETUNE_MAX_GATE_SAMPLES, gate_samples);
    return 0;
}

void kr_finetune_this_thread_alone(bool on) {
    kr_parallel_alone(on);
}

void kr_finetune_this_thread_pauses(void (*pause)(void *ctx), void *ctx) {
    kr_parallel_pauses(pause, ctx);
}

int kr_finetune(const kr_model *tokenizer, kr_train_model *m, const kr_candles *series,
                int n_series, const kr_finetune_settings *s, const char *best_dir,
                kr_finetune_report report, void *ctx, kr_finetune_result *out, kr_error *err) {
    memset(out, 0, sizeof *out);
    if (kr_finetune_check(s, kr_train_config(m), err)) return -1;
    if (n_series < 1) return kr_fail_code(err, KR_E_INVALID, "series: at least one is needed");
    run_ctx c = {.tok = tokenizer,
                 .m = m,
                 .series = series,
                 .n_series = n_series,
                 .W = s->lookback + s->predict + 1,
                 .s = s};
    int rc = -1;
    for (int k = 0; k < n_series; k++)
        if (kr_check_columns(&series[k], err)) return -1;
    if (kr_train_set_depth(m, s->depth, err) || split(&c, err)) goto out;
    size_t n = (size_t)s->batch * c.W;
    c.s1 = malloc(n * sizeof(int32_t)), c.s2 = malloc(n * sizeof(int32_t));
    c.st = malloc(n * sizeof(kr_stamp));
    c.starts = malloc((size_t)s->batch * sizeof(int)),
    c.which = malloc((size_t)s->batch * sizeof(int));
    if (!c.s1 || !c.s2 || !c.st || !c.starts || !c.which) {
        kr_fail_code(err, KR_E_NO_MEMORY, "finetune: out of memory for a batch");
        goto out;
    }
    out->train_windows = c.train_total, out->validation_windows = c.val_total;
    rc = loop(&c, best_dir, report, ctx, out, err);
out:
    KR_FREE_ALL(c.cut, c.s1, c.s2, c.st, c.starts, c.which);
    return rc;
}
