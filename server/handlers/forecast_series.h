/* forecast_series.h — POST /forecast with "series" (series_json.h): many series in one
 * request, computed together. */
#ifndef KD_FORECAST_SERIES_H
#define KD_FORECAST_SERIES_H

#include <jansson.h>

#include "app.h"
#include "http.h"

/* body: the parsed request (borrowed), which has "series". */
kd_outcome kd_handle_forecast_series(kd_app *app, kd_request *r, const json_t *body);

#endif
