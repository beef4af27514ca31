/* model_fingerprint.h — a model's fingerprint: what identifies the weights a session
 * journal was written with, so that a journal is never replayed on another model. */
#ifndef KD_MODEL_FINGERPRINT_H
#define KD_MODEL_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

/* The model's fingerprint: its shapes, max_context and what its weights compute on a fixed
 * input (a few candles encoded, a window's logits). desc gets a line naming it. -1 with err. */
int kd_model_fingerprint(const kr_model *m, const char *name, uint64_t *fp, char *desc,
                         size_t desclen, kr_error *err);

#endif
