/* kronos_model.h — the library's ground floor: errors, threads and kernels, a model and what it
 * is made of (time stamps, tokenizer, the uncached predictor, sampling), the KV pool and its
 * caches, candles and their normalisation. Part of the API kronos.h gathers; its conventions are
 * there. */
#ifndef KRONOS_MODEL_H
#define KRONOS_MODEL_H

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

#ifdef __cplusplus
}
#endif
#endif
