/* forecast_job.h — the one forecast job: a stateless /forecast, a "series" request (many
 * forecasts in one) and a candle session's forecast are all n forecasts (n = 1 but for
 * series), admitted alike (each plan checked, then their cost together), run alike (on the
 * scheduler, each forecast a job of its own so they share its steps; the reference path,
 * use_cache false, on a worker) and answered alike (the first failure by index answers for
 * all, else the forecasts as JSON, CSV or the series list).
 */
#ifndef KD_FORECAST_JOB_H
#define KD_FORECAST_JOB_H

#include "app.h"
#include "forecast_json.h"
#include "http.h"
#include "intake.h"

typedef struct kd_forecast_work kd_forecast_work;

/* A job of fi's forecasts, on fi's model (the job takes fi->in: fi->in is NULL after).
 * NULL when fi was refused or memory ran out (fi->in freed); kd_forecast_work_submit
 * answers either. */
kd_forecast_work *kd_forecast_work_new(kd_app *app, kd_forecast_intake *fi);
/* A session forecast: the forecast continues series (in[0].req already points at its
 * candles), and session (busy for this request) is released when the job ends. */
void kd_forecast_work_on_series(kd_forecast_work *f, kd_session *session, const kr_series *series);
/* Called once every forecast succeeded, before the answer is made and while a session
 * forecast's session is still held: a session keeps what it learns from its forecasts. -1
 * with err fails the request. */
typedef int (*kd_forecast_done_fn)(kd_app *app, void *ctx, kd_forecast_input *in,
                                   const kr_forecast_result *res, kr_error *err);
void kd_forecast_work_on_done(kd_forecast_work *f, kd_forecast_done_fn fn, void *ctx);
/* POST /forecast's job for r, made of fi and submitted: kd_forecast_work_new, then
 * kd_forecast_work_submit. */
kd_outcome kd_forecast_submit(kd_app *app, kd_request *r, kd_forecast_intake *fi);
/* The job f for r (kd_submit_for: refused, or f NULL, answered): KD_DEFERRED, or
 * KD_REPLIED after a refusal (the job then freed). */
kd_outcome kd_forecast_work_submit(kd_app *app, kd_request *r, kd_forecast_work *f,
                                   const kd_refused *refused);

#endif
