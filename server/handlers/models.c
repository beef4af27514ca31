/* models.c — GET /models, GET /models/{id}, POST /models and DELETE /models/{id}
 * (handlers.h): the models the daemon serves, each with its id, content hash, shapes, size,
 * kernels and load time, and a model loaded or unloaded while serving, with an admin key (a
 * fine-tuned model's checkpoint kept by an unload, removed with purge=true). */
#include "handlers.h"

#include <string.h>
#include <time.h>

#include "finetune_jobs.h"
#include "intake.h"
#include "log.h"
#include "query_params.h"
#include "submit.h"

static json_t *model_entry(const kd_app *app, const kd_model *md) {
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(md->m);
    const kr_predictor_config *pc = kr_model_predictor_config(md->m);
    char when[32];
    struct tm tm;
    gmtime_r(&md->loaded_at, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *shared = md->tokenizer_of >= 0 ? app->models.v[md->tokenizer_of].id : NULL;
    return json_pack(
        "{s:s,s:s,s:b,"
        "s:{s:s,s:o,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},"
        "s:{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:b},"
        "s:i,s:I,s:I,s:s,s:s,s:{s:s,s:s},s:s}",
        "id", md->id, "hash", md->hash, "default", md == &app->models.v[0],
        /* tokenizer */
        "tokenizer", "hash", md->tokenizer_hash, "shared_with",
        shared ? json_string(shared) : json_null(), "d_in", tc->d_in, "d_model", tc->d_model,
        "n_heads", tc->n_heads, "ff_dim", tc->ff_dim, "n_enc_layers", tc->n_enc_layers,
        "n_dec_layers", tc->n_dec_layers, "s1_bits", tc->s1_bits, "s2_bits", tc->s2_bits,
        /* predictor */
        "predictor", "hash", md->predictor_hash, "d_model", pc->d_model, "n_layers", pc->n_layers,
        "n_heads", pc->n_heads, "ff_dim", pc->ff_dim, "s1_bits", pc->s1_bits, "s2_bits",
        pc->s2_bits, "learn_te", pc->learn_te, "kv_shift", pc->kv_shift,
        /* sizes */
        "max_context", kr_model_max_context(md->m), "parameters",
        (json_int_t)kr_model_param_count(md->m), "bytes",
        (json_int_t)kd_model_own_bytes(&app->models, md), "weights",
        kr_precision_name(kr_model_weights(md->m)), "kv", kr_precision_name(kr_model_kv(md->m)),
        "kernels", "simd", kr_simd_name(kr_simd_level()), "product",
        kr_weights_product_name(kr_model_weights(md->m), kr_simd_level()), "loaded_at", when);
}

typedef struct {
    const kd_app *app;
    json_t *list;
    bool failed;
} listing;

static void list_one(void *ctx, const kd_model *md) {
    listing *l = ctx;
    if (!l->failed && json_array_append_new(l->list, model_entry(l->app, md)) < 0) l->failed = true;
}

kd_outcome kd_handle_models(kd_app *app, kd_request *r) {
    listing l = {app, json_array(), false};
    if (l.list) kd_models_each(&app->models, list_one, &l);
    if (l.failed) {
        json_decref(l.list);
        l.list = NULL;
    }
    kd_reply_json(r, 200, l.list ? json_pack("{s:o}", "models", l.list) : NULL);
    return KD_REPLIED;
}

kd_outcome kd_handle_model_get(kd_app *app, kd_request *r) {
    const char *id = kd_request_path(r) + strlen("/models/");
    kd_request_set_model_name(r, id);
    const kd_model *md = kd_pick_model(app, r);
    if (!md) return KD_REPLIED;
    kd_models_hold(&app->models, md);
    kd_request_set_model(r, NULL); /* the answer is the model itself: no "model" field */
    kd_reply_json(r, 200, model_entry(app, md));
    kd_models_release(&app->models, md);
    return KD_REPLIED;
}

/* A load's own settings: max_context, weights, kv (the model's configured values where
 * not given); false with a message naming the field. */
static bool load_settings(json_t *body, kd_model_overrides *o, char *msg, size_t n) {
    json_t *mc = json_object_get(body, "max_context");
    const char *w = json_string_value(json_object_get(body, "weights"));
    const char *kv = json_string_value(json_object_get(body, "kv"));
    kr_error ke = {0};
    if (mc &&
        (!json_is_integer(mc) || json_integer_value(mc) < 1 || json_integer_value(mc) > 1 << 20))
        return snprintf(msg, n, "max_context: expected an integer in 1..%d", 1 << 20), false;
    if ((w && kr_precision_parse(w, "weights", &o->v.weights, &ke) != 0) ||
        (kv && kr_kv_precision_parse(kv, "kv", &o->v.kv, &ke) != 0))
        return snprintf(msg, n, "%s", ke.msg), false;
    o->has_max_context = mc != NULL;
    o->v.max_context = mc ? (int)json_integer_value(mc) : 0;
    o->has_weights = w != NULL;
    o->has_kv = kv != NULL;
    return true;
}

/* {"id", "path", "max_context", "weights", "kv"}: the fields a load takes; a message naming
 * the one that breaks a rule. */
static bool load_fields(json_t *body, const char **id, const char **path, kd_model_overrides *o,
                        char *msg, size_t n) {
    static const char *const names[] = {"id", "path", "weights", "kv", "max_context"};
    const char *key;
    json_t *v;
    if (!json_is_object(body)) return snprintf(msg, n, "body: expected a JSON object"), false;
    json_object_foreach(body, key, v) {
        size_t k = 0;
        while (k < 5 && strcmp(key, names[k]) != 0)
            k++;
        if (k == 5)
            return snprintf(msg, n,
                            "%.64s: unknown field (a load takes id, path, max_context, weights "
                            "and kv)",
                            key),
                   false;
        if (k < 4 && !json_is_string(v))
            return snprintf(msg, n, "%s: expected a string", key), false;
    }
    *id = json_string_value(json_object_get(body, "id"));
    *path = json_string_value(json_object_get(body, "path"));
    if (!*path || !**path)
        return snprintf(msg, n, "path: required (a folder holding tokenizer/ and predictor/)"),
               false;
    return load_settings(body, o, msg, n);
}

/* Whether r carries an admin key; false after replying 401. */
static bool admin(kd_app *app, kd_request *r, const char *what) {
    if (kd_request_is_admin(r)) return true;
    kd_reply_error(r, 401, "unauthorized",
                   "%s takes an admin key (admin-key-file) as Authorization: Bearer%s", what,
                   atomic_load(&app->admin_keys) ? "" : "; this daemon has no admin-key-file");
    return false;
}

kd_outcome kd_handle_model_load(kd_app *app, kd_request *r) {
    if (!admin(app, r, "POST /models")) return KD_REPLIED;
    kd_refused refused;
    json_t *body = kd_request_json(r, &refused);
    if (!body) {
        kd_reply_refused(r, &refused);
        return KD_REPLIED;
    }
    const char *id = NULL, *path = NULL;
    kd_model_overrides over = {0};
    char msg[KD_MSG_MAX];
    if (!load_fields(body, &id, &path, &over, msg, sizeof msg)) {
        json_decref(body);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    /* what a load refused answers, by kd_models_add's result (the field it names first) */
    static const struct {
        int status;
        const char *code, *field;
    } refusals[] = {
        [KD_MODEL_ADD_EXISTS] = {409, "model_exists", "id"},
        [KD_MODEL_ADD_FAILED] = {422, "model_load_failed", "path"},
        [KD_MODEL_ADD_FULL] = {422, "model_load_failed", "path"},
        [KD_MODEL_ADD_NO_ROOM] = {507, "model_memory_exceeded", "path"},
    };
    const kd_model *md = NULL;
    const kd_model_add_result rc =
        kd_models_add(&app->models, &app->cfg, id, path, &over, &md, msg, sizeof msg);
    if (rc == KD_MODEL_ADD_OK) {
        kd_log("model %s loaded from %s: hash %s, %zu parameters%s", md->id, path, md->hash,
               kr_model_param_count(md->m), md->tokenizer_of >= 0 ? ", its tokenizer shared" : "");
        kd_reply_json(r, 201, model_entry(app, md));
        kd_models_release(&app->models, md); /* the load's own reference */
    } else if (rc == KD_MODEL_ADD_INVALID) {
        kd_refuse_invalid(app, r, msg);
    } else {
        kd_reply_error(r, refusals[rc].status, refusals[rc].code, "%s: %s", refusals[rc].field,
                       msg);
    }
    json_decref(body);
    return KD_REPLIED;
}

/* DELETE's query: purge=true|false (default false); 1 purge, 0 not, -1 with a message */
typedef struct {
    json_t *opts;
    char *msg;
    size_t n;
} unload_query;

static int unload_param(void *ctx, const char *key, size_t key_len, const char *value,
                        size_t value_len) {
    static const char *const known[] = {"purge", NULL};
    unload_query *q = ctx;
    if (kd_query_check_bytes(key, key_len, value, value_len, q->msg, q->n)) return -1;
    return kd_query_option(q->opts, key, value, known, q->msg, q->n) ? -1 : 0;
}

static int purge_param(kd_request *r, char *msg, size_t n) {
    unload_query q = {json_object(), msg, n};
    if (!q.opts) return snprintf(msg, n, "out of memory"), -1;
    int rc = kd_request_query_each(r, unload_param, &q) ? -1 : 0;
    const json_t *v = json_object_get(q.opts, "purge");
    if (rc == 0 && v && !json_is_boolean(v))
        rc = -1, snprintf(msg, n, "purge: must be true or false");
    if (rc == 0) rc = json_is_true(v);
    json_decref(q.opts);
    return rc;
}

/* the answer once the model is unloaded (unloaded: it was loaded) and, with purge, its
 * checkpoint removed; without, where a tuned model's checkpoint stays */
static void unloaded(kd_app *app, kd_request *r, const char *id, bool was_loaded, int purge,
                     kd_ft_ckpt ck, const char *dir) {
    char msg[KD_MSG_MAX];
    if (purge && kd_ft_purge(app->finetune, id, msg, sizeof msg)) {
        kd_reply_error(r, 500, "internal", "%s%s", was_loaded ? "model unloaded, but " : "", msg);
        return;
    }
    if (was_loaded) kd_log("model %s unloaded (freed when its requests in flight end)", id);
    if (purge) kd_log("model %s: checkpoint %s removed for good", id, dir);
    json_t *o = json_pack("{s:s,s:b}", "id", id, "unloaded", was_loaded);
    if (o && purge) json_object_set_new(o, "purged", json_true());
    if (o && !purge && ck != KD_FT_CKPT_NONE) {
        json_object_set_new(o, "checkpoint", json_string(dir));
        json_object_set_new(o, "loads_at_start", json_boolean(ck == KD_FT_CKPT_KEPT));
    }
    kd_reply_json(r, 200, o);
}

kd_outcome kd_handle_model_unload(kd_app *app, kd_request *r) {
    if (!admin(app, r, "DELETE /models/{id}")) return KD_REPLIED;
    const char *id = kd_request_path(r) + strlen("/models/");
    char msg[KD_MSG_MAX], dir[1200] = "";
    int purge = purge_param(r, msg, sizeof msg);
    if (purge < 0) {
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    kd_ft_ckpt ck =
        app->finetune ? kd_ft_checkpoint(app->finetune, id, dir, sizeof dir) : KD_FT_CKPT_NONE;
    kd_model_remove_result rc = KD_MODEL_REMOVE_UNKNOWN;
    if (purge && ck == KD_FT_CKPT_NONE) {
        const kd_model *md = kd_models_acquire(&app->models, id);
        kd_models_release(&app->models, md);
        if (md) {
            snprintf(msg, sizeof msg,
                     "purge: model '%.64s' is not a fine-tuned model of this daemon (no checkpoint "
                     "of it under state-dir/models): DELETE without purge unloads it",
                     id);
            kd_refuse_invalid(app, r, msg);
            return KD_REPLIED;
        }
    } else {
        rc = kd_models_remove(&app->models, id, msg, sizeof msg);
    }
    switch (rc) {
    case KD_MODEL_REMOVE_OK:
        unloaded(app, r, id, true, purge, ck, dir);
        break;
    case KD_MODEL_REMOVE_UNKNOWN:
        if (purge && ck != KD_FT_CKPT_NONE) /* unloaded before: its checkpoint still goes */
            unloaded(app, r, id, false, purge, ck, dir);
        else if (purge)
            kd_reply_error(r, 404, "model_not_found",
                           "model '%.64s' is neither loaded nor a fine-tuned model's checkpoint",
                           id);
        else
            kd_reply_error(r, 404, "model_not_found", "%s", msg);
        break;
    case KD_MODEL_REMOVE_DEFAULT:
    case KD_MODEL_REMOVE_BUSY:
        kd_reply_error(r, 409, "model_in_use", "%s", msg);
        break;
    }
    return KD_REPLIED;
}
