/* inference.h — the endpoints that run the model: each parses and checks its request on the
 * HTTP thread (so bad requests never wait in the queue), then defers the model work to a
 * worker, which writes the reply. */
#ifndef KD_INFERENCE_H
#define KD_INFERENCE_H

#include "app.h"
#include "http.h"

kd_outcome kd_handle_forecast(kd_app *app, kd_request *r);
kd_outcome kd_handle_generate(kd_app *app, kd_request *r);
kd_outcome kd_handle_tokenize(kd_app *app, kd_request *r);
kd_outcome kd_handle_detokenize(kd_app *app, kd_request *r);

/* ---- shared with the other endpoints that forecast (candle_sessions.c, forecast_series.c) */

/* A failed core call answered by its error code: 400, 422, 503, 504, 499 or 500. */
void kd_reply_core_error(kd_request *r, const char *what, const kr_error *e);
/* Whether a forecast's plan can ever run here; false after replying 400 or 422. */
bool kd_admit_forecast(kd_app *app, kd_request *r, const kr_forecast_request *q);
/* When a request must be answered by: request-timeout from now, or timeout_ms (> 0). */
double kd_deadline_of(const kd_app *app, long long timeout_ms);

/* The core's cancel check for a deferred request (kr_cancel{kd_watch_check, &watch}): its
 * deadline, or its client gone. */
typedef struct {
    kd_request *r;
    double deadline;
} kd_request_watch;
int kd_watch_check(void *ctx);

#endif
