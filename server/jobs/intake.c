/* intake.c — a model request read once (intake.h): the query, the body, the model, and
 * /forecast's request built from them. */
#include "intake.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "candles_csv.h"
#include "json_fields.h"
#include "query_params.h"
#include "series_json.h"
#include "submit.h"

_Static_assert(KD_MSG_MAX <= sizeof((kd_refused *)0)->msg, "a request error fits a refusal");

kd_forecast_limits kd_forecast_limits_of(const kd_app *app) {
    return (kd_forecast_limits){app->cfg.max_candles, app->cfg.max_horizon, app->cfg.max_samples};
}

static kd_token_limits token_limits_of(const kd_app *app, const kr_model *m) {
    const kr_predictor_config *pc = kr_model_predictor_config(m);
    return (kd_token_limits){1 << pc->s1_bits, 1 << pc->s2_bits, app->cfg.max_candles};
}

void kd_refused_set_invalid(kd_refused *refused, const char *msg) {
    if (msg) snprintf(refused->msg, sizeof refused->msg, "%s", msg);
    refused->why = KD_REFUSED_INVALID;
    refused->status = 400;
    refused->code = "invalid_request";
}

/* ---- the query -------------------------------------------------------------------------- */

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

/* The query of r into q; -1 with refused (400 counted invalid, or 500). */
static int read_query(kd_request *r, kd_query *q, kd_refused *refused) {
    const char *accept = kd_request_header(r, "Accept");
    q->csv_in = kd_request_is_csv(r);
    q->csv_out = q->known && accept && strstr(accept, "text/csv");
    q->err = refused->msg;
    q->errlen = KD_MSG_MAX; /* a request error's message, as every route cuts it */
    if (!(q->opts = json_object())) {
        kd_refused_set(refused, KD_NOT_REFUSED, 500, "internal", "out of memory reading the query");
        return -1;
    }
    if (kd_request_query_each(r, on_query, q) != 0) {
        kd_refused_set_invalid(refused, NULL);
        return -1;
    }
    return 0;
}

/* ---- the model -------------------------------------------------------------------------- */

/* The model named (NULL: the default one), held; NULL with refused (404 model_not_found). */
static const kd_model *pick(kd_app *app, const char *name, const char *hash, kd_refused *refused) {
    const kd_model *md = kd_models_acquire(&app->models, name);
    char v[KD_QUOTE_MAX * 2];
    if (md && hash && strcmp(hash, md->hash) != 0) {
        kd_models_release(&app->models, md);
        kd_quote(hash, v, sizeof v);
        kd_refused_set(refused, KD_NOT_REFUSED, 404, "model_not_found",
                       "model.hash: \"%s\", but model %s's files hash to %s (it was reloaded or "
                       "changed)",
                       v, md->id, md->hash);
        return NULL;
    }
    if (!md) {
        char ids[512];
        kd_models_ids(&app->models, ids, sizeof ids);
        kd_quote(name, v, sizeof v);
        kd_refused_set(refused, KD_NOT_REFUSED, 404, "model_not_found",
                       "model: no model \"%s\" here; the models are: %s", v, ids);
    }
    return md;
}

/* ---- a model request --------------------------------------------------------------------- */

int kd_intake_read(kd_app *app, kd_request *r, const char *const *fields, const char *json_only,
                   kd_intake *in) {
    *in = (kd_intake){.q.known = fields ? in->known : NULL};
    int n = 0;
    if (fields) { /* "format", then the request's fields but candles */
        in->known[n++] = "format";
        for (int i = 0; fields[i] && n < 31; i++)
            in->known[n++] = fields[i];
    }
    if (read_query(r, &in->q, &in->refused) < 0) return -1;
    if (json_only && in->q.csv_out) {
        kd_refused_set_invalid(&in->refused, json_only);
        return -1;
    }
    const char *accept = kd_request_header(r, "Accept");
    in->stream = accept && strstr(accept, "text/event-stream");
    in->text = kd_request_body(r, &in->len);
    if (!in->q.csv_in && !(in->body = kd_request_json(r, &in->refused))) {
        in->refused.why = KD_REFUSED_INVALID;
        return -1;
    }
    /* a text/csv body's model comes in the query, a JSON body's in the body */
    const char *name =
        in->q.csv_in ? (in->q.model[0] ? in->q.model : NULL) : kd_request_model_name(r);
    const char *hash = in->q.csv_in ? NULL : kd_request_model_hash(r);
    const kd_model *md = pick(app, name, hash, &in->refused);
    if (!md) return -1;
    kd_request_set_model(r, md); /* the request's reference: dropped when it ends */
    kd_models_release(&app->models, md);
    in->md = md;
    return 0;
}

void kd_intake_end(kd_intake *in) {
    json_decref(in->body);
    json_decref(in->q.opts);
    in->body = in->q.opts = NULL;
}

int kd_intake_csv_candles(kd_intake *in, int min_count, int max_count, kd_owned_candles *out) {
    if (kd_candles_csv_parse(in->text ? in->text : "", in->len, min_count, max_count, out,
                             in->refused.msg, KD_MSG_MAX) == 0)
        return 0;
    kd_refused_set_invalid(&in->refused, NULL);
    return -1;
}

/* ---- /forecast ----------------------------------------------------------------------------- */

/* One series from a JSON body, or from a CSV body and the query, into fi->in[0]. */
static int forecast_one(kd_app *app, kd_intake *in, kd_forecast_intake *fi) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    const int mc = kr_model_max_context(in->md->m); /* the picked model's */
    char *msg = in->refused.msg;
    const size_t msglen = KD_MSG_MAX;
    kd_forecast_input *one = fi->in;
    if (!in->q.csv_in) {
        if (kd_forecast_request_parse_limited(in->body, mc, &lim, one, msg, msglen) < 0) return -1;
    } else {
        kd_owned_candles candles;
        if (kd_intake_csv_candles(in, 2, app->cfg.max_candles, &candles) < 0 ||
            kd_forecast_request_with_candles(in->q.opts, &candles, mc, &lim, one, msg, msglen) < 0)
            return -1;
    }
    if (in->q.csv_out && one->calibration) {
        snprintf(msg, msglen, "format: a calibrated forecast is answered as JSON only");
        return -1;
    }
    return 0;
}

/* The forecasts of what in read: "series" (many, answered together) or one. */
static int forecast_of(kd_app *app, kd_intake *in, kd_forecast_intake *fi) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    char *msg = in->refused.msg;
    const size_t msglen = KD_MSG_MAX;
    kd_refused_set_invalid(&in->refused, ""); /* each failure below writes its message */
    if (in->body && kd_is_series_request(in->body)) {
        fi->answer = KD_ANSWER_SERIES;
        if (in->q.csv_out) {
            snprintf(msg, msglen,
                     "format: csv answers one series; a \"series\" request answers JSON");
            return -1;
        }
        return kd_series_request_parse(in->body, kr_model_max_context(in->md->m), &lim, &fi->in,
                                       &fi->n, msg, msglen);
    }
    fi->answer = in->q.csv_out ? KD_ANSWER_CSV : KD_ANSWER_JSON;
    if (!(fi->in = calloc(1, sizeof *fi->in))) {
        kd_refused_set(&in->refused, KD_NOT_REFUSED, 500, "internal",
                       "out of memory queueing the request");
        return -1;
    }
    fi->n = 1;
    if (forecast_one(app, in, fi) == 0) return 0;
    kd_series_inputs_free(fi->in, 1);
    fi->in = NULL;
    fi->n = 0;
    return -1;
}

int kd_intake_forecast(kd_app *app, kd_request *r, kd_forecast_intake *fi) {
    kd_intake in;
    *fi = (kd_forecast_intake){.answer = KD_ANSWER_JSON};
    int rc = kd_intake_read(app, r, kd_forecast_option_names(), NULL, &in);
    if (rc == 0 && (rc = forecast_of(app, &in, fi)) == 0) {
        in.refused = (kd_refused){.why = KD_NOT_REFUSED};
        fi->md = in.md;
    }
    fi->refused = in.refused;
    kd_intake_end(&in);
    return rc;
}

/* ---- /evaluate ----------------------------------------------------------------------------- */

/* One evaluation from a JSON body, or from a CSV body and the query, into ev. */
static int evaluate_one(kd_app *app, kd_intake *in, kd_evaluate_input *ev) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    char *msg = in->refused.msg;
    const size_t msglen = KD_MSG_MAX;
    if (!in->q.csv_in) return kd_evaluate_request_parse(in->body, &lim, ev, msg, msglen);
    kd_owned_candles candles;
    if (kd_intake_csv_candles(in, 2, app->cfg.max_candles, &candles) < 0) return -1;
    return kd_evaluate_request_with_candles(in->q.opts, &candles, &lim, ev, msg, msglen);
}

/* The evaluations of what in read: "series" (many, with their cross-section) or one. */
static int evaluate_of(kd_app *app, kd_intake *in, kd_evaluate_intake *ei) {
    kd_evaluate_series_input *set = &ei->set;
    kd_refused_set_invalid(&in->refused, ""); /* each failure below writes its message */
    ei->series_form = in->body && kd_is_series_request(in->body);
    if (ei->series_form) {
        const kd_forecast_limits lim = kd_forecast_limits_of(app);
        if (kd_evaluate_series_parse(in->body, &lim, set, in->refused.msg, KD_MSG_MAX) < 0)
            return -1;
    } else {
        if (!(set->in = calloc(1, sizeof *set->in))) {
            kd_refused_set(&in->refused, KD_NOT_REFUSED, 500, "internal",
                           "out of memory queueing the request");
            return -1;
        }
        set->n = 1;
        if (evaluate_one(app, in, set->in) != 0) {
            kd_evaluate_series_input_free(set); /* emptied */
            return -1;
        }
    }
    for (int i = 0; i < set->n; i++) /* a fitted calibration names it, a given one matches */
        set->in[i].req.model_id = in->md->fp_hex;
    return 0;
}

int kd_intake_evaluate(kd_app *app, kd_request *r, kd_evaluate_intake *ei) {
    kd_intake in;
    *ei = (kd_evaluate_intake){0};
    int rc = kd_intake_read(app, r, kd_evaluate_option_names(),
                            "format: an evaluation is answered as JSON only", &in);
    if (rc == 0 && (rc = evaluate_of(app, &in, ei)) == 0) {
        in.refused = (kd_refused){.why = KD_NOT_REFUSED};
        ei->md = in.md;
    }
    ei->stream = in.stream;
    ei->refused = in.refused;
    kd_intake_end(&in);
    return rc;
}

/* ---- for the routes that answer as they read ------------------------------------------- */

bool kd_read_query(kd_app *app, kd_request *r, kd_query *q, char *msg, size_t msglen) {
    kd_refused refused = {.why = KD_NOT_REFUSED};
    if (read_query(r, q, &refused) < 0) {
        snprintf(msg, msglen, "%s", refused.msg);
        json_decref(q->opts);
        q->opts = NULL;
        kd_refuse_with(app, r, &refused);
        return false;
    }
    if (q->model[0]) kd_request_set_model_name(r, q->model);
    return true;
}

json_t *kd_model_request_json(kd_app *app, kd_request *r) {
    kd_refused refused;
    json_t *body = kd_request_json(r, &refused);
    if (!body) {
        refused.why = KD_REFUSED_INVALID;
        kd_refuse_with(app, r, &refused);
    }
    return body;
}

const kd_model *kd_pick_model(kd_app *app, kd_request *r) {
    kd_refused refused;
    const kd_model *md = pick(app, kd_request_model_name(r), kd_request_model_hash(r), &refused);
    if (!md) {
        kd_refuse_with(app, r, &refused);
        return NULL;
    }
    kd_request_set_model(r, md); /* the request's reference: dropped when it ends */
    kd_models_release(&app->models, md);
    return md;
}

json_t *kd_token_request_json(kd_app *app, kd_request *r, const kd_model **md,
                              kd_token_limits *lim) {
    json_t *body = kd_model_request_json(app, r);
    if (body && !(*md = kd_pick_model(app, r))) {
        json_decref(body); /* replied 404 */
        return NULL;
    }
    if (body) *lim = token_limits_of(app, (*md)->m);
    return body;
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
