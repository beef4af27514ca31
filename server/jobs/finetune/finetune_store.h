/* finetune_store.h — the checkpoints of earlier fine-tuning runs under the jobs' folder
 * (finetune_store.c), below the jobs that write them (finetune_jobs.c). */
#ifndef KD_FINETUNE_STORE_H
#define KD_FINETUNE_STORE_H

#include <jansson.h>

#include "app.h"

/* The job kd_ft_restore found: a finished run's answer from its folder's finetune.json. */
typedef void (*kd_ft_found)(void *ctx, const char *job_id, const char *model_id, json_t *report);
/* Every folder under root holding tokenizer/, predictor/ and finetune.json (in name order)
 * registered as a model of the folder's name (a failure is logged and skipped), and found()
 * called with its report (a reference the callee takes). Leftovers of unfinished runs
 * (".*.partial") are removed. */
void kd_ft_restore(kd_app *app, const char *root, kd_ft_found found, void *ctx);
/* Removes dir and everything under it (quietly, as far as it can). */
void kd_ft_remove_tree(const char *dir);

#endif
