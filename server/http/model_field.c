/* model_field.c — kd_model_field_take, and a request's model as its accessors show it
 * (model_field.h). */
#include "model_field.h"

#include <stdio.h>
#include <string.h>

#include "app.h"
#include "models.h"
#include "request_state.h"

int kd_model_field_take(json_t *body, char *name, size_t name_len, char *hash, size_t hash_len,
                        char *msg, size_t msglen) {
    const json_t *model = json_object_get(body, "model");
    name[0] = hash[0] = '\0';
    if (!model) return 0;
    const json_t *id = json_is_object(model) ? json_object_get(model, "id") : model;
    const json_t *h = json_is_object(model) ? json_object_get(model, "hash") : NULL;
    const char *s = json_string_value(id);
    const size_t n = s ? strlen(s) : 0;
    if (!s || n == 0 || n > KD_MODEL_ID_MAX || (h && !json_is_string(h)) ||
        (json_is_object(model) && json_object_size(model) != 1u + (h != NULL))) {
        snprintf(msg, msglen,
                 "model: must be a model id (a string of 1 to %d characters; GET /models lists "
                 "them) or an answer's {\"id\", \"hash\"}",
                 KD_MODEL_ID_MAX);
        return -1;
    }
    snprintf(name, name_len, "%s", s);
    snprintf(hash, hash_len, "%s", h ? json_string_value(h) : "");
    json_object_del(body, "model");
    return 0;
}

void kd_request_set_model_name(kd_request *r, const char *name) {
    kd_model_choice *mc = &r->mc;
    snprintf(mc->name, sizeof mc->name, "%s", name);
}

const char *kd_request_model_name(const kd_request *r) {
    const kd_model_choice *mc = &r->mc;
    return mc->name[0] ? mc->name : NULL;
}

const char *kd_request_model_hash(const kd_request *r) {
    const kd_model_choice *mc = &r->mc;
    return mc->hash[0] ? mc->hash : NULL;
}

void kd_request_set_model(kd_request *r, const kd_model *md) {
    kd_models *ms = &r->http->app->models;
    kd_models_hold(ms, md);
    kd_models_release(ms, r->mc.model);
    r->mc.model = md;
}

const kd_model *kd_request_model(const kd_request *r) {
    return r->mc.model;
}
