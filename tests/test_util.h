/* test_util.h — fixture loading and comparisons shared by the tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include "kronos.h"
#include "layers.h" /* kr_linear */

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
/* The golden fixture's first case into tc (a cmocka assertion); the fixture, to json_decref
 * after tu_case_free. */
json_t *tu_first_case(tu_case *tc);
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
/* Largest |a - b| relative to the largest |b| (NaN compares as the worst). */
double tu_max_rel_floats(const float *a, const float *b, int n);

/* n tokens and their stamps, five minutes apart: s1[i] = i * m1 % 1024, s2[i] = i * m2 % 1024
 * (tokens every fixture's vocabulary holds). */
void tu_tokens(int32_t *s1, int32_t *s2, kr_stamp *st, int n, int m1, int m2);
/* Two forecasts' results are the same bits: timestamps, means, paths, quantiles, P(up) and
 * the normalisation (a cmocka assertion). */
void tu_same_result(const kr_forecast_result *a, const kr_forecast_result *b);
/* A forecast of a random walk (90 candles, horizon 6, 4 sampled paths, seed 7), cached or
 * on the reference path; its usage names the model's weights and kv modes (cmocka
 * assertions). */
void tu_walk_forecast(const kr_model *m, bool use_cache, kr_forecast_result *res);
/* Two forecasts' sample paths are the same bits (a cmocka assertion). */
void tu_same_paths(const kr_forecast_result *a, const kr_forecast_result *b);

/* Random-weight models from kronos-mkmodel (KR_MKMODEL names it), one a temporary folder:
 * dirs[f] holds the tiny preset at d_model 128 (tokenizer 64), seed `seed`, written with
 * mkmodel's flags `--dtype flags[f]` ("bf16", "f32 --kv-shift"). 0, or -1 said on stderr. */
int tu_mkmodels(char (*dirs)[64], const char *const *flags, int n, int seed);
int tu_rmdirs(char (*dirs)[64], int n); /* removes the folders; 0 or -1 */
/* dir/tokenizer and dir/predictor at max_context 512, weights and kv as given (NULL said). */
kr_model *tu_load_dir(const char *dir, kr_precision weights, kr_precision kv);

/* Logits of the sequence tu_tokens(n_tok + 1 stamps, 37, 91), two ways each, asserted to
 * agree: s1 after the whole sequence in one chunk and after its last `tail` tokens one by
 * one; `paths` forks each given its own token, s1 and s2 batched and each fork alone.
 * out holds TU_LOGITS_FLOATS(paths): [s1 | s1 by tokens | forks' s1 | forks' s2]. */
#define TU_VOCAB                1024
#define TU_LOGITS_FLOATS(paths) ((2 + 2 * (paths)) * TU_VOCAB)
void tu_fork_logits(const kr_model *m, int n_tok, int tail, int paths, float *out);
/* On every kernel level the CPU has: tu_fork_logits of m (and of same_as, the same bits,
 * unless NULL), the same bits as the first level's (left in first); tu_walk_forecast cached
 * equal to the reference path and to the first level's. Back at the best level after;
 * returns how many levels ran. */
int tu_levels_agree(const kr_model *m, const kr_model *same_as, int n_tok, int tail, int paths,
                    float *first);
/* Largest |a[i] - ref[i]| over n, and in *scale the largest |ref[i]|. */
double tu_moved(const float *ref, const float *a, int n, double *scale);
/* The next of a linear congruential sequence, uniform in [-1, 1). */
float tu_lcg(uint32_t *state);

/* On every kernel level the CPU has, l's product of x[T][l->in] is ref[T][l->out] bit for bit:
 * the batch, every (T / 3 + 1)th row alone, y += product onto y[i] = i (the product rounded
 * first) and, when l->out is a multiple of 32, two parts of l->out / 2 columns (cmocka
 * assertions). Back at the best level after; returns how many levels ran, at least one. */
int tu_linear_every_level(const kr_linear *l, const float *x, int T, const float *ref);

/* Outputs compared across kernel levels: the first level's recorded, each later level's the
 * same bits in the same order. tu_level_log_start at each level (record on the first: what
 * an earlier run recorded is dropped), tu_level_log_check for each output, tu_level_log_done
 * at the level's end (every recorded output compared); tu_level_log_free once. */
typedef struct {
    float *x;
    size_t len, at;
    bool record;
} tu_level_log;
void tu_level_log_start(tu_level_log *log, bool record);
void tu_level_log_check(tu_level_log *log, const float *x, size_t n);
void tu_level_log_done(const tu_level_log *log);
void tu_level_log_free(tu_level_log *log);

/* rc is -1 and err is KR_E_INVALID with a message that starts with field (cmocka). */
void tu_expect_invalid(int rc, const kr_error *err, const char *field);

/* The hand-made rolling case of the calibration tests: eight candles a minute apart, lookback
 * 2, horizon 1, stride 1: origins 2..7 (k = 0..5), quantiles 0.1, 0.5 and 0.9, warm-up 2,
 * model "tiny". close as given (a test may change it), every other column 1 but open, which
 * is close when open_is_close. Origin k's forecast is one path at its last close (P(up) 0),
 * for open too when open_is_close; high and low at 0. */
typedef struct {
    int64_t ts[8];
    double close[8], ones[8];
    bool open_is_close;
} tu_hand8;
typedef struct {
    double mean[KR_D_IN], paths[KR_D_IN], q[3 * KR_D_IN], up[1];
    kr_forecast_result res;
} tu_hand8_forecast;
void tu_hand8_init(tu_hand8 *h, bool open_is_close);
kr_candles tu_hand8_candles(const tu_hand8 *h, int n); /* the first n candles */
void tu_hand8_request(const tu_hand8 *h, kr_evaluate_request *r);
void tu_hand8_origin(const tu_hand8 *h, int k, tu_hand8_forecast *f);
/* The evaluation of r (six origins) given every origin's hand-made forecast (cmocka). */
void tu_hand8_run(const kr_model *m, const tu_hand8 *h, const kr_evaluate_request *r,
                  kr_evaluation *ev);
/* r evaluated rolling, the object it fitted copied into obj, r then made to calibrate by obj
 * (KR_CALIB_GIVEN); obj to kr_calibration_free. */
void tu_hand8_fit(const kr_model *m, const tu_hand8 *h, kr_evaluate_request *r,
                  kr_calibration *obj);
/* Origin k's forecast calibrated by obj, as /forecast would (cmocka). */
void tu_hand8_calibrate(const tu_hand8 *h, const kr_calibration *obj, int k, kr_calibrated *out);
#endif
