/* model_options.h — a model's own settings (max-context, weights, kv): the daemon-wide
 * values, then the model-option lines "ID:KEY=VALUE" that name it, then (for a model loaded
 * while serving) the fields its load gave. */
#ifndef KD_MODEL_OPTIONS_H
#define KD_MODEL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "kronos.h"

#define KD_MODEL_OPTION_KEYS "max-context, weights or kv"

typedef struct {
    int max_context;
    kr_precision weights, kv;
} kd_model_settings;

/* Settings a load names; a field not given keeps the model's configured value. */
typedef struct {
    bool has_max_context, has_weights, has_kv;
    kd_model_settings v;
} kd_model_overrides;

/* Every line of lines ("ID:KEY=VALUE", one a line; NULL: none) well formed: an id, a key
 * of KD_MODEL_OPTION_KEYS, a value that key takes. -1 with err naming the line. */
int kd_model_options_check(const char *lines, char *err, size_t errlen);
/* The settings of model id: s holds the daemon-wide values, then the lines naming id apply
 * in order (a later line wins), then o's fields (o may be NULL). */
int kd_model_settings_of(const char *lines, const char *id, const kd_model_overrides *o,
                         kd_model_settings *s, char *err, size_t errlen);
/* The first of lines whose id known(ctx, id) does not know, copied into line (n bytes);
 * false when every line names a known model. */
bool kd_model_options_unknown(const char *lines, bool (*known)(const void *ctx, const char *id),
                              const void *ctx, char *line, size_t n);

#endif
