/* model_field.h — a model route's "model" field, taken out of a JSON body before the
 * route's own parser reads it (request.c's kd_request_json), and the request's model as the
 * handlers read and set it (http.h includes this). */
#ifndef KD_MODEL_FIELD_H
#define KD_MODEL_FIELD_H

#include <jansson.h>
#include <stddef.h>

#include "models.h"

/* The body's "model" (an id, or an answer's {"id", "hash"}), removed from it: its id in name
 * ("" when there is none) and its hash in hash ("" when not given); -1 with msg when it is
 * neither. */
int kd_model_field_take(json_t *body, char *name, size_t name_len, char *hash, size_t hash_len,
                        char *msg, size_t msglen);

typedef struct kd_request kd_request;

/* The model a request names: its "model" field (a JSON body's, taken out of it by
 * kd_request_json; a text/csv body's query parameter, set by the query's reader), NULL when
 * none; and the model it runs on once chosen, which every 2xx answer then names: a JSON
 * object's "model" field ({"id", "hash"}), other bodies' Kronos-Model and Kronos-Model-Hash
 * headers. */
void kd_request_set_model_name(kd_request *r, const char *name);
const char *kd_request_model_name(const kd_request *r);
const char *kd_request_model_hash(const kd_request *r); /* {"id", "hash"}'s hash, or NULL */
/* r holds a reference on its model (kd_models_hold) until another is set or it ends. */
void kd_request_set_model(kd_request *r, const kd_model *md);
const kd_model *kd_request_model(const kd_request *r);

#endif
