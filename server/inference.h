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

#endif
