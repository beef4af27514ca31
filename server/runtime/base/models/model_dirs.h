/* model_dirs.h — loading a model from the directories a user names. */
#ifndef KD_MODEL_DIRS_H
#define KD_MODEL_DIRS_H

#include "kronos.h"

/* Either model_dir (holding tokenizer/ and predictor/) or both tokenizer_dir and
 * predictor_dir. NULL after a message in err. */
kr_model *kd_model_open(const char *model_dir, const char *tokenizer_dir, const char *predictor_dir,
                        int max_context, kr_precision weights, kr_precision kv, kr_error *err);

#endif
