/* series_json.h — many series in one forecast request, shared by `kronosd forecast` and
 * POST /forecast:
 *
 *   {"series": [{"candles": CANDLES, "future_timestamps"?: [...]}, ...],
 *    the other /forecast fields (horizon, samples, sampling, seed, quantiles, ...), shared}
 *
 * answered {"series": [<one /forecast response each>]}. Each series is parsed as the solo
 * request made of it and the shared fields, so each answer equals that request's; an error
 * names the series' index ("series[3].candles.close[17]: ...").
 */
#ifndef KD_SERIES_JSON_H
#define KD_SERIES_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "forecast_json.h"

#define KD_MAX_SERIES 1024

/* Whether body asks for many series. */
bool kd_is_series_request(const json_t *body);
/* body's "series": a non-empty array of at most KD_MAX_SERIES; how many, or -1 with a
 * message naming the field. */
int kd_series_list(const json_t *body, const json_t **list, char *err, size_t errlen);
/* The inputs, one a series (*out: [*n], free with kd_series_inputs_free); -1 with a message
 * naming the field on failure, *out then NULL. */
int kd_series_request_parse(const json_t *body, int model_max_context,
                            const kd_forecast_limits *limits, kd_forecast_input **out, int *n,
                            char *err, size_t errlen);
void kd_series_inputs_free(kd_forecast_input *in, int n);
/* {"series": [...]} from the finished forecasts, or NULL when out of memory. */
json_t *kd_series_response_json(const kd_forecast_input *in, const kr_forecast_result *res, int n);

#endif
