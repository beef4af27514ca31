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

#endif
