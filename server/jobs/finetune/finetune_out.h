/* finetune_out.h — what a fine-tuning run writes, the same from kronosd finetune and from
 * POST /finetune: DIR/tokenizer/ (the base's files), the report of finetune.json (the
 * settings, the losses, the best step) and the gate (base and tuned model evaluated
 * walk-forward on each series' validation part, side by side). */
#ifndef KD_FINETUNE_OUT_H
#define KD_FINETUNE_OUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kronos.h"
#include "kronos_train.h"

/* One run's inputs as the report names them. */
typedef struct {
    const char *base;         /* the base model: its folder (CLI) or its id (daemon) */
    const char *names_key;    /* "csv" (file names) or "series" */
    const char *const *names; /* [n] each series' name */
    const kr_candles *series; /* [n] */
    int n;
    const kr_finetune_settings *s;
    int gate_samples; /* 0: no gate */
} kd_ft_run;

/* out/ and out/tokenizer/ made (out's parent must exist), the base tokenizer's config.json and
 * model.safetensors copied in from base_tokenizer_dir; pred (n bytes) set to out/predictor.
 * -1 with a message. */
int kd_ft_prepare_out(const char *base_tokenizer_dir, const char *out, char *pred, size_t n,
                      char *err, size_t errlen);

/* finetune.json's body without the gate: {"settings", "loss", "validation", "best_step",
 * "best_validation", "train_windows", "validation_windows", "stopped_early"}; NULL when out
 * of memory. */
json_t *kd_ft_report(const kd_ft_run *run, const kr_finetune_result *r);

/* The gate on every series with a validation part, set as rep's "gate": {"series": [...],
 * "tuned_better_crps", "tuned_better_direction"}; -1 with a message. */
int kd_ft_gate(const kd_ft_run *run, const kr_model *base, const kr_model *tuned, json_t *rep,
               char *err, size_t errlen);

/* Where a run reads its base and writes its result, and who hears of its steps. */
typedef struct {
    const char *tokenizer_dir, *predictor_dir; /* the base model's */
    const char *out;                           /* made by the run as kd_ft_prepare_out makes it */
    json_t *members;          /* set in finetune.json after the report, before the gate */
    kr_finetune_report heard; /* each step's numbers; nonzero stops the run (NULL: none) */
    void *ctx;
} kd_ft_place;

/* One run: the base loaded, fine-tuned into p->out, the report, the gate when run asks for
 * one (gate_samples and the settings' predict), and out/finetune.json written. *r and *rep
 * (the report as written) are the caller's to free, on failure too. 0; -1 with a message;
 * -2 when p->heard stopped the run. */
int kd_ft_train(const kd_ft_run *run, const kd_ft_place *p, kr_finetune_result *r, json_t **rep,
                char *err, size_t errlen);

#endif
