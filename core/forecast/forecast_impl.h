/* forecast_impl.h — state of one forecast, shared by the plan, the decoders and the
 * summary. Internal to core/. */
#ifndef KR_FORECAST_IMPL_H
#define KR_FORECAST_IMPL_H

#include "model.h"
#include "nn.h"

typedef struct {
    int L, P, samples;
    kr_forecast_plan plan;
    uint64_t seed;
    kr_sampling sampling;
    kr_stamp *stamps;           /* [L + P] */
    int32_t *path_s1, *path_s2; /* [samples][L + P]: context tokens, then generated */
    float mean[KR_D_IN], std[KR_D_IN];
    /* from a series: the tokenizer decoder's keys and values of its first dec_len tokens
     * (0: none), which a summary window starting at 0 shares */
    kr_kv_view dec_kv;
    int dec_len;
} fc_job;

uint64_t kr_path_seed(uint64_t seed, int path);

/* plan.c: the candle columns forecasting and tokenizing both read, present and finite */
int kr_check_columns(const kr_forecast_request *r, kr_error *err);
/* candles.c: the six float32 columns of upstream's DataFrame, volume/amount filled in */
void kr_raw_candles(const kr_forecast_request *r, float *x);
/* candles.c: the plan, the result's buffers, the stamps of every row, and the context
 * normalised and encoded into every path's first L tokens (or, from a series, its tokens
 * and statistics as the series grew). */
int kr_forecast_job_init(const kr_model *m, const kr_forecast_request *r, const kr_series *series,
                         fc_job *job, kr_forecast_result *res, kr_error *err);
void kr_forecast_job_free(fc_job *job);
/* candles.c: raw[n][6] -> xn[n][6], with the request's pinned statistics or the rows' own
 * (written to mean, std) */
int kr_normalise_for(const kr_forecast_request *r, const float *raw, int n, float *xn,
                     float mean[KR_D_IN], float std[KR_D_IN], kr_error *err);
/* xn = clip((x - mean) / (std + 1e-5), -5, 5), row by row: each row its own */
void kr_normalise_rows(const float *x, int n, const float mean[KR_D_IN], const float std[KR_D_IN],
                       float *xn);
/* series.c: what a forecast from a series takes: the predictor cache of its window
 * (tokens from *start on), its pool, every candle's stamps */
kr_cache *kr_series_cache(const kr_series *s, int *start);
kr_pool *kr_series_pool(const kr_series *s);
const kr_stamp *kr_series_stamps(const kr_series *s);
/* the decoder cache: its length (0: none) and view */
int kr_series_decoder(const kr_series *s, kr_kv_view *kv);
/* summary.c */
int kr_forecast_alloc_result(const kr_forecast_request *r, kr_forecast_result *res, kr_error *err);
int kr_forecast_summarise(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                          kr_forecast_result *res, kr_error *err);

#endif
