/* finetune.c — POST /finetune, GET /finetune, GET /finetune/{id} (JSON or an event stream)
 * and DELETE /finetune/{id} (handlers.h): fine-tuning jobs with an admin key, the request
 * mapped to kr_finetune_settings and candles, the rules the core's, the work
 * finetune_jobs.c's. */
#include "handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candles_csv.h"
#include "fail.h"
#include "finetune_jobs.h"
#include "finetune_json.h"
#include "intake.h"
#include "replies.h"
#include "stream.h"
#include "submit.h"

#define SERIES_MAX 64

static bool admin(kd_app *app, kd_request *r) {
    if (kd_request_is_admin(r)) return true;
    kd_reply_error(r, 401, "unauthorized",
                   "%s %s takes an admin key (admin-key-file) as Authorization: Bearer%s",
                   kd_request_method(r), kd_request_path(r),
                   atomic_load(&app->admin_keys) ? "" : "; this daemon has no admin-key-file");
    return false;
}

static void request_free(kd_ft_request *q) {
    for (int i = 0; i < q->n; i++) {
        kd_candles_free(&q->series[i]);
        free(q->names[i]);
    }
    free(q->series);
    free(q->names);
}

/* one series of the JSON body into q; -1 with a message naming it */
static int add_series(kd_app *app, kd_ft_request *q, const json_t *v, const char *name, char *msg,
                      size_t n) {
    char err[KD_MSG_MAX];
    const json_t *inner = json_is_object(v) ? json_object_get(v, "candles") : NULL;
    if (kd_candles_parse(inner ? inner : v, 2, app->cfg.max_candles, &q->series[q->n], err,
                         sizeof err))
        return kd_fail(msg, n, "%s: %s", name, err);
    if (!(q->names[q->n] = strdup(name))) {
        kd_candles_free(&q->series[q->n]);
        return snprintf(msg, n, "out of memory"), -1;
    }
    q->n++;
    return 0;
}

/* the candles: "candles" (one series), "series" (several) or a text/csv body */
static int read_candles(kd_app *app, kd_request *r, const json_t *body, kd_ft_request *q, char *msg,
                        size_t n) {
    const json_t *one = json_object_get(body, "candles"), *many = json_object_get(body, "series");
    size_t count = body ? (many ? json_array_size(many) : !!one) : 1;
    if (body && !one == !many)
        return snprintf(msg, n, "candles: give candles (one series) or series (several)"), -1;
    if (many && (!json_is_array(many) || count < 1 || count > SERIES_MAX))
        return snprintf(msg, n, "series: expected an array of 1 to %d candle series", SERIES_MAX),
               -1;
    q->series = calloc(count, sizeof *q->series);
    q->names = calloc(count, sizeof *q->names);
    if (!q->series || !q->names) return snprintf(msg, n, "out of memory"), -1;
    if (!body) {
        if (kd_body_csv_candles(r, 2, app->cfg.max_candles, &q->series[0], msg, n)) return -1;
        if (!(q->names[0] = strdup("candles"))) return kd_candles_free(&q->series[0]), -1;
        q->n = 1;
        return 0;
    }
    if (one) return add_series(app, q, one, "candles", msg, n);
    for (size_t i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "series[%zu]", i);
        if (add_series(app, q, json_array_get(many, i), name, msg, n)) return -1;
    }
    return 0;
}

kd_outcome kd_handle_finetune_post(kd_app *app, kd_request *r) {
    if (!admin(app, r)) return KD_REPLIED;
    const char *const *names = kd_finetune_option_names();
    kd_query qy = {.known = names};
    char msg[KD_MSG_MAX];
    if (!kd_read_query(app, r, &qy, msg, sizeof msg)) return KD_REPLIED;
    json_t *body = qy.csv_in ? NULL : kd_model_request_json(app, r);
    if (!qy.csv_in && !body) return json_decref(qy.opts), KD_REPLIED;
    const json_t *fields = body ? body : qy.opts;
    kd_ft_request q = {0};
    const char *id = NULL;
    kr_error err = {0};
    const kd_model *base = kd_pick_model(app, r);
    if (!base) goto done;
    kd_request_set_model(r, NULL); /* the answer is the job: no "model" tag */
    q.base = base;
    if (!json_is_object(fields)
            ? snprintf(msg, sizeof msg, "body: expected a JSON object") > 0
            : kd_finetune_settings_parse(fields, &q.s, &q.gate_samples, &id, msg, sizeof msg) ||
                  read_candles(app, r, body, &q, msg, sizeof msg)) {
        kd_refuse_invalid(app, r, msg);
        goto done;
    }
    q.model_id = id;
    if (kr_finetune_check(&q.s, kr_model_predictor_config(base->m), &err) ||
        kr_finetune_gate_check(q.gate_samples, &err)) {
        kd_refuse_error(app, r, "finetune", &err);
        goto done;
    }
    json_t *answer = NULL;
    switch (kd_ft_submit(app->finetune, &q, &answer, msg, sizeof msg)) {
    case KD_FT_OK: {
        char where[64];
        const char *job = json_string_value(json_object_get(answer, "id"));
        snprintf(where, sizeof where, "/finetune/%s", job ? job : "");
        kd_reply_json(r, 202, answer);
        kd_reply_header(r, "Location", where); /* on the answer just set */
        break;
    }
    case KD_FT_BUSY:
        kd_request_set_retry_after(r, 60);
        kd_reply_error(r, 429, "finetune_busy", "%s", msg);
        break;
    case KD_FT_EXISTS:
        kd_reply_error(r, 409, "model_exists", "%s", msg);
        break;
    case KD_FT_INVALID:
        kd_refuse_invalid(app, r, msg);
        break;
    case KD_FT_STOPPED:
        kd_reply_error(r, 503, "draining", "%s", msg);
        break;
    case KD_FT_NOMEM:
        kd_reply_no_memory(r);
        break;
    }
done:
    request_free(&q);
    json_decref(body);
    json_decref(qy.opts);
    return KD_REPLIED;
}

kd_outcome kd_handle_finetune_list(kd_app *app, kd_request *r) {
    if (!admin(app, r)) return KD_REPLIED;
    kd_reply_json(r, 200, kd_ft_list(app->finetune));
    return KD_REPLIED;
}

/* ?stream=true (or 1) */
static int stream_param(void *ctx, const char *key, size_t key_len, const char *value,
                        size_t value_len) {
    if (key_len == 6 && !memcmp(key, "stream", 6) && value &&
        ((value_len == 4 && !memcmp(value, "true", 4)) || (value_len == 1 && value[0] == '1')))
        *(bool *)ctx = true;
    return 0;
}

static bool wants_stream(kd_request *r) {
    const char *accept = kd_request_header(r, "Accept");
    bool on = accept && strstr(accept, "text/event-stream");
    kd_request_query_each(r, stream_param, &on);
    return on;
}

kd_outcome kd_handle_finetune_get(kd_app *app, kd_request *r) {
    if (!admin(app, r)) return KD_REPLIED;
    const char *id = kd_request_path(r) + strlen("/finetune/");
    json_t *now = kd_ft_get(app->finetune, id);
    if (!now) {
        kd_reply_error(r, 404, "job_not_found",
                       "finetune job '%.64s' is not known (GET /finetune "
                       "lists them)",
                       id);
        return KD_REPLIED;
    }
    if (!wants_stream(r)) {
        kd_reply_json(r, 200, now);
        return KD_REPLIED;
    }
    json_decref(now);
    kd_request_suspend(r);
    kd_stream *s = kd_reply_stream(r, 200, "text/event-stream");
    if (!s) {
        kd_reply_no_memory(r);
        return KD_DEFERRED;
    }
    if (kd_ft_watch(app->finetune, id, s)) { /* made room for another since: gone */
        kd_stream_event(s, "error", "{\"error\":{\"code\":\"job_not_found\"}}");
        kd_stream_end(s);
    }
    return KD_DEFERRED;
}

kd_outcome kd_handle_finetune_delete(kd_app *app, kd_request *r) {
    if (!admin(app, r)) return KD_REPLIED;
    const char *id = kd_request_path(r) + strlen("/finetune/");
    json_t *answer = NULL;
    int rc = kd_ft_cancel(app->finetune, id, &answer);
    if (rc < 0)
        kd_reply_error(r, 404, "job_not_found", "finetune job '%.64s' is not known", id);
    else if (rc > 0)
        kd_reply_error(r, 409, "job_finished",
                       "finetune job %.64s has ended (%s): nothing to "
                       "cancel",
                       id, json_string_value(json_object_get(answer, "state")));
    else
        kd_reply_json(r, 202, json_incref(answer));
    json_decref(answer);
    return KD_REPLIED;
}
