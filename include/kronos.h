/* kronos.h — public API of the Kronos decoder library (core/): what a program embedding it
 * needs. Model, KV pool and caches, candles, forecasts, candle series, token generation,
 * the step scheduler, errors.
 *
 * The library loads a Kronos tokenizer + predictor in the released Hugging Face layout
 * and computes what the upstream Python implementation computes. It knows nothing of
 * HTTP or of request JSON; the server and the one-shot command translate to these calls.
 *
 * Conventions, kept by every function here:
 * - A function that can fail returns 0 (KR_OK) on success and -1 on failure, with the code
 *   and a message saying what went wrong and where in a kr_error (which may be NULL).
 *   Functions returning a pointer return NULL on failure, with the kr_error filled.
 * - Batch functions (kr_forecast_batch) return 0 when every item succeeded and -1 when any
 *   failed; errs[i] says how item i ended (code KR_OK: success).
 * - A loaded model is read-only and may be shared by any number of threads.
 *
 * The API in parts, each including the parts it builds on: kronos_model.h (errors, threads,
 * kernels, the model, the KV pool and caches, candles), kronos_forecast.h (forecasts, candle
 * series), kronos_calibration.h, kronos_evaluate.h (walk-forward and cross-sectional
 * evaluation), kronos_sched.h (the step scheduler). Fine-tuning: kronos_train.h.
 *
 * Internals (the kernels, the weights, test hooks such as a forecast's windows, a series'
 * tokens, kr_normalise, kr_cache_s1_logits, kr_generate_batch, kr_forecast_series) are in
 * the internal headers of core/'s floors (core/base/base.h says which); only the tests and
 * core/ itself include them.
 */
#ifndef KRONOS_H
#define KRONOS_H

#include "kronos_model.h"
#include "kronos_forecast.h"
#include "kronos_calibration.h"
#include "kronos_evaluate.h"
#include "kronos_sched.h"

#endif
