/* evaluate.c — POST /evaluate (handlers.h): a walk-forward evaluation read by the intake
 * (jobs/intake.h) on the HTTP thread (a JSON body, or a text/csv body of candles with the
 * other fields in the query, as /forecast takes them), checked, then one evaluation job
 * (jobs/evaluate_job.h). */
#include "handlers.h"

#include <stdlib.h>

#include "evaluate_job.h"
#include "intake.h"
#include "series_json.h"
#include "submit.h"

/* "series": many aligned series evaluated in one job, with their cross-section. */
static kd_outcome evaluate_series(kd_app *app, kd_request *r, kd_intake *in) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    char msg[KD_MSG_MAX];
    kd_evaluate_series_input set;
    if (kd_evaluate_series_parse(in->body, &lim, &set, msg, sizeof msg) < 0) {
        kd_intake_end(in);
        kd_refuse_invalid(app, r, msg);
        return KD_REPLIED;
    }
    for (int i = 0; i < set.n; i++) /* a fitted calibration names it, a given one matches */
        set.in[i].req.model_id = in->md->fp_hex;
    const bool stream = in->stream;
    kd_intake_end(in);
    return kd_evaluate_job_submit_series(app, r, &set, stream);
}

/* The request from a JSON body, or from a CSV body and the query; -1 with in->refused. */
static int parse_evaluate(kd_app *app, kd_intake *in, kd_evaluate_input *ev) {
    const kd_forecast_limits lim = kd_forecast_limits_of(app);
    kd_refused *no = &in->refused;
    int rc = 0;
    if (!in->q.csv_in) {
        rc = kd_evaluate_request_parse(in->body, &lim, ev, no->msg, sizeof no->msg);
    } else {
        kd_owned_candles candles;
        if (kd_intake_csv_candles(in, 2, app->cfg.max_candles, &candles) < 0) return -1;
        rc = kd_evaluate_request_with_candles(in->q.opts, &candles, &lim, ev, no->msg,
                                              sizeof no->msg);
    }
    if (rc < 0) kd_refused_set_invalid(no, NULL); /* the parser's message */
    return rc;
}

kd_outcome kd_handle_evaluate(kd_app *app, kd_request *r) {
    kd_intake in;
    if (kd_intake_read(app, r, kd_evaluate_option_names(),
                       "format: an evaluation is answered as JSON only", &in) < 0) {
        kd_intake_end(&in);
        kd_refuse_with(app, r, &in.refused);
        return KD_REPLIED;
    }
    if (in.body && kd_is_series_request(in.body)) return evaluate_series(app, r, &in);
    kd_evaluate_input *ev = calloc(1, sizeof *ev);
    const int rc = ev ? parse_evaluate(app, &in, ev) : -1;
    kd_intake_end(&in);
    if (rc != 0) {
        if (!ev)
            kd_reply_no_memory(r);
        else if (rc < 0)
            kd_refuse_with(app, r, &in.refused);
        kd_evaluate_input_free(ev);
        free(ev);
        return KD_REPLIED;
    }
    /* a fitted calibration names it, a given one matches */
    ev->req.model_id = in.md->fp_hex;
    return kd_evaluate_job_submit(app, r, ev, in.stream);
}
