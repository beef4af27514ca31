/* kronos.h — public API of the Kronos decoder library (core/): what a program embedding it
 * needs. Model, KV pool and caches, candles, forecasts, candle series, token generation,
 * the step scheduler, errors.
 *
 * The library loads a Kronos tokenizer + predictor in the released Hugging Face layout
 * and computes what the upstream Python implementation computes. It knows nothing of
 * HTTP or of request JSON; the server and the one-shot command translate to these calls.
 *
 * Conventions, kept by every function here:
 * - A function that can fail returns 0 (KR_OK) on success and -1 on failure, with the code
 *   and a message saying what went wrong and where in a kr_error (which may be NULL).
 *   Functions returning a pointer return NULL on failure, with the kr_error filled.
 * - Batch functions (kr_forecast_batch) return 0 when every item succeeded and -1 when any
 *   failed; errs[i] says how item i ended (code KR_OK: success).
 * - A loaded model is read-only and may be shared by any number of threads.
 *
 * Internals (the kernels, the weights, test hooks such as a forecast's windows, a series'
 * tokens, kr_normalise, kr_cache_s1_logits, kr_generate_batch, kr_forecast_series) are in
 * the internal headers of core/'s floors (core/base/base.h says which); only the tests and
 * core/ itself include them.
 */
#ifndef KRONOS_H
#define KRONOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kronos_version.h" /* KR_VERSION, generated from meson's project(version) */

#ifdef __cplusplus
extern "C" {
#endif

#define KR_ERR_MAX 512
#define KR_D_IN    6 /* open, high, low, close, volume, amount */

/* What kind of failure, for callers that react differently (a server answering 400 or
 * 422, evicting an idle session when the pool is exhausted, refusing what can never fit). */
typedef enum {
    KR_OK = 0,           /* success */
    KR_E_FAILED = 1,     /* anything else: a bad file, a broken invariant */
    KR_E_POOL_EXHAUSTED, /* the KV pool has no free block left now */
    KR_E_CAPACITY,       /* a cache would outgrow its capacity (max_context) */
    KR_E_INVALID,        /* a request field breaks a rule; the message starts with its path */
    KR_E_TOO_LARGE,      /* a valid request that can never fit this model's or pool's limits */
    KR_E_NO_MEMORY,      /* malloc failed */
    KR_E_CANCELLED,      /* the caller's cancel check said stop (the client left) */
    KR_E_DEADLINE,       /* the caller's cancel check said the deadline passed */
    KR_E_COUNT           /* not a code: how many there are, for tables indexed by code */
} kr_error_code;

typedef struct {
    kr_error_code code;
    char msg[KR_ERR_MAX];
} kr_error;

/* Formats a message into err (if err is not NULL), sets its code, returns -1. A caller of
 * the library may use them for its own errors too. */
int kr_fail_code(kr_error *err, kr_error_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with code KR_E_FAILED. */
#define kr_fail(err, ...) kr_fail_code((err), KR_E_FAILED, __VA_ARGS__)

/* Threads the core computes with (its own pool; no result depends on the thread count).
 * Call before anything else in the library; 0 means one per online CPU. Returns -1 once the
 * pool has started. */
int kr_set_threads(int n);
int kr_threads(void);

/* The instruction set of the core's own kernels, chosen at first use: the best the CPU
 * has, or a lower one named by the environment variable KRONOS_SIMD (for tests). Every
 * level computes the same bits. amx is avx512 plus AMX-INT8 tiles for int8 weights (the
 * CPU has AVX512-VNNI, AMX-TILE and AMX-INT8, and the OS grants the tile state); float32
 * and bf16 run their avx512 kernels there. */
typedef enum { KR_SIMD_GENERIC, KR_SIMD_AVX2, KR_SIMD_AVX512, KR_SIMD_AMX } kr_simd;
kr_simd kr_simd_level(void);
const char *kr_simd_name(kr_simd s); /* "generic", "avx2", "avx512", "amx" */
/* The product weights = bf16 runs at a level: "vdpbf16ps", "fma-ftz" (two FMAs a pair
 * under MXCSR's flush to zero, where vdpbf16ps is missing or slower and the CPU's flush is the
 * contract's; the environment variable KRONOS_BF16_PRODUCT=vdpbf16ps|fma picks one the CPU
 * has), "avx2-fma" (FMAs, each sum near zero checked) or "c". Each computes the same bits. */
const char *kr_bf16_product_name(kr_simd level);
/* The integer product weights = int8 runs at a level: "tdpbsud" (AMX-INT8 tiles, a step of
 * fewer than 8 rows on vpdpbusd), "vpdpbusd" (AVX512-VNNI), "avx-vnni" (vpdpbusd on 8 lanes;
 * the environment variable KRONOS_Q8_PRODUCT=vpmaddubsw asks for the other), "vpmaddubsw" or
 * "c". Each computes the same exact integer sums, so the same bits. */
const char *kr_q8_product_name(kr_simd level);

/* A caller's way to stop long work between steps: check returns 0 to go on, or
 * KR_E_CANCELLED / KR_E_DEADLINE to stop, and the work then fails with that code, its
 * pool memory returned. Called on the thread running the work, once per decoding step;
 * a NULL check never stops. */
typedef struct {
    int (*check)(void *ctx);
    void *ctx;
} kr_cancel;

/* ---- model ------------------------------------------------------------------------- */

typedef struct {
    int d_in, d_model, n_heads, ff_dim;
    int n_enc_layers, n_dec_layers; /* as in config.json: blocks = n - 1 */
    int s1_bits, s2_bits;
} kr_tokenizer_config;

typedef struct {
    int d_model, n_layers, n_heads, ff_dim;
    int s1_bits, s2_bits;
    bool learn_te;
    bool kv_shift;
} kr_predictor_config;

typedef struct kr_model kr_model;

/* What a model's numbers are stored in. Float32 is the default and the answer that equals
 * upstream; a reduced mode is opt-in per model and keeps every invariance within the mode
 * (docs/design.md, "Reduced precision"). */
typedef enum { KR_PREC_F32 = 0, KR_PREC_BF16 = 1, KR_PREC_INT8 = 2 } kr_precision;
const char *kr_precision_name(kr_precision p); /* "f32", "bf16", "int8" */
/* The product a model's linear layers run at a level, for its weights: float32's "fma" ("c" at
 * generic), kr_bf16_product_name's or kr_q8_product_name's. */
const char *kr_weights_product_name(kr_precision weights, kr_simd level);
/* "f32", "bf16" or "int8" (a weights mode) into *out; else KR_E_INVALID with a message
 * naming `field`. */
int kr_precision_parse(const char *s, const char *field, kr_precision *out, kr_error *err);
/* The same for a kv mode: "f32" or "bf16". */
int kr_kv_precision_parse(const char *s, const char *field, kr_precision *out, kr_error *err);

typedef struct {
    const char *tokenizer_dir; /* holds config.json + model.safetensors */
    const char *predictor_dir;
    int max_context;      /* the released model's window (512 or 2048); 0 means 512 */
    kr_precision weights; /* the linear layers' weights (F32, F16 or BF16 files alike) */
    kr_precision kv;      /* the predictor's KV cache (and the reference path's keys, values) */
    /* Layers kept float32 under a reduced weights mode (KR_KEEP_* bits; 0: the mode's own
     * choice). A measurement's option (kronos-bench --agreement); the daemon does not set it. */
    unsigned keep_f32;
} kr_model_paths;
/* The predictor's s1 and s2 heads (int8 weights keep them float32 anyway) */
#define KR_KEEP_HEADS 1u
/* The predictor's fusion of the code embeddings and the tokenizer's edge layers (int8
 * weights keep the latter float32 anyway) */
#define KR_KEEP_EMBEDDINGS 2u

kr_model *kr_model_load(const kr_model_paths *paths, kr_error *err);
/* A model of paths->predictor_dir that uses tokenizer_of's tokenizer (its config and
 * weights, not copied: tokenizer_of must outlive it; paths->tokenizer_dir is not read). For
 * models whose tokenizer files are the same: one tokenizer in memory. Read-only as any. */
kr_model *kr_model_load_sharing(const kr_model_paths *paths, const kr_model *tokenizer_of,
                                kr_error *err);
void kr_model_free(kr_model *m);

const kr_tokenizer_config *kr_model_tokenizer_config(const kr_model *m);
const kr_predictor_config *kr_model_predictor_config(const kr_model *m);
int kr_model_max_context(const kr_model *m);
size_t kr_model_param_count(const kr_model *m); /* weights used at inference, both parts */
kr_precision kr_model_weights(const kr_model *m);
kr_precision kr_model_kv(const kr_model *m);
size_t kr_model_tokenizer_param_count(const kr_model *m); /* of those, the tokenizer's */

/* ---- time stamps --------------------------------------------------------------------- */

/* The five calendar features of one candle, as upstream's calc_time_stamps makes them. */
typedef struct {
    int minute;  /* 0-59 */
    int hour;    /* 0-23 */
    int weekday; /* Monday = 0 */
    int day;     /* 1-31 */
    int month;   /* 1-12 */
} kr_stamp;

/* `wall` counts seconds since 1970-01-01T00:00:00 of the wall-clock fields as written
 * (no zone conversion). */
kr_stamp kr_stamp_from_wall(int64_t wall);
/* 0 if every field is in range, else -1 with a message naming the field. */
int kr_stamp_check(const kr_stamp *s, kr_error *err);

/* ---- tokenizer ----------------------------------------------------------------------- */

/* x: [n][d_in] normalised candles -> s1[n], s2[n]. Causal over all n candles. */
int kr_tokenizer_encode(const kr_model *m, const float *x, int n, int32_t *s1, int32_t *s2,
                        kr_error *err);
/* token pairs -> out: [n][d_in] normalised candles. */
int kr_tokenizer_decode(const kr_model *m, const int32_t *s1, const int32_t *s2, int n, float *out,
                        kr_error *err);

/* ---- predictor, uncached reference ------------------------------------------------------ */

/* Runs the predictor over a window of n token pairs (positions 0..n-1).
 * s1_logits: [2^s1_bits] at the last position. context (optional): [n][d_model], the
 * normalised hidden states that kr_predictor_s2_logits needs. */
int kr_predictor_window(const kr_model *m, const int32_t *s1, const int32_t *s2,
                        const kr_stamp *stamps, int n, float *s1_logits, float *context,
                        kr_error *err);
/* s2 logits [2^s2_bits] for a chosen s1, from the context of a window of n positions. */
int kr_predictor_s2_logits(const kr_model *m, const float *context, int n, int32_t s1,
                           float *s2_logits, kr_error *err);

/* ---- sampling ---------------------------------------------------------------------------- */

typedef struct {
    double temperature; /* > 0 */
    int top_k;          /* 0 = off; when > 0, top_p is ignored */
    double top_p;       /* (0, 1]; 1 = off */
} kr_sampling;

/* 0 if the settings are valid, else -1 with a message naming the field. */
int kr_sampling_check(const kr_sampling *s, kr_error *err);

/* xoshiro256** seeded through splitmix64: the same seed gives the same stream everywhere. */
typedef struct {
    uint64_t s[4];
} kr_rng;

void kr_rng_seed(kr_rng *rng, uint64_t seed);
uint64_t kr_rng_next(kr_rng *rng);
double kr_rng_uniform(kr_rng *rng); /* [0, 1) with 53 random bits */

/* Filters logits[n] in place with upstream's rules (temperature, then top-k or top-p),
 * leaving -INFINITY on dropped tokens. */
void kr_sampling_filter(float *logits, int n, const kr_sampling *s);
/* Draws one token from logits[n] (modified in place: filtered, then probabilities). */
int32_t kr_sample(float *logits, int n, const kr_sampling *s, kr_rng *rng);

/* ---- KV cache and its arena pool --------------------------------------------------------- */

/* A pool is one memory budget fixed at creation, carved into blocks of a fixed number of
 * positions (kr_pool_stats.block_len; keys and values of every layer and of the dependency
 * layer). Caches take blocks from it as they grow and give them back when reset or freed;
 * forks share their parent's blocks (reference-counted, copied only when a fork writes into a
 * shared, partly filled block). Thread-safe; a cache is used by one thread at a time. */

typedef struct kr_pool kr_pool;
typedef struct kr_cache kr_cache;

typedef struct {
    size_t block_bytes; /* bytes of one block */
    size_t bytes_total; /* the budget actually carved: blocks_total * block_bytes */
    size_t bytes_used;  /* blocks in use by some cache */
    int blocks_total, blocks_used;
    int block_len; /* positions per block */
} kr_pool_stats;

kr_pool *kr_pool_create(const kr_model *m, size_t budget_bytes, kr_error *err);
void kr_pool_free(kr_pool *pool); /* every cache of the pool must be freed first */
void kr_pool_stats_get(kr_pool *pool, kr_pool_stats *st);
/* Bytes of pool memory that `positions` positions of one cache need. */
size_t kr_pool_bytes_for(const kr_model *m, int positions);

/* An empty cache for up to `capacity` positions (0: the model's max_context). */
kr_cache *kr_cache_create(kr_pool *pool, int capacity, kr_error *err);
/* A new cache holding the same positions as src, sharing its blocks. */
kr_cache *kr_cache_fork(const kr_cache *src, kr_error *err);
void kr_cache_reset(kr_cache *c); /* back to empty; blocks return to the pool */
void kr_cache_free(kr_cache *c);
int kr_cache_length(const kr_cache *c);
int kr_cache_capacity(const kr_cache *c);
size_t kr_cache_bytes(const kr_cache *c); /* pool bytes referenced (shared blocks included) */

/* Appends T token pairs (positions len .. len+T-1) to each of S caches in one batch: one
 * GEMM per weight matrix for all S*T rows, RoPE at each cache's own offsets, a causal mask
 * over each cache's keys. s1, s2, stamps: [S][T]. s1_logits (optional): [S][2^s1_bits] at
 * each cache's last position. A prompt fed in one chunk, many chunks or token by token
 * gives the same logits. On error no cache changes length. */
int kr_cache_append(kr_cache *const *caches, int S, const int32_t *s1, const int32_t *s2,
                    const kr_stamp *stamps, int T, float *s1_logits, kr_error *err);
/* s2 logits [S][2^s2_bits] for each cache's chosen s1 (s1: [S]), over its whole window. */
int kr_cache_s2_logits(kr_cache *const *caches, int S, const int32_t *s1, float *s2_logits,
                       kr_error *err);

/* Token-level generation on a cache (what POST /generate runs): append n_append pairs,
 * then sample n_new pairs, each appended in turn. Fails, changing nothing, if the cache
 * would need more than its capacity: a window that would slide is the caller's choice. */
typedef struct {
    const int32_t *s1, *s2; /* [n_append] */
    const kr_stamp *stamps; /* [n_append] */
    int n_append;
    const kr_stamp *new_stamps; /* [n_new]: the time stamps of the pairs to generate */
    int n_new;
    kr_sampling sampling;
    uint64_t seed;
    kr_cancel cancel;
} kr_generate_request;

int kr_generate(kr_cache *c, const kr_generate_request *r, int32_t *out_s1, int32_t *out_s2,
                kr_error *err);

/* ---- candles and their normalisation ------------------------------------------------------ */

enum { KR_OPEN, KR_HIGH, KR_LOW, KR_CLOSE, KR_VOLUME, KR_AMOUNT };
extern const char *const kr_column_names[KR_D_IN]; /* "open" .. "amount" */

/* n candles: time stamps and six columns, each an array of n (the caller's; not copied). */
typedef struct {
    int n;
    const int64_t *timestamps;      /* [n] wall-clock seconds, strictly increasing */
    const double *columns[KR_D_IN]; /* open..close required; volume, amount may be NULL */
} kr_candles;

/* The rule for one candle value, the same for every way candles arrive: finite and within
 * float32 (the model computes in float32, where a larger magnitude becomes infinite).
 * Returns 0, or -1 with the reason in why ("1e+39 is outside the float32 range ..."), which
 * callers put after their own locator (a field path, a CSV line and column). */
int kr_candle_value_check(double x, char *why, size_t n);

/* Pinned normalisation: when `pinned`, these statistics replace the candles' own (the clip
 * at +-5 and the + 1e-5 stay), so that a series normalised once can grow. Each finite,
 * each std >= 0. */
typedef struct {
    bool pinned;
    float mean[KR_D_IN], std[KR_D_IN];
} kr_norm;

/* ---- forecast ---------------------------------------------------------------------------- */

#define KR_MAX_QUANTILES 32

typedef struct {
    kr_candles context;               /* L = context.n >= 2 candles */
    int horizon;                      /* P >= 1 */
    const int64_t *future_timestamps; /* [P], or NULL: continue at the last interval */
    int samples;                      /* >= 1 */
    kr_sampling sampling;
    uint64_t seed;
    int max_context; /* 0 = the model's; else 1..model's */
    bool use_cache;  /* false: the plain reference path */
    bool return_paths;
    int n_quantiles;
    double quantiles[KR_MAX_QUANTILES]; /* each in [0, 1] */
    kr_cancel cancel;
    kr_norm norm; /* the context's own statistics unless pinned */
    /* The planned work of the whole request this forecast is a part of (an evaluation's
     * origins): the scheduler classes it light or heavy by that, so that a heavy request
     * split into small forecasts never passes for light. 0: its own. */
    double class_flops;
} kr_forecast_request;

/* What a forecast request will take, worked out before any model work: kr_forecast_plan
 * checks every field once (KR_E_INVALID naming the field, KR_E_TOO_LARGE for what this
 * model can never serve) and says what the request costs, so that a server can refuse
 * what will never fit and queue the rest by cost. The forecast itself runs this plan. */
typedef struct {
    int max_context;      /* the window's length limit in effect */
    int cached_steps;     /* steps decoded on the KV cache (the window still starts at 0) */
    int recomputed_steps; /* steps whose window slid and is recomputed */
    size_t pool_bytes;    /* KV pool bytes held at most (the cached path) */
    double flops;         /* compute of the products, estimated from the shapes */
} kr_forecast_plan;

int kr_forecast_plan_make(const kr_model *m, const kr_forecast_request *req, kr_forecast_plan *plan,
                          kr_error *err);

/* Candles -> normalised (with norm's statistics when pinned; norm may be NULL), encoded
 * token pairs s1[n], s2[n], with the normalisation used. */
int kr_tokenize_candles(const kr_model *m, const kr_candles *candles, const kr_norm *norm,
                        int32_t *s1, int32_t *s2, float mean[KR_D_IN], float std[KR_D_IN],
                        kr_error *err);
/* Token pairs -> candles out[KR_D_IN][n] in the units of mean/std (what
 * kr_tokenize_candles returned): decoded, then y * (std + 1e-5) + mean. */
int kr_detokenize(const kr_model *m, const int32_t *s1, const int32_t *s2, int n,
                  const float mean[KR_D_IN], const float std[KR_D_IN], double *out, kr_error *err);

/* Default sampling and options, as upstream's predict(): T=1, top_k=0, top_p=0.9, 1 path. */
void kr_forecast_request_init(kr_forecast_request *req);

typedef struct {
    int horizon, samples, n_quantiles;
    int64_t *timestamps; /* [horizon] wall-clock seconds of the forecast rows */
    double *mean;        /* [KR_D_IN][horizon] */
    double *paths;       /* [samples][KR_D_IN][horizon] when return_paths, else NULL */
    double *quantiles;   /* [n_quantiles][KR_D_IN][horizon], or NULL */
    double quantile_levels[KR_MAX_QUANTILES];
    double *prob_close_up; /* [horizon]: share of paths whose close > last observed close */
    float norm_mean[KR_D_IN], norm_std[KR_D_IN]; /* the normalisation used */
    struct {
        int context_candles;
        int generated_tokens; /* pairs generated, all paths */
        int cached_steps;     /* steps served from the KV cache */
        int recomputed_steps; /* steps that recomputed the window */
        double elapsed_ms;
        kr_precision weights, kv; /* the model's modes that produced it */
    } usage;
} kr_forecast_result;

/* Runs a forecast with caches from `pool`, or from a private pool sized for the request
 * when pool is NULL. */
int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *req,
                kr_forecast_result *res, kr_error *err);
void kr_forecast_result_free(kr_forecast_result *res);
/* n forecasts at once: each one's context on its own, then every path of all of them
 * decoded in lockstep, one batched step for all (a request's numbers do not depend on the
 * others: each row's arithmetic is its own). errs[i] says how request i ended (code KR_OK:
 * success); one that fails or is cancelled leaves the others running. Returns 0 when all
 * succeeded, -1 when any failed. */
int kr_forecast_batch(const kr_model *m, kr_pool *pool, const kr_forecast_request *const *reqs,
                      int n, kr_forecast_result *res, kr_error *errs);

/* ---- candle series (live sessions) ------------------------------------------------------ */

/* A growing series of candles held ready to forecast: its raw candles, statistics fixed at
 * creation, the tokenizer encoder's cache (every encoder layer's keys and values of the
 * candles so far, so that appended candles are encoded against them and never by
 * re-encoding the series) with every candle's tokens, and a predictor cache (from the pool)
 * holding the window a forecast's first step would prefill: the last max_context tokens.
 * A forecast from the series (kr_sched_add_forecast_series) forks that cache and equals, bit
 * for bit, kr_forecast on the same candles with the series' statistics pinned.
 * A series is used by one thread at a time. */
typedef struct kr_series kr_series;

/* The series of these candles (at least 1), its statistics norm's when pinned (norm may be
 * NULL), else those of these candles. max_candles: the most the series may ever hold (0: no
 * limit; beyond it appends fail with KR_E_TOO_LARGE). */
kr_series *kr_series_create(const kr_model *m, kr_pool *pool, const kr_candles *candles,
                            const kr_norm *norm, int max_candles, kr_error *err);
/* The same series without a predictor cache: creating it and appending to it run no
 * predictor rows, and a forecast from it fills its first window itself, under the step
 * budget of the scheduler that runs it (the same answer). For a caller that grows a series
 * on the scheduler's own thread, where a refilled window would hold up every other request. */
kr_series *kr_series_create_cacheless(const kr_model *m, kr_pool *pool, const kr_candles *candles,
                                      const kr_norm *norm, int max_candles, kr_error *err);
/* What a series' candles must meet, checked without building anything, so that candles
 * kept elsewhere (a session journal) are held to the rules a live request is held to. The
 * series' side of an append: its length, last timestamp and which columns it has. */
typedef struct {
    int n;
    int64_t last_timestamp;
    bool has[KR_D_IN];
    int max_candles; /* 0: no limit */
} kr_series_shape;

/* kr_series_create's checks of candles and norm (KR_E_INVALID naming the field,
 * KR_E_TOO_LARGE past max_candles); the statistics' finiteness is checked at creation. */
int kr_series_check_create(const kr_candles *candles, const kr_norm *norm, int max_candles,
                           kr_error *err);
/* kr_series_append's checks of candles against a series of that shape. */
int kr_series_check_append(const kr_series_shape *shape, const kr_candles *candles, kr_error *err);
/* Token pairs and time stamps as the model takes them (KR_E_INVALID naming the pair). */
int kr_model_check_tokens(const kr_model *m, const int32_t *s1, const int32_t *s2,
                          const kr_stamp *stamps, int n, kr_error *err);

/* Appends candles (the same columns as the series has; timestamps after its last). On
 * failure the series is as it was. */
int kr_series_append(kr_series *s, const kr_candles *candles, kr_error *err);
/* The same after moving the series' clock by shift seconds: the candles' timestamps are on
 * a clock shift seconds ahead of the series' (another zone offset), and a stateless
 * forecast of the whole series puts every timestamp on the last one's clock, so the
 * series' timestamps move with it (and its predictor cache is refilled: the time features
 * change). shift 0 is kr_series_append. On failure the series is as it was. */
int kr_series_append_shifted(kr_series *s, const kr_candles *candles, int64_t shift, kr_error *err);
/* The model work (FLOPs of the products, as kr_forecast_plan estimates a forecast's) of
 * appending k candles now, reclock: at another clock (kr_series_append_shifted). Past
 * max_context each append prefills the whole window again (positions start at 0 in every
 * window), so a one-candle append then costs a window's prefill. */
double kr_series_append_flops(const kr_series *s, int k, bool reclock);
/* The compute kr_series_create spends on n candles (an estimate from the shapes, as the
 * plan's): what building a series held as its candles alone costs. */
double kr_series_create_flops(const kr_model *m, int n);
/* The most candles the series may hold from now on (0: no limit); it already holds what it
 * holds. A reloaded limit applies to a live series from its next append. */
void kr_series_set_max_candles(kr_series *s, int max_candles);
void kr_series_free(kr_series *s);
int kr_series_length(const kr_series *s);
int64_t kr_series_last_timestamp(const kr_series *s);
void kr_series_stats(const kr_series *s, float mean[KR_D_IN], float std[KR_D_IN]);
/* Memory held: the series' own (candles, tokens, encoder cache) and its predictor cache's
 * pool bytes. */
size_t kr_series_bytes(const kr_series *s);
/* Of that, the series' own memory, outside the pool: its candles, tokens and the tokenizer's
 * encoder and decoder caches. */
size_t kr_series_heap_bytes(const kr_series *s);
/* What a series of n candles (every column) holds at most: its own memory, returned, and its
 * predictor cache's pool bytes in *pool_bytes (either may be 0: n <= 0). A server plans room
 * with it before the work. */
size_t kr_series_bytes_for(const kr_model *m, int n, size_t *pool_bytes);
/* Points req's context at the series' candles and pins its statistics: the stateless
 * request that a forecast from the series equals. The other fields are left. */
void kr_series_request(const kr_series *s, kr_forecast_request *req);

/* ---- calibration of a forecast's close (and open, high, low) ------------------------------ */

/* A calibration maps a forecast's raw close paths to calibrated quantiles and a calibrated
 * P(up), per horizon step, learned from outcomes (kr_evaluate with a calibration). Methods:
 *
 *   quantiles  per step and level tau of a grid (the levels asked for and 0.01 .. 0.99): a
 *              one-sided split-conformal shift of the paths' own tau-quantile (numpy's linear
 *              rule), in units of the last close: score e = (actual - q_tau) / last close;
 *              shift = the k-th smallest score, k = floor((n + 1) tau) below tau = 0.5 and
 *              ceil((n + 1) tau) from it (clamped to 1..n; (n + 1) tau rounded to 9
 *              decimals first); q'_tau = q_tau + last close * shift, then the grid sorted
 *              ascending (monotone rearrangement);
 *   P(up)      isotonic regression (pool-adjacent-violators) of [actual > last close] on the
 *              raw P(up) per step: points (x ascending, y non-decreasing), a raw value
 *              between two points interpolated linearly, outside them the end point's;
 *              each fitted y clamped to [1 / (n + 2), (n + 1) / (n + 2)].
 *
 *   columns    (version 2, has_columns) open, high and low (kr_calib_columns) by the
 *              quantiles' method on their own paths and actuals, scores still in units of
 *              the last close; volume and amount are not calibrated.
 *
 * An online update (adaptive conformal inference) may move the shifts and points of an
 * object between forecasts; applying one is the same function whatever fitted it. Version 1
 * objects (close only) are still read. */
#define KR_CALIB_VERSION 2
#define KR_CALIB_COLS    3 /* open, high, low */
extern const int kr_calib_columns[KR_CALIB_COLS];
#define KR_CALIB_FINE     99 /* the fine grid: 0.01, 0.02, ..., 0.99 */
#define KR_CALIB_MAX_GRID (KR_CALIB_FINE + KR_MAX_QUANTILES)
#define KR_CALIB_MODEL    64 /* room for the model's identifier */

typedef struct {
    int version;                /* KR_CALIB_VERSION */
    char model[KR_CALIB_MODEL]; /* the identifier of the model fitted on (the caller's) */
    int horizon, samples;       /* of the forecasts fitted on */
    int n_levels;               /* the levels a forecast answers, as the request asked */
    double levels[KR_MAX_QUANTILES];
    int n_grid; /* every level calibrated: levels and the fine grid, ascending */
    double grid[KR_CALIB_MAX_GRID];
    int fitted;          /* outcomes per step fitted on */
    double *shift;       /* [horizon][n_grid] */
    int up_cap;          /* room for points per step (0 at alloc: samples + 1) */
    int *up_n;           /* [horizon] points of P(up)'s map */
    double *up_x, *up_y; /* [horizon][up_cap] */
    bool has_columns;    /* open, high, low calibrated too (version 2 only) */
    double *col_shift;   /* [KR_CALIB_COLS][horizon][n_grid] with has_columns, else NULL */
} kr_calibration;

/* The grid of levels: levels[n] and 0.01 .. 0.99, ascending, each once; its size. */
int kr_calibration_grid(const double *levels, int n, double grid[KR_CALIB_MAX_GRID]);
/* An empty calibration for horizon steps, samples paths and these levels (the grid made,
 * every shift 0 and every P(up) map the identity; version 2, close only). */
int kr_calibration_init(kr_calibration *c, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err);
/* The arrays of c for its horizon, n_grid, up_cap (0: samples + 1) and has_columns, zeroed:
 * what a reader of a stored object fills in before kr_calibration_check. */
int kr_calibration_alloc(kr_calibration *c, kr_error *err);
void kr_calibration_free(kr_calibration *c);
int kr_calibration_copy(kr_calibration *dst, const kr_calibration *src, kr_error *err);
/* Every rule an object must meet (KR_E_INVALID naming the field, "calibration.grid[3]: ..."):
 * the version, sizes, the grid as kr_calibration_grid makes it, finite shifts, P(up) points
 * within [0, 1], x increasing, y non-decreasing. */
int kr_calibration_check(const kr_calibration *c, kr_error *err);
/* Whether c calibrates forecasts of this model (its identifier; NULL: not checked),
 * horizon, samples and levels (KR_E_INVALID naming the field of c that does not match; the
 * levels compared at float32 precision, as answers write them). */
int kr_calibration_match(const kr_calibration *c, const char *model, int horizon, int samples,
                         const double *levels, int n_levels, kr_error *err);

/* A forecast's close, calibrated: quantiles at c's levels and P(up), per step. */
typedef struct {
    int horizon, n_levels;
    double levels[KR_MAX_QUANTILES];
    double *quantiles;     /* [n_levels][horizon] */
    double *prob_close_up; /* [horizon] */
    double *col_quantiles; /* [KR_CALIB_COLS][n_levels][horizon] with c->has_columns, else NULL */
} kr_calibrated;

/* The forecast res of req (made with return_paths) calibrated by c; c must match it
 * (kr_calibration_match). The same numbers an evaluation with c gives that origin. */
int kr_calibrate_forecast(const kr_calibration *c, const kr_forecast_request *req,
                          const kr_forecast_result *res, kr_calibrated *out, kr_error *err);
void kr_calibrated_free(kr_calibrated *out);

/* ---- online calibration of a live series ----------------------------------------------- */

/* A live series that calibrates its own forecasts: each forecast is kept (its raw close grid
 * and P(up), from the series' length at the time, its origin) until the candles it forecast
 * arrive; candle origin + h resolves its step h. Per step h and grid level tau:
 *
 *   score      e = (actual - q_tau) / last close, as the offline object's, over the last
 *              KR_ONLINE_WINDOW outcomes of the step;
 *   shift      the k-th smallest score, k = kr_conformal rank of n and tau_t (floor((n + 1)
 *              tau_t) below 0.5, ceil from it, clamped to 1..n); the starting object's shift
 *              (0 without one) until the step has KR_ONLINE_WARMUP outcomes;
 *   tau_t      adaptive conformal inference (Gibbs and Candes, 2021): starts at tau, and each
 *              outcome of a forecast issued past the warm-up moves it by
 *              tau_{t+1} = tau_t + KR_ONLINE_GAMMA (tau - [actual <= q'_tau]), q'_tau the
 *              level's calibrated quantile that forecast issued (before rearrangement);
 *   P(up)      isotonic regression of every outcome at the step, as the offline object's (the
 *              starting object's map until the warm-up is over).
 *
 * The current object (kr_calib_online_current) calibrates the next forecast exactly as a
 * given object would (kr_calibrate_forecast). Everything is deterministic arithmetic on the
 * kept forecasts and the closes, so replaying them gives the same object bit for bit. */
#define KR_ONLINE_GAMMA  0.005
#define KR_ONLINE_WINDOW 250
#define KR_ONLINE_WARMUP 20

typedef struct kr_calib_online kr_calib_online;

/* Online calibration starting from start (copied; NULL: every shift 0, P(up) the identity,
 * its shape set by the first forecast). NULL with err when out of memory or start breaks a
 * rule (kr_calibration_check). */
kr_calib_online *kr_calib_online_new(const kr_calibration *start, kr_error *err);
void kr_calib_online_free(kr_calib_online *o);
/* Whether a forecast of this model, horizon, samples and levels fits (KR_E_INVALID naming
 * the request's field otherwise); the first one sets the shape of one started without an
 * object. */
int kr_calib_online_fit(kr_calib_online *o, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err);
/* Whether the shape is set (by a starting object or a first forecast). */
bool kr_calib_online_shaped(const kr_calib_online *o);
/* The object the next forecast is calibrated by (shaped only; changed by keep and resolve). */
const kr_calibration *kr_calib_online_current(const kr_calib_online *o);
/* The close paths of res sorted per step: out[horizon][samples]. */
void kr_forecast_sorted_close(const kr_forecast_result *res, double *out);
/* A fitted forecast from origin (the series' length when made) kept until resolved: its sorted
 * close paths [horizon][samples], raw P(up) [horizon] and the last close before it. It
 * replaces an unresolved forecast from the same origin. */
int kr_calib_online_keep(kr_calib_online *o, long origin, double last_close, const double *sorted,
                         const double *p_up, kr_error *err);

/* What the candle at one index told: the most recent kept forecast of it (the smallest
 * step), its PIT within that forecast's calibrated grid and the symmetric pairs of its levels
 * it fell outside (bit j: pair j of kr_calib_online_stats, strictly below or above). */
typedef struct {
    bool covered; /* a kept forecast had forecast this candle */
    int step;     /* 0-based step of that forecast */
    double pit;
    unsigned outside;
} kr_online_outcome;

/* The candle at index (0-based in the series) closed at close: every kept forecast of it
 * resolved (PIT, coverage, P(up) outcome), the calibration updated. -1 when out of memory
 * (err), and then the state is as before only at the steps not yet updated. */
int kr_calib_online_resolve(kr_calib_online *o, long index, double close, kr_online_outcome *out,
                            kr_error *err);

typedef struct {
    bool shaped;
    long resolved; /* forecast-steps resolved */
    int n_pairs;   /* symmetric pairs of the levels, outermost first */
    double pair_lo[KR_MAX_QUANTILES / 2], pair_hi[KR_MAX_QUANTILES / 2];
    double coverage[KR_MAX_QUANTILES / 2]; /* share within the calibrated pair, bounds in */
    double pit_ks;                         /* KS distance of the PITs from uniform; NAN at 0 */
    double brier;                          /* of the calibrated P(up); NAN at 0 */
    size_t bytes;                          /* what the state holds */
} kr_calib_online_stats;

void kr_calib_online_stats_get(const kr_calib_online *o, kr_calib_online_stats *st);

/* ---- walk-forward evaluation -------------------------------------------------------------- */

/* Forecasts from many origins of one series, scored against what happened and against two
 * naive baselines. An origin is the index of its first forecast row: origin o forecasts
 * candles[o, o + horizon) and is scored on their closes.
 *
 * KR_EVAL_WINDOW: origin o is exactly kr_forecast of candles[o - lookback, o) with its own
 * statistics and future_timestamps = the actual timestamps of candles[o, o + horizon).
 * KR_EVAL_LIVE: what a candle series would have said: statistics pinned from the first
 * origin's window (or norm when pinned), the context growing from that window to o (sliding
 * past max_context) — kr_forecast of candles[first_origin - lookback, o) with those
 * statistics pinned, which a series created with the first window and appended up to o
 * answers bit for bit. */
typedef enum { KR_EVAL_WINDOW, KR_EVAL_LIVE } kr_eval_mode;
typedef enum { KR_CALIB_NONE, KR_CALIB_ROLLING, KR_CALIB_GIVEN } kr_calib_mode;

typedef struct {
    kr_candles candles; /* the whole series */
    int lookback;       /* >= 2 candles of context per origin */
    int horizon;        /* >= 1 steps forecast and scored from each origin */
    int stride;         /* candles between origins; 0: horizon */
    int first_origin;   /* -1: lookback */
    int last_origin;    /* -1: the last origin with horizon actuals */
    int samples;        /* >= 1 paths per origin */
    kr_sampling sampling;
    uint64_t seed;
    int max_context; /* as kr_forecast_request's */
    int n_quantiles;
    double quantiles[KR_MAX_QUANTILES]; /* the levels scored; symmetric pairs give coverage */
    kr_eval_mode mode;
    kr_norm norm;      /* KR_EVAL_LIVE only: statistics to pin instead of the first window's */
    bool keep_origins; /* keep each origin's close paths (kr_evaluation.paths) */
    kr_cancel cancel;
    /* Beside the raw model, the calibrated forecaster (kr_calibration): KR_CALIB_ROLLING
     * calibrates each origin from the outcomes known before it (origin j's step h, candle
     * o_j + h, only where o_j + h < o), scoring the origins with at least calibration_warmup
     * such outcomes at every step, and fits an object on every origin; KR_CALIB_GIVEN
     * applies calibration unchanged to every origin. model_id: the caller's identifier of
     * the model, written into a fitted object and matched against a given one (NULL: a
     * given one's model is not checked). */
    kr_calib_mode calibration_mode;
    int calibration_warmup; /* >= 1; default 50 */
    const kr_calibration *calibration;
    const char *model_id;
    /* Anomaly flags: with anomalies, each origin-step whose actual close fell outside the band
     * anomaly_lo..anomaly_hi, which must be one of the symmetric pairs of quantiles
     * (kr_evaluation.anomalies). */
    bool anomalies;
    double anomaly_lo, anomaly_hi;
} kr_evaluate_request;

/* Defaults: stride = horizon, first and last origin as above, samples 1, sampling and seed
 * as kr_forecast_request_init, quantiles 0.1, 0.5, 0.9, window mode. */
void kr_evaluate_request_init(kr_evaluate_request *req);

/* What an evaluation takes, worked out before any model work: every field checked once
 * (KR_E_INVALID naming the field; each origin's forecast is planned as kr_forecast_plan_make
 * would), the origins, and their cost. */
typedef struct {
    int origins, stride, first_origin, last_origin;
    double flops;                      /* the sum of the origins' */
    size_t pool_bytes;                 /* the most that one origin holds */
    float mean[KR_D_IN], std[KR_D_IN]; /* KR_EVAL_LIVE: the statistics pinned */
} kr_evaluate_plan;

int kr_evaluate_plan_make(const kr_model *m, const kr_evaluate_request *req, kr_evaluate_plan *plan,
                          kr_error *err);
/* The forecast request of origin k (0-based; origin first_origin + k * stride): it points
 * into req's candles, and asks for the paths (which the scores need). */
void kr_evaluate_origin_request(const kr_evaluate_request *req, const kr_evaluate_plan *plan, int k,
                                kr_forecast_request *out);

/* Scores, per step and overall (index horizon: over every origin and step together). */
enum {
    KR_EVAL_MAE,
    KR_EVAL_RMSE,
    KR_EVAL_MAPE,
    KR_EVAL_DIRECTION,
    KR_EVAL_BRIER,
    KR_EVAL_CRPS,
    KR_EVAL_METRICS
};
enum { KR_EVAL_MODEL, KR_EVAL_PERSISTENCE, KR_EVAL_RANDOM_WALK, KR_EVAL_FORECASTERS };
#define KR_EVAL_PIT_BINS 10
extern const char *const kr_eval_metric_names[KR_EVAL_METRICS];         /* "mae" .. "crps" */
extern const char *const kr_eval_forecaster_names[KR_EVAL_FORECASTERS]; /* "model", ... */

typedef struct {
    int origins, horizon, samples, n_quantiles, n_pairs;
    kr_eval_mode mode;
    double quantile_levels[KR_MAX_QUANTILES];
    /* symmetric pairs of quantile levels (lo + hi = 1), outermost first: level indexes */
    int pair_lo[KR_MAX_QUANTILES / 2], pair_hi[KR_MAX_QUANTILES / 2];
    /* [forecaster][metric][horizon + 1]; NAN where a metric does not apply (persistence:
     * direction, Brier; random walk: direction) */
    double *scores;
    /* [forecaster][pair][horizon + 1]: share of actual closes within the pair's levels; NAN
     * for persistence */
    double *coverage;
    /* [baseline: 0 persistence, 1 random walk][0 MAE, 1 CRPS][horizon + 1]: 1 - model /
     * baseline */
    double *skill;
    double pit[KR_EVAL_PIT_BINS]; /* shares of origin-steps by the share of paths below */
    /* per origin */
    int *origin_index;   /* [origins] */
    int64_t *timestamps; /* [origins][horizon]: the actual rows' */
    double *last_close;  /* [origins] */
    double *actual;      /* [origins][horizon] closes */
    /* the forecasts' closes: [origins][horizon], [origins][n_quantiles][horizon],
     * [origins][horizon]; paths [origins][samples][horizon] with keep_origins, else NULL */
    double *mean, *quantiles, *prob_close_up, *paths;
    struct {
        long long generated_tokens;
        double flops, elapsed_ms;
        kr_precision weights, kv; /* the model's modes that produced it */
    } usage;
    struct kr_eval_acc *acc; /* opaque: the per-origin scores gathered until kr_evaluation_finish */
    struct kr_eval_calibrated *calibrated; /* with a calibration mode, else NULL */
    struct kr_anomalies *anomalies;        /* with kr_evaluate_request.anomalies, else NULL */
} kr_evaluation;

/* The calibrated forecaster's scores (kr_evaluate_request.calibration_mode). Its CRPS is
 * the quantile form, 2 x the mean pinball loss over the fine grid 0.01 .. 0.99; its point
 * forecast the mean of those quantiles; its PIT the actual's level interpolated linearly
 * within the calibrated grid (the grid's first level / 2 below it, (1 + the last) / 2
 * above, the middle level of a run of equal quantiles). */
enum { KR_CAL_MODEL, KR_CAL_MODEL_SCORED, KR_CAL_CALIBRATED, KR_CAL_KINDS };
typedef struct kr_eval_calibrated {
    int scored;       /* origins scored: the last `scored` of them */
    int first_scored; /* the index (0-based) of the first; origins when none */
    /* [0 the raw model on the scored origins, 1 calibrated][metric][horizon + 1] and
     * [0, 1][pair][horizon + 1], as kr_evaluation.scores and coverage */
    double *scores, *coverage;
    double *crps_quantile_model;  /* [horizon + 1]: the raw quantile-form CRPS, scored origins */
    double pit[KR_EVAL_PIT_BINS]; /* the calibrated PIT's histogram */
    /* [KR_CAL_*]: the model on every origin, the model on the scored origins, calibrated */
    double pit_ks[KR_CAL_KINDS]; /* Kolmogorov-Smirnov distance of the PIT from uniform */
    /* reliability of P(up) in KR_EVAL_PIT_BINS equal bins of [0, 1] (the last closed) */
    long rel_count[KR_CAL_KINDS][KR_EVAL_PIT_BINS];
    double rel_prob[KR_CAL_KINDS][KR_EVAL_PIT_BINS], rel_up[KR_CAL_KINDS][KR_EVAL_PIT_BINS];
    /* per origin: [origins][n_quantiles][horizon], [origins][horizon]; NAN where unscored */
    double *quantiles, *prob_close_up;
    double *pit_at; /* [origins][horizon]: the calibrated PIT; NAN where unscored */
    /* with fitted.has_columns, [0 raw, 1 calibrated][KR_CALIB_COLS][pair][horizon + 1]: each
     * column's coverage on the scored origins (raw: the paths' linear quantiles), else NULL */
    double *col_coverage;
    /* with fitted.has_columns, [KR_CALIB_COLS][origins][n_quantiles][horizon]: each origin's
     * calibrated column quantiles; NAN where unscored; else NULL */
    double *col_quantiles;
    kr_calibration fitted; /* rolling: fitted on every origin; given: the one applied */
    void *acc;             /* each origin's sorted close paths until kr_evaluation_finish */
} kr_eval_calibrated;

/* The origin-steps whose actual close fell outside the request's anomaly band, set by
 * kr_evaluation_finish. Calibrated evaluations flag against the calibrated bands and PIT,
 * checking only the scored origins (kr_eval_calibrated.first_scored on: the origins of the
 * warm-up are not checked); others against the paths' quantiles (kr_evaluation.quantiles)
 * and the share of paths below the actual (ties half). Outside a band is strictly below its
 * lower level's value or strictly above its upper's (coverage counts the bounds in). */
typedef struct {
    int origin, step; /* the origin's index k among the evaluation's (0-based), step (0-based) */
    double pit, lower, upper; /* the PIT, the band's bounds */
    unsigned outside;         /* bit j: outside pair j (kr_evaluation.pair_lo/hi) */
} kr_anomaly;
typedef struct kr_anomalies {
    int pair;        /* the band's index among the evaluation's pairs */
    bool calibrated; /* flagged against the calibrated forecaster */
    long checked;    /* origin-steps checked */
    int count;       /* of them flagged: points[count], by origin then step */
    kr_anomaly *points;
} kr_anomalies;

/* An evaluation's buffers for plan's origins; then each origin's forecast added (in any
 * order, each once), then the scores. */
int kr_evaluation_init(const kr_evaluate_request *req, const kr_evaluate_plan *plan,
                       kr_evaluation *ev, kr_error *err);
int kr_evaluation_add(kr_evaluation *ev, const kr_evaluate_request *req, int k,
                      const kr_forecast_result *res, kr_error *err);
int kr_evaluation_finish(kr_evaluation *ev, const kr_evaluate_request *req, kr_error *err);
void kr_evaluation_free(kr_evaluation *ev);

/* The whole evaluation, every origin's forecast run at once through one scheduler (pool as
 * kr_forecast's), then scored. */
int kr_evaluate(const kr_model *m, kr_pool *pool, const kr_evaluate_request *req, kr_evaluation *ev,
                kr_error *err);

/* ---- cross-sectional scores: many series evaluated at the same origin times ----------------- */

/* Series are aligned when each has the same number of origins and, at every origin, the same
 * timestamps at the last context candle and at each of the horizon actual candles (the
 * candles a return is computed from); the last close before every origin must be non-zero
 * (a return's base). Checked before any model work with the cross-section's k: 0 for the
 * default (a fifth of the series, at least 1), else 1..n/2 so that the top and the bottom
 * do not overlap. At least 2 series. KR_E_INVALID naming the series, the candle and the
 * origin ("series[2].candles.timestamps[133]: ..."). */
int kr_cross_section_check(const kr_evaluate_request *reqs, const kr_evaluate_plan *plans, int n,
                           int top_k, kr_error *err);

/* Per origin time k and step h, across the n series: the forecast return r_f = mean close at
 * h / last close - 1 and the realised return r_a = actual close at h / last close - 1;
 *   ic       Pearson correlation of r_f and r_a;
 *   rank_ic  Spearman: Pearson of their ranks, ties given their average rank;
 *            both undefined (NAN) when r_f or r_a is the same in every series;
 *   hit      the share of series with sign(r_f) == sign(r_a) (sign 0 its own);
 *   spread   series ordered by r_f ascending (ties by series index): the mean r_a of the last
 *            top_k minus that of the first top_k.
 * Over origins, per step h and (index horizon) over every origin and step together: the mean
 * of the defined ICs, their sample standard deviation (n - 1; NAN below 2 of them), the IR
 * mean / std (NAN when std is 0 or NAN), how many were defined; the mean hit and spread. */
typedef struct {
    int series, origins, horizon, top_k;
    double *ic, *rank_ic, *hit, *spread; /* [origins][horizon] */
    /* [horizon + 1] */
    double *ic_mean, *ic_std, *ic_ir, *rank_ic_mean, *rank_ic_std, *rank_ic_ir;
    double *hit_rate, *top_bottom_spread;
    int *ic_count, *rank_ic_count;
} kr_cross_section;

/* The scores of the n finished evaluations evs[n] (aligned, as kr_cross_section_check
 * says); top_k 0 for the default. -1 with err when their shapes differ or out of memory. */
int kr_cross_section_score(const kr_evaluation *evs, int n, int top_k, kr_cross_section *cs,
                           kr_error *err);
void kr_cross_section_free(kr_cross_section *cs);

/* ---- the step scheduler (continuous batching) ------------------------------------------- */

/* Model work advances in steps. Each step runs one product per weight matrix for the rows
 * of every active job: one token of every forecast path and every generating request,
 * plus chunks of prefills and window recomputes under a per-step token budget, so a long
 * prefill never stalls the others' decoding. A job added between steps joins at the next
 * one and leaves when it ends. Every row's arithmetic is its own: a job's result is the
 * one kr_forecast / kr_generate gives it alone, whatever else shares its steps.
 *
 * Not thread-safe: one thread adds jobs and steps (the server's scheduler thread). */
typedef struct kr_sched kr_sched;

typedef struct {
    int step_tokens; /* prefill and recompute rows per step and model, over its jobs; 0: 256 */
    int max_rows;    /* decode rows (paths, generating requests) active at once; 0: 512 */
    /* Light jobs (planned work at most light_flops; 0: 20 GFLOP) are latency-sensitive: they
     * fill their windows before the others, and while one is active a step's other window
     * rows are bounded in time, so that the step takes at most light_step_factor (0: 1.5)
     * times what it would take without them, by the step cost the scheduler measures
     * (milliseconds = fixed + per row x rows, fitted over the recent steps). */
    double light_flops, light_step_factor;
    /* a step's fixed cost counted in rows (its time with no rows over a row's time); 0: from
     * the measured step cost (until measured, an eighth of step_tokens goes to the others) */
    double step_fixed_rows;
    /* While a light job is active the other jobs sit steps out (no decode rows, no window
     * rows), so that the light job's steps cost about what they cost alone; each joins a step
     * again once it has sat out sit_out_steps steps in a row (0: 8; negative: none sit out)
     * or sit_out_ms milliseconds have passed since its last step (0: 40), so it still
     * advances. Nothing sits out while a job waits for pool memory. */
    int sit_out_steps;
    double sit_out_ms;
    /* While a light job has started within the last light_recent_ms milliseconds (0: 10000;
     * negative: never), a step without light jobs holds at most the window rows that keep it
     * within light_wait (0: 0.5) times what a light job costs alone (the step cost of the
     * rows recent light jobs had, step by step), so that a light job that comes mid-step
     * waits for it at most that long. */
    double light_wait, light_recent_ms;
    /* a job left the waiting line and joins the next step (light: its class); called on the
     * stepping thread; NULL: not told */
    void (*started)(void *tag, bool light, void *ctx);
    /* a job ended, err->code KR_OK when it succeeded; called on the stepping thread, which
     * may add jobs from it (kr_sched_add_*: they join the end of the waiting line) */
    void (*done)(void *tag, const kr_error *err, void *ctx);
    /* the pool ran dry mid-step: free some of it (an idle session) and return true, or
     * return false; the jobs that then cannot go on end with KR_E_POOL_EXHAUSTED */
    bool (*make_room)(void *ctx);
    /* with several models, make_room for the pool that ran dry (a model's), asked instead of
     * make_room when set: room made in another pool would not help */
    bool (*make_room_in)(kr_pool *pool, void *ctx);
    void *ctx;
} kr_sched_config;

/* The defaults of every knob above (step_fixed_rows 0: measured; no callbacks, ctx NULL):
 * an embedder starts from them and sets what it changes and its callbacks. A knob left 0
 * in a config given to kr_sched_create takes the same default. */
kr_sched_config kr_sched_config_default(void);

/* m and pool: the model and pool of kr_sched_add_forecast (m may be NULL when every
 * forecast names its own, kr_sched_add_forecast_on). pool NULL: every forecast gets a
 * private pool sized by its plan (the one-shot command).
 *
 * One scheduler runs jobs of several models: each job carries its model and pool (a
 * forecast's as added, a series' and a generation's cache's own), a step appends each
 * model's rows in one call and draws each model's s2 in one call, and the rules that order
 * the work (light before heavy, the window budget, sitting out) are the same over all
 * models' jobs. A job's answer does not depend on which other models share its steps. */
kr_sched *kr_sched_create(const kr_model *m, kr_pool *pool, const kr_sched_config *cfg,
                          kr_error *err);
/* Ends every job still held, as cancelled (done is called for each), and frees s. */
void kr_sched_free(kr_sched *s);

/* Queues a forecast after checking its plan (-1 and nothing queued when it is invalid).
 * res is filled when it ends; req and the arrays it points to must live until then. */
int kr_sched_add_forecast(kr_sched *s, const kr_forecast_request *req, kr_forecast_result *res,
                          void *tag, kr_error *err);
/* kr_sched_add_forecast on model m and its pool (NULL: a private pool), whatever model the
 * scheduler was created with. */
int kr_sched_add_forecast_on(kr_sched *s, const kr_model *m, kr_pool *pool,
                             const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                             kr_error *err);
/* Queues a forecast from a series (on the series' model and pool): req as kr_series_request
 * fills it, plus the forecast's
 * own fields. Its first step forks the series' predictor cache (when the series holds one)
 * instead of prefilling. The
 * series must not change until done is called. */
int kr_sched_add_forecast_series(kr_sched *s, const kr_series *series,
                                 const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                                 kr_error *err);
/* Queues token generation on cache c (what kr_generate does, on c's model); out_s1, out_s2:
 * [n_new]. The
 * cache, req and its arrays must live until done is called. */
int kr_sched_add_generate(kr_sched *s, kr_cache *c, const kr_generate_request *req, int32_t *out_s1,
                          int32_t *out_s2, void *tag, kr_error *err);

/* One step; returns the jobs still held (waiting and active). */
int kr_sched_step(kr_sched *s);

typedef struct {
    int waiting, active;
    int rows_last_step, prefill_rows_last_step;
    /* candles of context the starting forecasts encoded, and their cost in rows */
    int encoded_last_step, encode_rows_last_step;
    unsigned long long steps, rows;
    unsigned long long preempted; /* forecasts restarted to let the others finish (pool) */
    double waiting_flops;         /* planned compute of the jobs not yet started */
    /* the measured step cost: ms = step_ms_fixed + step_ms_per_row x rows (0 until fitted) */
    double step_ms_fixed, step_ms_per_row;
    int light_active; /* light jobs in the steps */
    /* what the recent light jobs cost alone, in rows of the step cost (fixed + their rows,
     * step by step; a moving average; 0: none seen), and whether that bounds the steps
     * without light jobs now (light_wait) */
    double light_alone_rows;
    bool light_recent;
    unsigned long long sat_out; /* steps that jobs sat out beside a light one (job-steps) */
} kr_sched_stats;

void kr_sched_stats_get(const kr_sched *s, kr_sched_stats *st);

/* What one model's rows took in the steps, since the scheduler was made: the steps that ran
 * any of its rows, those rows (decode, prefill and recompute), and the milliseconds of its
 * forward passes there (its rows' append and its s2 heads; the shared parts of a step, the
 * draws and the tokenizer's encodes, are no model's). */
typedef struct {
    const kr_model *m;
    unsigned long long steps, rows;
    double ms;
} kr_sched_model_stats;

/* Every model the steps ran so far, in the order each first ran: up to max of them into
 * out; returns how many there are. */
int kr_sched_model_stats_get(const kr_sched *s, kr_sched_model_stats *out, int max);
/* Model m's figures dropped (a model freed: one loaded later at its address starts from
 * zero). Between steps, with no job of m in the scheduler. */
void kr_sched_model_stats_forget(kr_sched *s, const kr_model *m);

#ifdef __cplusplus
}
#endif
#endif
