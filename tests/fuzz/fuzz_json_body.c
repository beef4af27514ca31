/* fuzz_json_body.c — libFuzzer target: a request body read as the daemon reads it (its
 * candles from the text, json_body.h) must give the answer one jansson tree gives: the
 * same refusal and message, or the same candles. A difference aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../body_diff.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char why[1200];
    if (kd_body_diff((const char *)data, size, why, sizeof why) < 0) {
        fprintf(stderr, "the two readings differ: %s\n", why);
        abort();
    }
    return 0;
}
