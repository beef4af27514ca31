/* agreement.h — kronos-bench --agreement: how far a reduced-precision mode moves the
 * model's next-token distributions (agreement.c) and its /evaluate scores (agreement_eval.c)
 * from float32's. */
#ifndef KB_AGREEMENT_H
#define KB_AGREEMENT_H

#include "kronos.h"

#include <stdint.h>

/* A reduced mode: the model's weights, its KV cache and the layers kept float32 */
typedef struct {
    const char *name, *file; /* the tables' and the dumps' */
    kr_precision weights, kv;
    unsigned keep_f32; /* kr_model_paths.keep_f32 */
} kb_mode;
extern const kb_mode kb_modes[];
extern const int kb_n_modes;

/* The model in dir (tokenizer/, predictor/) in mode md (NULL: float32) */
kr_model *kb_mode_load(const char *dir, const kb_mode *md, kr_error *err);

/* The first L rows of the candles (wall[n], cols[KR_D_IN][n]), the model in model_dir
 * loaded as float32 and in each reduced mode: prints the agreement table. dump (or NULL):
 * a folder that receives each mode's logits as raw float32 files, for a test to recompute
 * the table from. Returns 0, or 1 after a message on stderr. */
int kb_agreement(const char *model_dir, const int64_t *wall, double *const cols[KR_D_IN], int n,
                 int L, const char *dump);

/* The /evaluate half: seeds 1 .. seeds, the first `origins` origins (0: all), samples paths;
 * modes: the modes evaluated, their dump names separated by commas (NULL: every mode) */
typedef struct {
    int seeds, origins, samples;
    const char *modes;
} kb_eval_opts;

/* Each mode's walk-forward scores (lookback 256, horizon 8, stride 8) against float32's,
 * beside float32's own change from one seed to the next: prints the table. dump (or NULL):
 * a folder that receives every score per mode and seed (eval_scores.tsv). Returns 0, or 1
 * after a message on stderr. */
int kb_agreement_eval(const char *model_dir, const int64_t *wall, double *const cols[KR_D_IN],
                      int n, const kb_eval_opts *o, const char *dump);

#endif
