/* models.c — GET /models and GET /models/{id} (handlers.h): the models the daemon serves,
 * each with its id, content hash, shapes, size, kernels and load time. */
#include "handlers.h"

#include <string.h>
#include <time.h>

#include "inputs.h"

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
        "s:i,s:I,s:I,s:s,s:s,s:{s:s},s:s}",
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
        "kernels", "simd", kr_simd_name(kr_simd_level()), "loaded_at", when);
}

kd_outcome kd_handle_models(kd_app *app, kd_request *r) {
    json_t *list = json_array();
    for (int i = 0; list && i < app->models.n; i++)
        if (json_array_append_new(list, model_entry(app, &app->models.v[i])) < 0) {
            json_decref(list);
            list = NULL;
        }
    kd_reply_json(r, 200, list ? json_pack("{s:o}", "models", list) : NULL);
    return KD_REPLIED;
}

kd_outcome kd_handle_model_get(kd_app *app, kd_request *r) {
    const char *id = kd_request_path(r) + strlen("/models/");
    kd_request_set_model_name(r, id);
    const kd_model *md = kd_pick_model(app, r);
    if (!md) return KD_REPLIED;
    kd_request_set_model(r, NULL); /* the answer is the model itself: no "model" field */
    kd_reply_json(r, 200, model_entry(app, md));
    return KD_REPLIED;
}
