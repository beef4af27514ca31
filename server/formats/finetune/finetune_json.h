/* finetune_json.h — a fine-tuning request's settings (POST /finetune) from JSON into
 * core/train's kr_finetune_settings. Only the mapping: the rules are kr_finetune_check's. */
#ifndef KD_FINETUNE_JSON_H
#define KD_FINETUNE_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "kronos_train.h"

/* The settings' field names (NULL-terminated): the query parameters a text/csv body takes. */
const char *const *kd_finetune_option_names(void);

/* obj's settings over kr_finetune_defaults (gate_samples 8, *id NULL: none given); the keys
 * "candles" and "series" are the caller's. -1 with a message naming the field when a field
 * is unknown or of the wrong type. */
int kd_finetune_settings_parse(const json_t *obj, kr_finetune_settings *s, int *gate_samples,
                               const char **id, char *msg, size_t msglen);

#endif
