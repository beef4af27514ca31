/* forecast_impl.h — state of one forecast, shared by the plan, the decoders and the
 * summary. Internal to core/. */
#ifndef KR_FORECAST_IMPL_H
#define KR_FORECAST_IMPL_H

#include "model.h"

typedef struct {
    int L, P, samples;
    kr_forecast_plan plan;
    uint64_t seed;
    kr_sampling sampling;
    kr_stamp *stamps;           /* [L + P] */
    int32_t *path_s1, *path_s2; /* [samples][L + P]: context tokens, then generated */
    float mean[KR_D_IN], std[KR_D_IN];
} fc_job;

uint64_t kr_path_seed(uint64_t seed, int path);

/* plan.c: the candle columns forecasting and tokenizing both read, present and finite */
int kr_check_columns(const kr_forecast_request *r, kr_error *err);
/* candles.c: the six float32 columns of upstream's DataFrame, volume/amount filled in */
void kr_raw_candles(const kr_forecast_request *r, float *x);
/* candles.c: the plan, the result's buffers, the stamps of every row, and the context
 * normalised and encoded into every path's first L tokens. */
int kr_forecast_job_init(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                         kr_forecast_result *res, kr_error *err);
void kr_forecast_job_free(fc_job *job);
/* summary.c */
int kr_forecast_alloc_result(const kr_forecast_request *r, kr_forecast_result *res, kr_error *err);
int kr_forecast_summarise(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                          kr_forecast_result *res, kr_error *err);

#endif
