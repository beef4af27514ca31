/* forecast.c — POST /forecast (handlers.h): the request read and built by the intake
 * (jobs/intake.h) on the HTTP thread, then one forecast job (jobs/forecast_job.h) for a
 * single series or many, which the submit path refuses or hands over. */
#include "handlers.h"

#include "forecast_job.h"
#include "intake.h"

kd_outcome kd_handle_forecast(kd_app *app, kd_request *r) {
    kd_forecast_intake fi;
    kd_intake_forecast(app, r, &fi); /* refused: fi.refused says why */
    return kd_forecast_submit(app, r, &fi);
}
