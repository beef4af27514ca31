/* candle_calibration.c — a candle session's online calibration (candle_calib.h): the
 * creation's "calibration" read, each session forecast calibrated by the current object and
 * kept, each append's candles resolving the kept forecasts into the answer's anomalies and
 * /metrics, and the K records that let a restart learn the same things in the same order. */
#include "candle_calib.h"

#include <stdlib.h>
#include <string.h>

#include "calib_online_json.h"
#include "fail.h"
#include "intake.h"
#include "json_fields.h"
#include "log.h"

struct kd_candle_calib {
    kr_calib_online *online;
    char *start_text; /* the starting object as JSON, "" for online: its journal record */
    char id[KD_SESSION_ID_LEN + 1]; /* the session's, for its K records */
    char model_id[24];              /* its model's fingerprint, which its objects name */
};

/* The default levels of a first forecast that asks for none. */
static const double default_levels[] = {0.1, 0.5, 0.9};

void kd_candle_calib_free(kd_candle_calib *c) {
    if (!c) return;
    kr_calib_online_free(c->online);
    free(c->start_text);
    free(c);
}

kd_candle_calib *kd_candle_calib_take(kd_candle_calib **c) {
    kd_candle_calib *t = *c;
    *c = NULL;
    return t;
}

/* From a start's JSON text ("" for online); NULL with msg. */
static kd_candle_calib *calib_from_text(const char *text, size_t len, const char *model, char *msg,
                                        size_t msglen) {
    kd_candle_calib *c = calloc(1, sizeof *c);
    if (c) c->start_text = malloc(len + 1);
    if (!c || !c->start_text) {
        kd_candle_calib_free(c);
        kd_fail(msg, msglen, "calibration: out of memory");
        return NULL;
    }
    memcpy(c->start_text, text, len);
    c->start_text[len] = '\0';
    kr_error err = {0};
    if (len == 0) {
        c->online = kr_calib_online_new(NULL, &err);
    } else {
        json_error_t je;
        json_t *v = json_loadb(text, len, 0, &je);
        kr_calibration start = {0};
        if (!v) {
            kr_fail_code(&err, KR_E_INVALID, "calibration: not JSON: %s", je.text);
        } else if (kd_calibration_parse(v, &start, err.msg, sizeof err.msg) < 0) {
            err.code = KR_E_INVALID;
        } else if (model && kr_calibration_match(&start, model, start.horizon, start.samples,
                                                 start.levels, start.n_levels, &err) == 0) {
            c->online = kr_calib_online_new(&start, &err);
        }
        json_decref(v);
        kr_calibration_free(&start);
    }
    if (!c->online) {
        snprintf(msg, msglen, "%s", err.msg);
        kd_candle_calib_free(c);
        return NULL;
    }
    return c;
}

int kd_candle_calib_parse(const char *model_id, const json_t *v, kd_candle_calib **out, char *msg,
                          size_t msglen) {
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "online") != 0)
            return kd_fail(msg, msglen,
                           "calibration: must be \"online\" or a calibration object, got \"%s\"",
                           json_string_value(v));
        if (!(*out = calib_from_text("", 0, NULL, msg, msglen))) return -1;
        snprintf((*out)->model_id, sizeof(*out)->model_id, "%s", model_id);
        return 0;
    }
    if (!json_is_object(v))
        return kd_wrong(v, "calibration", "\"online\" or a calibration object", msg, msglen);
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) return kd_fail(msg, msglen, "calibration: out of memory");
    *out = calib_from_text(text, strlen(text), model_id, msg, msglen);
    free(text);
    if (*out) snprintf((*out)->model_id, sizeof(*out)->model_id, "%s", model_id);
    return *out ? 0 : -1;
}

int kd_candle_calib_journal_start(kd_app *app, kd_candle_calib *c, const char *id, char *msg,
                                  size_t msglen) {
    if (!c) return 0;
    snprintf(c->id, sizeof c->id, "%s", id);
    if (!app->journal) return 0;
    kd_journal_record rec = {.type = KD_REC_CALIB};
    snprintf(rec.id, sizeof rec.id, "%s", id);
    rec.calib = (kd_journal_calib){
        .kind = KD_CALIB_START, .text = c->start_text, .text_len = (uint32_t)strlen(c->start_text)};
    return kd_journal_write(app->journal, &rec, msg, msglen);
}

int kd_candle_calib_prepare(kd_candle_calib *c, const json_t *body, kd_forecast_input *in,
                            char *msg, size_t msglen) {
    if (!c) return 0;
    if (in->calibration)
        return kd_fail(msg, msglen,
                       "calibration: this session calibrates its own forecasts (it was created "
                       "with \"calibration\"); leave calibration out");
    kr_forecast_request *q = &in->req;
    if (!kd_field(body, "quantiles")) {
        const kr_calibration *cur = kr_calib_online_current(c->online);
        q->n_quantiles = cur ? cur->n_levels : (int)(sizeof default_levels / sizeof(double));
        memcpy(q->quantiles, cur ? cur->levels : default_levels,
               (size_t)q->n_quantiles * sizeof(double));
    }
    kr_error err = {0};
    if (kr_calib_online_fit(c->online, c->model_id, q->horizon, q->samples, q->quantiles,
                            q->n_quantiles, &err) < 0)
        return kd_fail(msg, msglen, "%s", err.msg);
    in->calibration = calloc(1, sizeof *in->calibration);
    if (!in->calibration ||
        kr_calibration_copy(in->calibration, kr_calib_online_current(c->online), &err) < 0) {
        free(in->calibration);
        in->calibration = NULL;
        return kd_fail(msg, msglen, "calibration: out of memory");
    }
    q->return_paths = true;
    return 0;
}

/* The forecast as its K record (the sorted paths borrowed). */
static void forecast_record(kd_journal_record *rec, const char *id, const kr_forecast_request *q,
                            const kr_forecast_result *res, const double *sorted) {
    *rec = (kd_journal_record){.type = KD_REC_CALIB};
    snprintf(rec->id, sizeof rec->id, "%s", id);
    kd_journal_calib *k = &rec->calib;
    k->kind = KD_CALIB_FORECAST;
    k->origin = q->context.n;
    k->last = q->context.columns[KR_CLOSE][q->context.n - 1];
    k->horizon = res->horizon;
    k->samples = res->samples;
    k->n_levels = q->n_quantiles;
    memcpy(k->levels, q->quantiles, sizeof k->levels);
    k->sorted = sorted;
    k->p_up = res->prob_close_up;
}

int kd_candle_calib_kept(kd_app *app, void *ctx, kd_forecast_input *in,
                         const kr_forecast_result *res, kr_error *err) {
    kd_candle_calib *c = ctx;
    const size_t n = (size_t)res->horizon * (size_t)res->samples;
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
    kr_forecast_sorted_close(res, sorted);
    kd_journal_record rec;
    forecast_record(&rec, c->id, &in->req, res, sorted);
    char msg[KD_MSG_MAX];
    int rc = 0;
    /* written first: what is kept is what a restart keeps */
    if (app->journal && kd_journal_write(app->journal, &rec, msg, sizeof msg) < 0)
        rc = kr_fail(err,
                     "the forecast could not be written to the journal (state-dir), so the "
                     "session could not keep it to calibrate from: %s",
                     msg);
    if (rc == 0)
        rc = kr_calib_online_keep(c->online, rec.calib.origin, rec.calib.last, sorted,
                                  res->prob_close_up, err);
    free(sorted);
    return rc;
}

int kd_candle_calib_resolve(kd_app *app, kd_candle_calib *c, long first, const kr_candles *cand,
                            const kd_time_form *form, json_t **anomalies, kr_error *err) {
    *anomalies = NULL;
    if (!c) return 0;
    json_t *list = app ? json_array() : NULL;
    if (app && !list) return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
    unsigned long long flagged = 0, checked = 0;
    kr_calib_online_stats st; /* for the bands' names */
    kr_calib_online_stats_get(c->online, &st);
    for (int i = 0; i < cand->n; i++) {
        kr_online_outcome out;
        if (kr_calib_online_resolve(c->online, first + i, cand->columns[KR_CLOSE][i], &out, err)) {
            json_decref(list);
            return -1;
        }
        if (!out.covered) continue;
        checked++;
        flagged += out.outside != 0;
        if (!list) continue;
        json_t *a = kd_calib_anomaly_json(kd_timestamp_json(cand->timestamps[i], form), &out, &st);
        if (!a || json_array_append_new(list, a) < 0) {
            json_decref(list);
            return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
        }
    }
    if (app) kd_metrics_add_append_anomalies(app->metrics, flagged, checked);
    *anomalies = list;
    return 0;
}

kd_replay_status kd_candle_calib_replay(const char *model_id, kd_candle_calib **c, long length,
                                        const kd_journal_record *rec, char *msg, size_t msglen) {
    if (rec->type == KD_REC_APPEND) {
        const kr_candles cand = kd_journal_record_candles(rec);
        json_t *none;
        kr_error err = {0};
        if (kd_candle_calib_resolve(NULL, *c, length, &cand, NULL, &none, &err) == 0)
            return KD_REPLAY_OK;
        snprintf(msg, msglen, "%s", err.msg);
        return KD_REPLAY_ERROR;
    }
    const kd_journal_calib *k = &rec->calib;
    if (k->kind == KD_CALIB_START) {
        if (*c) {
            snprintf(msg, msglen, "a second calibration start for one session");
            return KD_REPLAY_INVALID;
        }
        *c = calib_from_text(k->text, k->text_len, model_id, msg, msglen);
        if (!*c) return KD_REPLAY_INVALID;
        snprintf((*c)->model_id, sizeof(*c)->model_id, "%s", model_id);
        snprintf((*c)->id, sizeof(*c)->id, "%s", rec->id);
        return KD_REPLAY_OK;
    }
    if (!*c || k->origin != length) {
        snprintf(msg, msglen, "a kept forecast %s",
                 *c ? "from another origin than the session's "
                      "length"
                    : "for a session without calibration");
        return KD_REPLAY_INVALID;
    }
    kr_error err = {0};
    if (kr_calib_online_fit((*c)->online, (*c)->model_id, k->horizon, k->samples, k->levels,
                            k->n_levels, &err) < 0 ||
        kr_calib_online_keep((*c)->online, k->origin, k->last, k->sorted, k->p_up, &err) < 0) {
        snprintf(msg, msglen, "%s", err.msg);
        return err.code == KR_E_NO_MEMORY ? KD_REPLAY_ERROR : KD_REPLAY_INVALID;
    }
    return KD_REPLAY_OK;
}

void kd_candle_calib_describe(const kd_candle_calib *c, kd_session_extra *out) {
    if (!c) return;
    out->calibrated = true;
    out->calib_from_object = c->start_text[0] != '\0';
    kr_calib_online_stats_get(c->online, &out->calib);
    out->heap_bytes += out->calib.bytes;
    out->bytes += out->calib.bytes;
}
