/* evaluate.c — POST /evaluate (handlers.h): a walk-forward evaluation read and built by the
 * intake (jobs/intake.h) on the HTTP thread (a JSON body, or a text/csv body of candles with
 * the other fields in the query, as /forecast takes them), then one evaluation job
 * (jobs/evaluate_job.h), which the submit path refuses or hands over. */
#include "handlers.h"

#include "evaluate_job.h"
#include "intake.h"

kd_outcome kd_handle_evaluate(kd_app *app, kd_request *r) {
    kd_evaluate_intake ei;
    kd_intake_evaluate(app, r, &ei); /* refused: ei.refused says why */
    return kd_evaluate_submit(app, r, &ei);
}
