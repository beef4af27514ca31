/* evaluate.c — POST /evaluate (handlers.h): a walk-forward evaluation read and checked on
 * the HTTP thread (a JSON body, or a text/csv body of candles with the other fields in the
 * query, as /forecast takes them), then one evaluation job (jobs/evaluate_job.h). */
#include "handlers.h"

#include <stdlib.h>
#include <string.h>

#include "evaluate_job.h"
#include "inputs.h"
#include "series_json.h"
#include "submit.h"

/* "series": many aligned series evaluated in one job, with their cross-section. */
static kd_outcome evaluate_series(kd_app *app, kd_request *r, const json_t *body, bool stream) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    char msg[KD_MSG_MAX];
    kd_evaluate_series_input set;
    if (kd_evaluate_series_parse(body, &lim, &set, msg, sizeof msg) < 0) {
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    for (int i = 0; i < set.n; i++) /* a fitted calibration names it, a given one matches */
        set.in[i].req.model_id = kd_request_model(r)->fp_hex;
    return kd_evaluate_job_submit_series(app, r, &set, stream);
}

/* The request from a JSON body (read once, by the caller), or from a CSV body and the
 * query; -1 with a message. */
static int parse_evaluate(kd_app *app, kd_request *r, const kd_query *q, const json_t *body,
                          kd_evaluate_input *in, char *msg, size_t msglen) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    if (!q->csv_in) return kd_evaluate_request_parse(body, &lim, in, msg, msglen);
    kd_owned_candles candles;
    if (kd_body_csv_candles(r, 2, app->cfg.max_candles, &candles, msg, msglen) < 0) return -1;
    return kd_evaluate_request_with_candles(q->opts, &candles, &lim, in, msg, msglen);
}

kd_outcome kd_handle_evaluate(kd_app *app, kd_request *r) {
    const char *known[32] = {"format"}; /* and the request's fields but candles */
    const char *const *names = kd_evaluate_option_names();
    char msg[KD_MSG_MAX];
    for (int i = 0, n = 1; names[i] && n < 31; i++)
        known[n++] = names[i];
    kd_query q = {.known = known};
    if (!kd_read_query(app, r, &q, msg, sizeof msg)) return KD_REPLIED;
    if (q.csv_out) {
        json_decref(q.opts);
        kd_refuse_invalid(app, r, "format: an evaluation is answered as JSON only");
        return KD_REPLIED;
    }
    const char *accept = kd_request_header(r, "Accept");
    const bool stream = accept && strstr(accept, "text/event-stream");
    json_t *body = NULL;
    if (!q.csv_in && !(body = kd_model_request_json(app, r))) {
        json_decref(q.opts); /* replied and counted */
        return KD_REPLIED;
    }
    if (!kd_pick_model(app, r)) {
        json_decref(body);
        json_decref(q.opts);
        return KD_REPLIED;
    }
    if (body && kd_is_series_request(body)) {
        const kd_outcome out = evaluate_series(app, r, body, stream);
        json_decref(body);
        json_decref(q.opts);
        return out;
    }
    kd_evaluate_input *in = calloc(1, sizeof *in);
    const int rc = in ? parse_evaluate(app, r, &q, body, in, msg, sizeof msg) : -1;
    json_decref(body);
    json_decref(q.opts);
    if (rc != 0) {
        if (!in)
            kd_reply_no_memory(r);
        else if (rc < 0)
            kd_refuse_invalid(app, r, msg);
        kd_evaluate_input_free(in);
        free(in);
        return KD_REPLIED;
    }
    /* a fitted calibration names it, a given one matches */
    in->req.model_id = kd_request_model(r)->fp_hex;
    return kd_evaluate_job_submit(app, r, in, stream);
}
