/* model_field.h — a model route's "model" field, taken out of a JSON body before the
 * route's own parser reads it (http.c's kd_request_json). */
#ifndef KD_MODEL_FIELD_H
#define KD_MODEL_FIELD_H

#include <jansson.h>
#include <stddef.h>

/* The body's "model" (an id, or an answer's {"id", "hash"}), removed from it: its id in name
 * ("" when there is none) and its hash in hash ("" when not given); -1 with msg when it is
 * neither. */
int kd_model_field_take(json_t *body, char *name, size_t name_len, char *hash, size_t hash_len,
                        char *msg, size_t msglen);

#endif
