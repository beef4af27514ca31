/* model_field.h — a model route's "model" field, taken out of a JSON body before the
 * route's own parser reads it (request.c's kd_request_json). */
#ifndef KD_MODEL_FIELD_H
#define KD_MODEL_FIELD_H

#include <jansson.h>
#include <stddef.h>

#include "http.h"
#include "models.h"

/* What a request says of its model, and the model it runs on (http.h's kd_request_*model*
 * accessors read and set it). */
typedef struct {
    char name[KD_MODEL_ID_MAX + 2]; /* its "model" field ("": none given) */
    char hash[72];                  /* the hash that field gave ("": none) */
    const kd_model *model;          /* the model it runs on (its answer names it) */
} kd_model_choice;

/* The body's "model" (an id, or an answer's {"id", "hash"}), removed from it: its id in name
 * ("" when there is none) and its hash in hash ("" when not given); -1 with msg when it is
 * neither. */
int kd_model_field_take(json_t *body, char *name, size_t name_len, char *hash, size_t hash_len,
                        char *msg, size_t msglen);

#endif
