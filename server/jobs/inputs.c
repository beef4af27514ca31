/* inputs.c — limits, the query string and CSV bodies (inputs.h). */
#include "inputs.h"

#include <string.h>

#include "candles_csv.h"
#include "json_fields.h"
#include "query_params.h"
#include "submit.h"

kd_forecast_limits kd_forecast_limits_of(const kd_app *app) {
    return (kd_forecast_limits){app->cfg.max_candles, app->cfg.max_horizon, app->cfg.max_samples};
}

kd_token_limits kd_token_limits_of(const kd_app *app, const kr_model *m) {
    const kr_predictor_config *pc = kr_model_predictor_config(m);
    return (kd_token_limits){1 << pc->s1_bits, 1 << pc->s2_bits, app->cfg.max_candles};
}

static int on_query(void *ctx, const char *key, size_t key_len, const char *value,
                    size_t value_len) {
    kd_query *q = ctx;
    char v[KD_QUOTE_MAX * 2];
    if (kd_query_check_bytes(key, key_len, value, value_len, q->err, q->errlen)) return -1;
    if (!strcmp(key, "format") && q->known) {
        if (q->has_format)
            return kd_fail(q->err, q->errlen, "query parameter \"format\": given twice");
        q->has_format = true;
        if (value && (!strcmp(value, "csv") || !strcmp(value, "json"))) {
            q->csv_out = !strcmp(value, "csv");
            return 0;
        }
        kd_quote(value ? value : "", v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"format\": must be csv or json, got \"%s\"", v);
    }
    if (!strcmp(key, "model") && q->csv_in) { /* a JSON body's is in the body */
        if (!value || !*value || strlen(value) > KD_MODEL_ID_MAX)
            return kd_fail(q->err, q->errlen,
                           "query parameter \"model\": must be a model id (1 to %d characters; "
                           "GET /models lists them)",
                           KD_MODEL_ID_MAX);
        snprintf(q->model, sizeof q->model, "%s", value);
        return 0;
    }
    if (!q->csv_in && q->known) {
        kd_quote(key, v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"%s\": with a JSON body every field goes in the body; "
                       "query parameters (other than format) are for a text/csv body",
                       v);
    }
    static const char *const none[] = {NULL};
    return kd_query_option(q->opts, key, value, q->known ? q->known : none, q->err, q->errlen);
}

bool kd_read_query(kd_app *app, kd_request *r, kd_query *q, char *msg, size_t msglen) {
    const char *accept = kd_request_header(r, "Accept");
    q->csv_in = kd_request_is_csv(r);
    q->csv_out = q->known && accept && strstr(accept, "text/csv");
    q->err = msg;
    q->errlen = msglen;
    if (!(q->opts = json_object())) {
        kd_reply_error(r, 500, "internal", "out of memory reading the query");
        return false;
    }
    if (kd_request_query_each(r, on_query, q) != 0) {
        json_decref(q->opts);
        q->opts = NULL;
        kd_refuse_invalid(app, r, msg);
        return false;
    }
    if (q->model[0]) kd_request_set_model_name(r, q->model);
    return true;
}

const kd_model *kd_pick_model(kd_app *app, kd_request *r) {
    const char *name = kd_request_model_name(r);
    const kd_model *md = kd_models_acquire(&app->models, name);
    const char *hash = kd_request_model_hash(r);
    if (md && hash && strcmp(hash, md->hash) != 0) {
        kd_models_release(&app->models, md);
        char v[KD_QUOTE_MAX * 2];
        kd_quote(hash, v, sizeof v);
        kd_reply_error(r, 404, "model_not_found",
                       "model.hash: \"%s\", but model %s's files hash to %s (it was reloaded or "
                       "changed)",
                       v, md->id, md->hash);
        return NULL;
    }
    if (!md) {
        char ids[512], v[KD_QUOTE_MAX * 2];
        kd_models_ids(&app->models, ids, sizeof ids);
        kd_quote(name, v, sizeof v);
        kd_reply_error(r, 404, "model_not_found", "model: no model \"%s\" here; the models are: %s",
                       v, ids);
        return NULL;
    }
    kd_request_set_model(r, md); /* the request's reference: dropped when it ends */
    kd_models_release(&app->models, md);
    return md;
}

int kd_body_csv_candles(const kd_request *r, int min_count, int max_count, kd_owned_candles *out,
                        char *msg, size_t msglen) {
    size_t len = 0;
    const char *body = kd_request_body(r, &len);
    return kd_candles_csv_parse(body ? body : "", len, min_count, max_count, out, msg, msglen);
}

const kd_model *kd_session_model_of(kd_app *app, kd_request *r, const kd_session *s) {
    const kd_model *md = kd_session_model(s) ? kd_session_model(s) : &app->models.v[0];
    const char *named = kd_request_model_name(r);
    if (named && strcmp(named, md->id) != 0) {
        char v[KD_QUOTE_MAX * 2];
        kd_quote(named, v, sizeof v);
        kd_refuse(app, r, KD_REFUSED_INVALID, 400, "invalid_request",
                  "model: \"%s\", but session %s is bound to model %s (leave model out, or "
                  "name %s)",
                  v, kd_session_id(s), md->id, md->id);
        return NULL;
    }
    kd_request_set_model(r, md);
    return md;
}
