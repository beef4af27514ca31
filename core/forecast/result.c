/* result.c — a forecast result's buffers: allocated for a request's horizon, samples and
 * quantiles, and freed. */
#include "forecast_impl.h"

#include <stdlib.h>
#include <string.h>

void kr_forecast_result_free(kr_forecast_result *res) {
    if (!res) return;
    KR_FREE_ALL(res->timestamps, res->mean, res->paths, res->quantiles, res->prob_close_up);
    memset(res, 0, sizeof *res);
}

int kr_forecast_alloc_result(const kr_forecast_request *r, kr_forecast_result *res, kr_error *err) {
    int P = r->horizon;
    memset(res, 0, sizeof *res);
    res->horizon = P;
    res->samples = r->samples;
    res->n_quantiles = r->n_quantiles;
    memcpy(res->quantile_levels, r->quantiles, sizeof res->quantile_levels);
    res->timestamps = malloc((size_t)P * sizeof *res->timestamps);
    res->mean = malloc((size_t)KR_D_IN * P * sizeof *res->mean);
    res->prob_close_up = malloc((size_t)P * sizeof *res->prob_close_up);
    if (r->n_quantiles)
        res->quantiles = malloc((size_t)r->n_quantiles * KR_D_IN * P * sizeof *res->quantiles);
    if (!res->timestamps || !res->mean || !res->prob_close_up ||
        (r->n_quantiles && !res->quantiles)) {
        kr_forecast_result_free(res);
        return kr_fail_code(err, KR_E_NO_MEMORY, "forecast: out of memory for a horizon of %d", P);
    }
    return 0;
}
