/* fuzz_forecast_request.c — libFuzzer target: a /forecast request body, JSON text to a
 * validated kd_forecast_input, as the daemon parses it (kd_request_json's flags); the same
 * body as an /evaluate request too (it shares the candles and the forecast fields). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "evaluate_json.h"
#include "forecast_json.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!body) return 0;
    static const kd_forecast_limits limits = {2000, 256, 16};
    kd_forecast_input in;
    char err[512];
    kd_forecast_request_parse_limited(body, 512, &limits, &in, err, sizeof err);
    kd_forecast_input_free(&in);
    kd_evaluate_input ev;
    kd_evaluate_request_parse(body, &limits, &ev, err, sizeof err);
    kd_evaluate_input_free(&ev);
    json_decref(body);
    return 0;
}
