/* evaluate_job.h — the walk-forward evaluation job (POST /evaluate): every origin's
 * forecast a job of its own on the scheduler, so that they share its steps with each other
 * and with everything else in flight; admitted as one request (the core's plan checked,
 * then the origins' cost together against max-request-cost, the largest origin's KV bytes
 * against the pool), each origin's forecast scored as it ends, and the scores answered
 * when the last one has (the first failure by origin answers for all). Live mode grows one
 * series (kr_series) from the first window, origin by origin, each origin a fork of its
 * cache (so they run one at a time).
 *
 * The "series" form (evaluate_series_json.h) is one job of every series' origins, series
 * by series in one list: each series scored as it alone would be, then their
 * cross-section (kr_cross_section_score); in live mode each series is grown in turn.
 *
 * With stream (the client sent Accept: text/event-stream) the answer is a stream of
 * `event: progress` ({"done": k, "total": n, "elapsed_ms": x}) as origins end, then one
 * `event: result` with the JSON answer, or `event: error` with {"error": {"code",
 * "message", "status"}} when it failed after it started (refusals before are answered as
 * usual).
 */
#ifndef KD_EVALUATE_JOB_H
#define KD_EVALUATE_JOB_H

#include <stdbool.h>

#include "app.h"
#include "evaluate_json.h"
#include "evaluate_series_json.h"
#include "http.h"
#include "intake.h"

/* POST /evaluate's job for r, made of ei (its inputs taken: ei->set is empty after) and
 * submitted (kd_submit_for: refused, or out of memory, answered): KD_DEFERRED, or
 * KD_REPLIED. The "series" form is every series' origins in the one job (their cost
 * together against max-request-cost and as every origin's class), the series' alignment
 * checked with their plans (kr_cross_section_check), answered with the cross-section. */
kd_outcome kd_evaluate_submit(kd_app *app, kd_request *r, kd_evaluate_intake *ei);

#endif
