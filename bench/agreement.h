/* agreement.h — kronos-bench --agreement: how far a reduced-precision mode moves the
 * model's next-token distributions from float32's (agreement.c). */
#ifndef KB_AGREEMENT_H
#define KB_AGREEMENT_H

#include "kronos.h"

#include <stdint.h>

/* The first L rows of the candles (wall[n], cols[KR_D_IN][n]), the model in model_dir
 * loaded as float32 and in each reduced mode: prints the agreement table. dump (or NULL):
 * a folder that receives each mode's logits as raw float32 files, for a test to recompute
 * the table from. Returns 0, or 1 after a message on stderr. */
int kb_agreement(const char *model_dir, const int64_t *wall, double *const cols[KR_D_IN], int n,
                 int L, const char *dump);

#endif
