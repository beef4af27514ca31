/* evaluate_input.h — a parsed walk-forward evaluation request (evaluate_json.h parses it):
 * what the answer's writers read, below them all. */
#ifndef KD_EVALUATE_INPUT_H
#define KD_EVALUATE_INPUT_H

#include <stdbool.h>

#include "candles_json.h"
#include "kronos.h"

/* A parsed request. It owns the candles that req points into. */
typedef struct {
    kr_evaluate_request req;
    kd_owned_candles candles;
    long long timeout_ms; /* the server's deadline for it; 0: request-timeout */
    bool return_origins;
    kr_calibration calibration; /* a given "calibration" object, which req points at */
} kd_evaluate_input;

#endif
