/* forecast_impl.h — the forecast floor's internals: candles made ready for the model, the
 * plan's windows, a forecast's state (fc_state) shared by the plan, the decoders and the
 * summary, what a forecast takes from a series, and the reference path. Internal to core/;
 * the scheduler (sched/) and the drivers (drivers/) above use it, and the tests.
 *
 * The files of this floor, each using only those listed before it:
 *   candles.c    the columns checked, raw candles, normalisation, tokenize / detokenize
 *   series.c     live series (kr_series)
 *   plan.c       the request contract: its rules, windows, cost
 *   result.c     a result's buffers
 *   summary.c    mean, quantiles and the probability of a higher close from the paths
 *   job.c        a forecast's state made ready for either decoder
 *   reference.c  the plain reference path (no KV cache)
 */
#ifndef KR_FORECAST_IMPL_H
#define KR_FORECAST_IMPL_H

#include "kv_view.h"
#include "model.h"

/* ---- candles.c ------------------------------------------------------------------------- */

/* The candle columns that forecasting, tokenizing and series read: present and finite. */
int kr_check_columns(const kr_candles *c, kr_error *err);
/* ts[0..n) strictly increasing, else KR_E_INVALID naming path[i]. */
int kr_check_increasing(const int64_t *ts, int n, const char *path, kr_error *err);
/* Checks pinned statistics (nothing to check when norm is NULL or not pinned). */
int kr_check_normalisation(const kr_norm *norm, kr_error *err);
/* The six float32 columns of upstream's DataFrame, volume/amount filled in: x[n][6]. */
void kr_raw_candles(const kr_candles *c, float *x);
/* raw[n][6] -> xn[n][6], with the pinned statistics or the rows' own (written to mean,
 * std). norm may be NULL. */
int kr_normalise_for(const kr_norm *norm, const float *raw, int n, float *xn, float mean[KR_D_IN],
                     float std[KR_D_IN], kr_error *err);
/* The candles as normalised float32 rows: a new xn[n][6] (free it), with norm's statistics
 * when pinned, else their own; mean and std get the statistics used. NULL with err set on
 * failure (`what` names the caller in an out-of-memory message). */
float *kr_normalised(const kr_candles *c, const kr_norm *norm, float mean[KR_D_IN],
                     float std[KR_D_IN], const char *what, kr_error *err);
/* xn = clip((x - mean) / (std + 1e-5), -5, 5), row by row: each row its own */
void kr_normalise_rows(const float *x, int n, const float mean[KR_D_IN], const float std[KR_D_IN],
                       float *xn);

/* ---- series.c: what a forecast from a series takes ---------------------------------------- */

/* the predictor cache of its window (tokens from *start on), its model and pool, every
 * candle's stamps and tokens */
kr_cache *kr_series_cache(const kr_series *s, int *start);
const kr_model *kr_series_model(const kr_series *s);
kr_pool *kr_series_pool(const kr_series *s);
const kr_stamp *kr_series_stamps(const kr_series *s);
const int32_t *kr_series_tokens(const kr_series *s, int which); /* 1: s1, 2: s2 */
/* the tokenizer decoder's cache: its length (0: none) and view */
int kr_series_decoder(const kr_series *s, kr_kv_view *kv);

/* ---- plan.c ------------------------------------------------------------------------------ */

/* The window of step i (0-based) of a forecast with L context candles: its first token and
 * its length, min(L + i, max_context) tokens ending just before the token step i samples. */
int kr_forecast_window(const kr_forecast_plan *plan, int L, int i, int *start);
/* FLOPs of the products for `rows` rows attending over `keys` keys each, in one transformer
 * of n layers of width d and feed-forward ff (plan.c's estimate, shared with series.c). */
double kr_stack_flops(double rows, double keys, int n, int d, int ff);
/* plan.c: the cost of running positions [pos, pos + n) of a sequence through `layers`
 * tokenizer blocks (its attention counted twice), in predictor rows (a row's products
 * through the predictor's layers):
 * what a step's budget counts for the tokenizer's work; and the most of `left` positions
 * from pos that cost at most `rows` (at least one). */
double kr_tokenizer_cost_rows(const kr_model *m, int layers, int pos, int n);
int kr_tokenizer_fit(const kr_model *m, int layers, int pos, int left, double rows);
/* the same through the encoder's blocks: a context's candles [pos, pos + n) encoded */
double kr_encode_cost_rows(const kr_model *m, int pos, int n);
int kr_encode_fit(const kr_model *m, int pos, int left, double rows);

/* ---- result.c ---------------------------------------------------------------------------- */

/* The result's buffers for the request's horizon, samples and quantiles. */
int kr_forecast_alloc_result(const kr_forecast_request *r, kr_forecast_result *res, kr_error *err);

/* ---- a forecast's state (job.c, summary.c) ----------------------------------------------- */

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
    /* the context's encoding, which may run in chunks: encoded of L candles so far (L from
     * a series); until then xn [L][d_in] holds the normalised candles and, once a chunk has
     * run, enc_kv the encoder's keys and values of the encoded ones (one block of L) */
    int encoded;
    float *xn, *enc_kv;
} fc_state;

/* summary.c: a forecast's summary in parts (the scheduler's steps): every path's last
 * window decoded by the tokenizer (its shared prefix's keys and values a chunk at a time,
 * then the paths a group at a time; or, without a shared prefix, each path's window
 * alone), then the answer. */
typedef struct {
    float *rows; /* [S][P][d_in]: the decoded last P rows of every path */
    enum { SUM_SERIES, SUM_PREFIX, SUM_WHOLE } mode;
    int start, np;               /* the last window: from token start, np tokens shared */
    int prefix_done, paths_done; /* positions of the prefix in kv; paths decoded */
    float *kv_mem, **kv_blocks;  /* SUM_PREFIX: the prefix's keys and values */
    kr_kv_view kv;
    int32_t *g1, *g2; /* [S][P]: every path's generated tokens (the windows' own part) */
    float *dec;       /* SUM_WHOLE: one window's rows */
} fc_summary;

/* shared: the cached path (the window's context part decoded once for all paths); else
 * each path's window alone, as the reference path does. */
int kr_summary_begin(const kr_model *m, const fc_state *job, bool shared, fc_summary *sum,
                     kr_error *err);
/* Decodes what is left, as much as costs about `rows` (at least one part); *cost: what it
 * cost, in rows (kr_tokenizer_cost_rows). 1 when every row is decoded, 0 when more is
 * left, -1 on error. */
int kr_summary_advance(const kr_model *m, const fc_state *job, fc_summary *sum, double rows,
                       double *cost, kr_error *err);
/* What is left of it, in rows. */
double kr_summary_left(const kr_model *m, const fc_state *job, const fc_summary *sum);
/* The answer from the decoded rows: denormalised, mean, quantiles, P(up), paths. */
int kr_summary_finish(const kr_forecast_request *r, const fc_state *job, const fc_summary *sum,
                      kr_forecast_result *res, kr_error *err);
void kr_summary_free(fc_summary *sum);
/* summary.c: all of it at once. */
int kr_forecast_summarise(const kr_model *m, const kr_forecast_request *r, fc_state *job,
                          kr_forecast_result *res, kr_error *err);

/* job.c: the seed of a path's own random stream */
uint64_t kr_path_seed(uint64_t seed, int path);
/* job.c: the plan, the result's buffers, the stamps of every row, and the context
 * normalised (or, from a series, its tokens and statistics as the series grew, already
 * encoded). */
int kr_forecast_job_init(const kr_model *m, const kr_forecast_request *r, const kr_series *series,
                         fc_state *job, kr_forecast_result *res, kr_error *err);
/* job.c: the context's next n candles encoded (the tokens encoding it whole would give:
 * the encoder is causal and every row's arithmetic its own); once all L are, every path's
 * first L tokens are set and the encoding's memory is returned. */
int kr_forecast_job_encode(const kr_model *m, fc_state *job, int n, kr_error *err);
void kr_forecast_job_free(fc_state *job);

/* ---- reference.c ------------------------------------------------------------------------- */

/* The whole forecast on the plain reference path (req->use_cache false): each path alone,
 * its window recomputed at every step, then the same summary as the cached path. */
int kr_forecast_reference(const kr_model *m, const kr_forecast_request *req,
                          kr_forecast_result *res, kr_error *err);

/* Upstream's per-column normalisation of x[n][6] raw float32 candles, as numpy computes it
 * on float32 arrays: mean and population std per column, xn = clip((x - mean) / (std +
 * 1e-5), -5, 5). */
int kr_normalise(const float *x, int n, float *xn, float mean[KR_D_IN], float std[KR_D_IN],
                 kr_error *err);

#endif
