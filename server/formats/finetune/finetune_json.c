/* finetune_json.c — POST /finetune's settings (finetune_json.h): each field's JSON type, the
 * values handed to the core as they are. */
#include "finetune_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"id",
                                    "steps",
                                    "epochs",
                                    "batch",
                                    "lookback",
                                    "predict",
                                    "lr",
                                    "depth",
                                    "s2_condition",
                                    "seed",
                                    "validation_share",
                                    "eval_every",
                                    "patience",
                                    "gate_samples",
                                    NULL};

const char *const *kd_finetune_option_names(void) {
    return names;
}

/* an integer field (a JSON integer, or a whole real within int's range) */
static int int_of(const char *key, const json_t *v, int *out, char *msg, size_t n) {
    double x = json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
    if (!json_is_number(v) || x != floor(x) || x < -2147483648.0 || x > 2147483647.0)
        return snprintf(msg, n, "%s: expected an integer", key), -1;
    *out = (int)x;
    return 0;
}

int kd_finetune_settings_parse(const json_t *obj, kr_finetune_settings *s, int *gate_samples,
                               const char **id, char *msg, size_t msglen) {
    kr_finetune_defaults(s);
    *gate_samples = 8;
    *id = NULL;
    bool steps_given = false, epochs_given = false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (!strcmp(key, "candles") || !strcmp(key, "series")) continue;
        if (!strcmp(key, "id") || !strcmp(key, "s2_condition")) {
            if (!json_is_string(v)) return snprintf(msg, msglen, "%s: expected a string", key), -1;
            const char *t = json_string_value(v);
            if (key[0] == 'i') {
                *id = t;
            } else if (!strcmp(t, "teacher") || !strcmp(t, "sampled")) {
                s->condition = t[0] == 's' ? KR_S2_SAMPLED : KR_S2_TEACHER;
            } else {
                return snprintf(msg, msglen,
                                "s2_condition: expected \"teacher\" or \"sampled\", got \"%.32s\"",
                                t),
                       -1;
            }
        } else if (!strcmp(key, "lr") || !strcmp(key, "validation_share")) {
            if (!json_is_number(v)) return snprintf(msg, msglen, "%s: expected a number", key), -1;
            *(key[0] == 'l' ? &s->lr : &s->validation_share) = json_number_value(v);
        } else if (!strcmp(key, "seed")) {
            double x = json_number_value(v);
            if (!json_is_number(v) || x != floor(x) || x < 0 || x > 9007199254740992.0)
                return snprintf(msg, msglen, "seed: expected an integer in [0, 2^53]"), -1;
            s->seed = (uint64_t)x;
        } else {
            static const char *const ints[] = {"steps",      "epochs",   "batch",
                                               "lookback",   "predict",  "depth",
                                               "eval_every", "patience", "gate_samples"};
            int *dst[] = {&s->steps, &s->epochs,     &s->batch,    &s->lookback, &s->predict,
                          &s->depth, &s->eval_every, &s->patience, gate_samples};
            size_t k = 0;
            while (k < sizeof ints / sizeof *ints && strcmp(key, ints[k]))
                k++;
            if (k == sizeof ints / sizeof *ints)
                return snprintf(msg, msglen,
                                "%.64s: unknown field (see GET /openapi.json: FinetuneRequest)",
                                key),
                       -1;
            if (int_of(key, v, dst[k], msg, msglen)) return -1;
            steps_given |= k == 0, epochs_given |= k == 1;
        }
    }
    if (steps_given && !epochs_given) s->epochs = 0; /* as the CLI: steps replace the epoch */
    return 0;
}
