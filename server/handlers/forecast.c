/* forecast.c — POST /forecast (handlers.h): the request read and checked on the HTTP
 * thread, then one forecast job (jobs/forecast_job.h) for a single series or many. */
#include "handlers.h"

#include <stdlib.h>

#include "candles_csv.h"
#include "forecast_job.h"
#include "inputs.h"
#include "series_json.h"
#include "submit.h"

/* "series": every series a forecast of one job, answered together. */
static kd_outcome forecast_series(kd_app *app, kd_request *r, const json_t *body, bool csv_out) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    char msg[KD_MSG_MAX];
    kd_forecast_input *in = NULL;
    int n = 0;
    if (csv_out) {
        kd_refuse_invalid(app, r,
                          "format: csv answers one series; a \"series\" request answers JSON");
        return KD_REPLIED;
    }
    if (kd_series_request_parse(body, kr_model_max_context(kd_request_model(r)->m), &lim, &in, &n,
                                msg, sizeof msg) < 0) {
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    kd_forecast_work *f = kd_forecast_work_new(app, r, in, n, KD_ANSWER_SERIES);
    return f ? kd_forecast_work_submit(f) : KD_REPLIED;
}

/* The request from a JSON body, or from a CSV body and the query; -1 with a message. */
static int parse_forecast(kd_app *app, kd_request *r, const kd_query *q, const json_t *body,
                          kd_forecast_input *in, char *msg, size_t msglen) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    const int mc = kr_model_max_context(kd_request_model(r)->m); /* the picked model's */
    if (!q->csv_in) return kd_forecast_request_parse_limited(body, mc, &lim, in, msg, msglen);
    kd_owned_candles candles;
    if (kd_body_csv_candles(r, 2, app->cfg.max_candles, &candles, msg, msglen) < 0) return -1;
    return kd_forecast_request_with_candles(q->opts, &candles, mc, &lim, in, msg, msglen);
}

kd_outcome kd_handle_forecast(kd_app *app, kd_request *r) {
    const char *known[32] = {"format"}; /* and the request's fields but candles */
    const char *const *names = kd_forecast_option_names();
    char msg[KD_MSG_MAX];
    for (int i = 0, n = 1; names[i] && n < 31; i++)
        known[n++] = names[i];
    kd_query q = {.known = known};
    if (!kd_read_query(app, r, &q, msg, sizeof msg)) return KD_REPLIED;
    json_t *body = NULL; /* a JSON body, parsed once */
    if (!q.csv_in && !(body = kd_model_request_json(app, r))) {
        json_decref(q.opts);
        return KD_REPLIED;
    }
    if (!kd_pick_model(app, r)) {
        json_decref(body);
        json_decref(q.opts);
        return KD_REPLIED;
    }
    if (body && kd_is_series_request(body)) {
        const kd_outcome out = forecast_series(app, r, body, q.csv_out);
        json_decref(body);
        json_decref(q.opts);
        return out;
    }
    kd_forecast_input *in = calloc(1, sizeof *in);
    const int bad = !in || parse_forecast(app, r, &q, body, in, msg, sizeof msg) < 0;
    json_decref(body);
    json_decref(q.opts);
    if (bad) {
        if (in)
            kd_refuse_invalid(app, r, msg);
        else
            kd_reply_no_memory(r);
        kd_series_inputs_free(in, in ? 1 : 0);
        return KD_REPLIED;
    }
    if (q.csv_out && in->calibration) {
        kd_refuse_invalid(app, r, "format: a calibrated forecast is answered as JSON only");
        kd_series_inputs_free(in, 1);
        return KD_REPLIED;
    }
    kd_forecast_work *f =
        kd_forecast_work_new(app, r, in, 1, q.csv_out ? KD_ANSWER_CSV : KD_ANSWER_JSON);
    return f ? kd_forecast_work_submit(f) : KD_REPLIED;
}
