/* fuzz_token_request.c — libFuzzer target: the bodies of /generate, /tokenize and
 * /detokenize, each parser on the same JSON, with a small model's vocabulary. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "forecast_json.h"
#include "tokens_json.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!body) return 0;
    const kd_token_limits lim = {1 << 4, 1 << 4, 2000};
    char err[512];

    kd_generate_input g;
    kd_generate_request_parse(body, &lim, &g, err, sizeof err);
    kd_generate_input_free(&g);

    kd_detokenize_input d;
    kd_detokenize_request_parse(body, &lim, &d, err, sizeof err);
    kd_detokenize_input_free(&d);

    kd_owned_candles c;
    kd_candles_parse(json_is_object(body) ? json_object_get(body, "candles") : NULL, 1, 2000, &c,
                     err, sizeof err);
    kd_candles_free(&c);
    json_decref(body);
    return 0;
}
