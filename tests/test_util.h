/* test_util.h — fixture loading and comparisons shared by the tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include "kronos.h"

#include <jansson.h>
#include <stdbool.h>

#ifndef KR_TEST_DATA
#error "KR_TEST_DATA must name tests/data"
#endif

typedef struct {
    const char *name;
    kr_forecast_request req;
    int64_t *timestamps, *future;
    double *cols[KR_D_IN];
} tu_case;

kr_model *tu_load_tiny(int max_context);
kr_model *tu_load_tiny_as(int max_context, kr_precision weights); /* weights f32 or bf16 */
json_t *tu_load_golden(void);
/* A golden case as a greedy request (top_k = 1, T = 1, one path). */
int tu_case_load(json_t *c, tu_case *tc);
void tu_case_free(tu_case *tc);
int64_t tu_wall(const char *iso); /* "YYYY-MM-DDTHH:MM:SS" -> wall-clock seconds */
/* n five-minute candles of a random walk from 100 (the same for the same seed): ts[n], and
 * cols[c][n] for every column. */
void tu_random_candles(uint32_t seed, int n, int64_t *ts, double *const cols[KR_D_IN]);

/* Largest |a - b| relative to the fixture's largest |b| (logits, normalised values: their
 * scale is the array's, and single entries may sit near zero). */
double tu_max_rel_vector(const float *a, json_t *b, int n);
double tu_max_rel_matrix(const float *a, json_t *b, int rows, int cols);
/* Largest |a - b| / max(|b|, 1e-3 · max|b|): element-wise, for forecasts in price units. */
double tu_max_rel_doubles(const double *a, json_t *b, int n);

/* n tokens and their stamps, five minutes apart: s1[i] = i * m1 % 1024, s2[i] = i * m2 % 1024
 * (tokens every fixture's vocabulary holds). */
void tu_tokens(int32_t *s1, int32_t *s2, kr_stamp *st, int n, int m1, int m2);
/* Two forecasts' results are the same bits: timestamps, means, paths, quantiles, P(up) and
 * the normalisation (a cmocka assertion). */
void tu_same_result(const kr_forecast_result *a, const kr_forecast_result *b);
/* A forecast of a random walk (90 candles, horizon 12, 4 sampled paths, seed 7), cached or
 * on the reference path; its usage names the model's weights mode (a cmocka assertion). */
void tu_walk_forecast(const kr_model *m, bool use_cache, kr_forecast_result *res);
/* Two forecasts' sample paths are the same bits (a cmocka assertion). */
void tu_same_paths(const kr_forecast_result *a, const kr_forecast_result *b);

#endif
