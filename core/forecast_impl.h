/* forecast_impl.h — state of one forecast, shared by the reference and cached decoders.
 * Internal to core/. */
#ifndef KR_FORECAST_IMPL_H
#define KR_FORECAST_IMPL_H

#include "model.h"

typedef struct {
    int L, P, samples, max_context;
    uint64_t seed;
    kr_sampling sampling;
    kr_stamp *stamps;           /* [L + P] */
    int32_t *path_s1, *path_s2; /* [samples][L + P]: context tokens, then generated */
    float mean[KR_D_IN], std[KR_D_IN];
} fc_job;

uint64_t kr_path_seed(uint64_t seed, int path);

#endif
