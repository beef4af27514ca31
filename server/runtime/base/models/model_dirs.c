/* model_dirs.c — model directory layout to core paths. */
#include "model_dirs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *join_path(const char *dir, const char *name) {
    const size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

kr_model *kd_model_open(const char *model_dir, const char *tokenizer_dir, const char *predictor_dir,
                        int max_context, kr_precision weights, kr_precision kv, kr_error *err) {
    char *tok = model_dir ? join_path(model_dir, "tokenizer") : NULL;
    char *pred = model_dir ? join_path(model_dir, "predictor") : NULL;
    kr_model *m = NULL;
    if (model_dir && (!tok || !pred)) {
        kr_fail(err, "out of memory");
    } else {
        const kr_model_paths paths = {.tokenizer_dir = model_dir ? tok : tokenizer_dir,
                                      .predictor_dir = model_dir ? pred : predictor_dir,
                                      .max_context = max_context,
                                      .weights = weights,
                                      .kv = kv};
        m = kr_model_load(&paths, err);
    }
    free(tok);
    free(pred);
    return m;
}
