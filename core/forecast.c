/* forecast.c — candles in, probabilistic forecast out (upstream's KronosPredictor.predict
 * and auto_regressive_inference), over the plain reference predictor.
 *
 * Normalisation mimics numpy on float32 arrays (pairwise float32 sums down each column),
 * so that the normalised context equals upstream's bit for bit.
 */
#include "cache.h"
#include "forecast_impl.h"
#include "parallel.h"
#include "predictor.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const kr_column_names[KR_D_IN] = {"open", "high", "low", "close", "volume", "amount"};

void kr_forecast_request_init(kr_forecast_request *req) {
    memset(req, 0, sizeof *req);
    req->samples = 1;
    req->sampling.temperature = 1.0;
    req->sampling.top_k = 0;
    req->sampling.top_p = 0.9;
    req->use_cache = true;
}

void kr_forecast_result_free(kr_forecast_result *res) {
    if (!res) return;
    free(res->timestamps);
    free(res->mean);
    free(res->paths);
    free(res->quantiles);
    free(res->prob_close_up);
    memset(res, 0, sizeof *res);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The candle columns that forecasting and tokenizing both read: present and finite. */
static int check_columns(const kr_forecast_request *r, kr_error *err) {
    for (int c = 0; c < KR_VOLUME; c++)
        if (!r->columns[c]) return kr_fail(err, "candles.%s: missing", kr_column_names[c]);
    if (!r->columns[KR_VOLUME] && r->columns[KR_AMOUNT])
        return kr_fail(err, "candles.amount: given without candles.volume");
    for (int c = 0; c < KR_D_IN; c++)
        for (int i = 0; r->columns[c] && i < r->n_context; i++)
            if (!isfinite(r->columns[c][i]))
                return kr_fail(err, "candles.%s[%d]: %s is not allowed", kr_column_names[c], i,
                               isnan(r->columns[c][i]) ? "NaN" : "an infinite value");
    return 0;
}

static int check_request(const kr_model *m, const kr_forecast_request *r, kr_error *err) {
    if (r->n_context < 2)
        return kr_fail(err, "candles: at least 2 candles are required, got %d", r->n_context);
    if (!r->timestamps) return kr_fail(err, "candles.timestamps: missing");
    if (check_columns(r, err)) return -1;
    for (int i = 1; i < r->n_context; i++)
        if (r->timestamps[i] <= r->timestamps[i - 1])
            return kr_fail(err, "candles.timestamps[%d]: not after the previous timestamp", i);
    if (r->horizon < 1) return kr_fail(err, "horizon: must be >= 1, got %d", r->horizon);
    if (r->future_timestamps) {
        if (r->future_timestamps[0] <= r->timestamps[r->n_context - 1])
            return kr_fail(err, "future_timestamps[0]: not after the last candle's timestamp");
        for (int i = 1; i < r->horizon; i++)
            if (r->future_timestamps[i] <= r->future_timestamps[i - 1])
                return kr_fail(err, "future_timestamps[%d]: not after the previous timestamp", i);
    }
    if (r->samples < 1) return kr_fail(err, "samples: must be >= 1, got %d", r->samples);
    if (kr_sampling_check(&r->sampling, err)) return -1;
    if (r->max_context < 0 || r->max_context > m->max_context)
        return kr_fail(err, "max_context: must be in [1, %d] (the model's), got %d", m->max_context,
                       r->max_context);
    /* the forecast rows are the last P of a decoded window of at most max_context tokens */
    int mc = r->max_context ? r->max_context : m->max_context;
    if (r->horizon > mc)
        return kr_fail(err,
                       "horizon: %d exceeds max_context %d; the forecast is decoded from the "
                       "last max_context tokens, so it holds at most that many rows",
                       r->horizon, mc);
    if (r->n_quantiles < 0 || r->n_quantiles > KR_MAX_QUANTILES)
        return kr_fail(err, "quantiles: at most %d levels", KR_MAX_QUANTILES);
    for (int q = 0; q < r->n_quantiles; q++)
        if (!(r->quantiles[q] >= 0.0 && r->quantiles[q] <= 1.0))
            return kr_fail(err, "quantiles[%d]: must be in [0, 1], got %g", q, r->quantiles[q]);
    return 0;
}

/* The six float32 columns of upstream's DataFrame, missing volume/amount filled in. */
static void raw_candles(const kr_forecast_request *r, float *x) {
    for (int i = 0; i < r->n_context; i++) {
        float *row = x + (size_t)i * KR_D_IN;
        for (int c = 0; c < KR_VOLUME; c++)
            row[c] = (float)r->columns[c][i];
        double vol = r->columns[KR_VOLUME] ? r->columns[KR_VOLUME][i] : 0.0, amt = 0.0;
        if (r->columns[KR_AMOUNT])
            amt = r->columns[KR_AMOUNT][i];
        else if (r->columns[KR_VOLUME])
            amt = vol * ((r->columns[KR_OPEN][i] + r->columns[KR_HIGH][i] + r->columns[KR_LOW][i] +
                          r->columns[KR_CLOSE][i]) /
                         4.0);
        row[KR_VOLUME] = (float)vol;
        row[KR_AMOUNT] = (float)amt;
    }
}

/* numpy's pairwise float32 sum (8 accumulators, halves above 128), so that mean and std
 * come out bit-identical to upstream's np.mean / np.std on its float32 columns. */
static float pairwise_sum(const float *a, int n) {
    if (n < 8) {
        float r = 0.0f;
        for (int i = 0; i < n; i++)
            r += a[i];
        return r;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        int i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

int kr_normalise(const float *x, int n, float *xn, float mean[KR_D_IN], float std[KR_D_IN],
                 kr_error *err) {
    float *col = malloc((size_t)n * sizeof(float));
    if (!col) return kr_fail(err, "normalise: out of memory for %d candles", n);
    for (int c = 0; c < KR_D_IN; c++) {
        for (int i = 0; i < n; i++)
            col[i] = x[(size_t)i * KR_D_IN + c];
        float mu = pairwise_sum(col, n) / (float)n;
        for (int i = 0; i < n; i++) {
            float dv = col[i] - mu;
            col[i] = dv * dv;
        }
        mean[c] = mu;
        std[c] = sqrtf(pairwise_sum(col, n) / (float)n);
        if (!isfinite(mu) || !isfinite(std[c])) { /* float32 statistics, as upstream's */
            free(col);
            return kr_fail(err,
                           "candles.%s: too large for float32: the column's mean or "
                           "standard deviation overflows; scale it down",
                           kr_column_names[c]);
        }
    }
    free(col);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < KR_D_IN; c++) {
            float v = (x[(size_t)i * KR_D_IN + c] - mean[c]) / (std[c] + 1e-5f);
            xn[(size_t)i * KR_D_IN + c] = v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v;
        }
    return 0;
}

int kr_tokenize_candles(const kr_model *m, const kr_forecast_request *r, int32_t *s1, int32_t *s2,
                        float mean[KR_D_IN], float std[KR_D_IN], kr_error *err) {
    int L = r->n_context;
    if (L < 1) return kr_fail(err, "candles: at least 1 candle is required");
    if (check_columns(r, err)) return -1;
    float *x = malloc((size_t)L * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)L * KR_D_IN * sizeof(float));
    int rc = -1;
    if (!x || !xn) {
        kr_fail(err, "tokenize: out of memory for %d candles", L);
    } else {
        raw_candles(r, x);
        rc = kr_normalise(x, L, xn, mean, std, err) || kr_tokenizer_encode(m, xn, L, s1, s2, err)
                 ? -1
                 : 0;
    }
    free(x);
    free(xn);
    return rc;
}

int kr_detokenize(const kr_model *m, const int32_t *s1, const int32_t *s2, int n,
                  const float mean[KR_D_IN], const float std[KR_D_IN], double *out, kr_error *err) {
    float *y = malloc((size_t)(n > 0 ? n : 1) * KR_D_IN * sizeof(float));
    if (!y) return kr_fail(err, "detokenize: out of memory for %d tokens", n);
    int rc = kr_tokenizer_decode(m, s1, s2, n, y, err);
    for (int i = 0; rc == 0 && i < n; i++)
        for (int c = 0; c < KR_D_IN; c++)
            out[(size_t)c * n + i] =
                (double)(y[(size_t)i * KR_D_IN + c] * (std[c] + 1e-5f) + mean[c]);
    free(y);
    return rc;
}

/* One sample path by the reference method: recompute the window at every step. */
static int reference_path(const kr_model *m, fc_job *job, int path, kr_error *err) {
    int L = job->L, P = job->P, mc = job->max_context, d = m->pc.d_model;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    int32_t *s1 = job->path_s1 + (size_t)path * (L + P),
            *s2 = job->path_s2 + (size_t)path * (L + P);
    float *context = malloc((size_t)mc * d * sizeof(float));
    float *l1 = malloc((size_t)v1 * sizeof(float)), *l2 = malloc((size_t)v2 * sizeof(float));
    int rc = -1;
    if (!context || !l1 || !l2) {
        kr_fail(err, "forecast: out of memory for a window of %d", mc);
        goto out;
    }
    kr_rng rng;
    kr_rng_seed(&rng, kr_path_seed(job->seed, path));
    for (int i = 0; i < P; i++) {
        int n = L + i, w = n < mc ? n : mc, start = n - w;
        if (kr_predictor_window(m, s1 + start, s2 + start, job->stamps + start, w, l1, context,
                                err))
            goto out;
        int32_t a = kr_sample(l1, v1, &job->sampling, &rng);
        if (kr_predictor_s2_logits(m, context, w, a, l2, err)) goto out;
        int32_t b = kr_sample(l2, v2, &job->sampling, &rng);
        s1[n] = a;
        s2[n] = b;
    }
    rc = 0;
out:
    free(context);
    free(l1);
    free(l2);
    return rc;
}

typedef struct {
    kr_cache **paths;
    float *l1, *l2;
    int32_t *a, *b, *t1, *t2;
    kr_stamp *st;
    kr_rng *rng;
} cached_state;

static void free_paths(kr_cache **paths, int S) {
    for (int p = 0; p < S; p++) {
        kr_cache_free(paths[p]);
        paths[p] = NULL;
    }
}

/* Every path's caches for this step's window, and the s1 logits at its last position.
 * Returns 1 when the window was recomputed, 0 when it was served from the cache. */
static int step_window(const kr_model *m, kr_pool *pool, fc_job *job, int i, cached_state *cs,
                       kr_error *err) {
    int L = job->L, S = job->samples, mc = job->max_context, n = L + i, total = L + job->P;
    int v1 = 1 << m->pc.s1_bits;
    if (i > 0 && n <= mc) { /* the window still starts at token 0: decode one token a path */
        for (int p = 0; p < S; p++) {
            cs->a[p] = job->path_s1[(size_t)p * total + n - 1];
            cs->b[p] = job->path_s2[(size_t)p * total + n - 1];
            cs->st[p] = job->stamps[n - 1];
        }
        return kr_cache_append(cs->paths, S, cs->a, cs->b, cs->st, 1, cs->l1, err) ? -1 : 0;
    }
    /* first step, or a slid window: prefill the context part of the window once, then
     * the generated part of every path in one batch */
    free_paths(cs->paths, S);
    int start = n > mc ? n - mc : 0, shared = L - start, g = n - L > mc ? mc : n - L;
    if (shared < 0) shared = 0;
    kr_cache *prefix = kr_cache_create(pool, mc, err);
    if (!prefix) return -1;
    int rc = -1;
    if (shared > 0 && kr_cache_append(&prefix, 1, job->path_s1 + start, job->path_s2 + start,
                                      job->stamps + start, shared, g == 0 ? cs->l1 : NULL, err))
        goto out;
    for (int p = 0; p < S; p++)
        if (!(cs->paths[p] = kr_cache_fork(prefix, err))) goto out;
    if (g == 0) {
        for (int p = 1; p < S; p++)
            memcpy(cs->l1 + (size_t)p * v1, cs->l1, (size_t)v1 * sizeof(float));
    } else {
        int first = n - g;
        for (int p = 0; p < S; p++)
            for (int t = 0; t < g; t++) {
                cs->t1[(size_t)p * g + t] = job->path_s1[(size_t)p * total + first + t];
                cs->t2[(size_t)p * g + t] = job->path_s2[(size_t)p * total + first + t];
                cs->st[(size_t)p * g + t] = job->stamps[first + t];
            }
        if (kr_cache_append(cs->paths, S, cs->t1, cs->t2, cs->st, g, cs->l1, err)) goto out;
    }
    rc = i > 0;
out:
    kr_cache_free(prefix); /* the forks keep the blocks they share */
    return rc;
}

/* Each path draws from its own stream, so paths can be sampled on any thread. */
typedef struct {
    float *logits;
    int vocab;
    const kr_sampling *sampling;
    kr_rng *rng;
    int32_t *out;
} sample_job;

static void sample_path(void *arg, int p, int worker) {
    (void)worker;
    const sample_job *j = arg;
    j->out[p] = kr_sample(j->logits + (size_t)p * j->vocab, j->vocab, j->sampling, &j->rng[p]);
}

/* All paths on KV caches, in lockstep: one batch per step for all paths. */
static int cached_paths(const kr_model *m, kr_pool *pool, fc_job *job, kr_forecast_result *res,
                        kr_error *err) {
    int L = job->L, P = job->P, S = job->samples, mc = job->max_context, total = L + P;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits;
    cached_state cs = {0};
    cs.paths = calloc((size_t)S, sizeof *cs.paths);
    cs.l1 = malloc((size_t)S * v1 * sizeof(float));
    cs.l2 = malloc((size_t)S * v2 * sizeof(float));
    cs.a = malloc((size_t)S * sizeof(int32_t));
    cs.b = malloc((size_t)S * sizeof(int32_t));
    cs.t1 = malloc((size_t)S * mc * sizeof(int32_t));
    cs.t2 = malloc((size_t)S * mc * sizeof(int32_t));
    cs.st = malloc((size_t)S * mc * sizeof(kr_stamp));
    cs.rng = malloc((size_t)S * sizeof(kr_rng));
    int rc = -1;
    if (!cs.paths || !cs.l1 || !cs.l2 || !cs.a || !cs.b || !cs.t1 || !cs.t2 || !cs.st || !cs.rng) {
        kr_fail(err, "forecast: out of memory for %d paths", S);
        goto out;
    }
    for (int p = 0; p < S; p++)
        kr_rng_seed(&cs.rng[p], kr_path_seed(job->seed, p));
    for (int i = 0; i < P; i++) {
        int n = L + i, recomputed = step_window(m, pool, job, i, &cs, err);
        if (recomputed < 0) goto out;
        if (recomputed)
            res->usage.recomputed_steps++;
        else
            res->usage.cached_steps++;
        sample_job sj = {cs.l1, v1, &job->sampling, cs.rng, cs.a};
        kr_parallel_for(S, sample_path, &sj);
        if (kr_cache_s2_logits(cs.paths, S, cs.a, cs.l2, err)) goto out;
        sj = (sample_job){cs.l2, v2, &job->sampling, cs.rng, cs.b};
        kr_parallel_for(S, sample_path, &sj);
        for (int p = 0; p < S; p++) {
            job->path_s1[(size_t)p * total + n] = cs.a[p];
            job->path_s2[(size_t)p * total + n] = cs.b[p];
        }
    }
    rc = 0;
out:
    if (cs.paths) free_paths(cs.paths, S);
    free(cs.paths);
    free(cs.l1);
    free(cs.l2);
    free(cs.a);
    free(cs.b);
    free(cs.t1);
    free(cs.t2);
    free(cs.st);
    free(cs.rng);
    return rc;
}

/* Pool bytes a forecast needs at most: the shared window prefix plus, per path, its own
 * positions and one copied block. */
static size_t forecast_pool_bytes(const kr_model *m, const fc_job *job) {
    int mc = job->max_context, own = job->P < mc ? job->P : mc;
    size_t blocks = (size_t)(mc + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN +
                    (size_t)job->samples * ((own + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN + 1) + 1;
    return blocks * kr_pool_bytes_for(m, KR_BLOCK_LEN);
}

uint64_t kr_path_seed(uint64_t seed, int path) {
    /* distinct, reproducible streams per path, whatever order paths run in */
    return seed * 0x9e3779b97f4a7c15ULL + (uint64_t)path * 0xd1b54a32d192ed03ULL + 1;
}

static double quantile_of(double *v, int n, double q) {
    /* numpy's default (linear) on sorted v */
    double pos = q * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Decodes each path's last window, denormalises, and fills the result. */
/* Every path's last P rows, decoded: [S][P][6]. The cached path decodes the window's
 * shared context part once; the reference decodes each path's whole window. */
static int decode_paths(const kr_model *m, const fc_job *job, bool shared, float *rows,
                        kr_error *err) {
    int L = job->L, P = job->P, S = job->samples, mc = job->max_context;
    int total = L + P, w = total < mc ? total : mc, start = total - w, np = w - P;
    if (shared && np > 0) {
        /* paths per batch: at most 4096 rows, and about 256 MiB of decoder keys and values
         * (each path holds ceil(P / np) blocks of np positions) */
        const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
        size_t path_bytes = (size_t)((P + np - 1) / np) * np * 2 * (size_t)tc->d_model *
                            (size_t)(tc->n_dec_layers > 1 ? tc->n_dec_layers - 1 : 1) *
                            sizeof(float);
        size_t by_mem = ((size_t)256 << 20) / path_bytes;
        int group = 4096 / P > 0 ? 4096 / P : 1;
        if ((size_t)group > by_mem) group = by_mem > 0 ? (int)by_mem : 1;
        int32_t *g1 = malloc((size_t)(group < S ? group : S) * P * sizeof *g1);
        int32_t *g2 = malloc((size_t)(group < S ? group : S) * P * sizeof *g2);
        int rc = g1 && g2 ? 0 : kr_fail(err, "forecast: out of memory decoding %d paths", S);
        for (int p0 = 0; rc == 0 && p0 < S; p0 += group) {
            int n = S - p0 < group ? S - p0 : group;
            for (int p = 0; p < n; p++) {
                memcpy(g1 + (size_t)p * P, job->path_s1 + (size_t)(p0 + p) * total + L,
                       (size_t)P * sizeof *g1);
                memcpy(g2 + (size_t)p * P, job->path_s2 + (size_t)(p0 + p) * total + L,
                       (size_t)P * sizeof *g2);
            }
            rc = kr_tokenizer_decode_paths(m, job->path_s1 + start, job->path_s2 + start, np, g1,
                                           g2, n, P, rows + (size_t)p0 * P * KR_D_IN, err);
        }
        free(g1);
        free(g2);
        return rc;
    }
    float *dec = malloc((size_t)w * KR_D_IN * sizeof(float));
    if (!dec) return kr_fail(err, "forecast: out of memory decoding a window of %d", w);
    int rc = 0;
    for (int p = 0; rc == 0 && p < S; p++) {
        const int32_t *s1 = job->path_s1 + (size_t)p * total,
                      *s2 = job->path_s2 + (size_t)p * total;
        rc = kr_tokenizer_decode(m, s1 + start, s2 + start, w, dec, err);
        if (rc == 0)
            memcpy(rows + (size_t)p * P * KR_D_IN, dec + (size_t)(w - P) * KR_D_IN,
                   (size_t)P * KR_D_IN * sizeof(float));
    }
    free(dec);
    return rc;
}

/* Decodes each path's last window, denormalises, and fills the result. */
static int summarise(const kr_model *m, const kr_forecast_request *r, fc_job *job,
                     kr_forecast_result *res, kr_error *err) {
    int L = job->L, P = job->P, S = job->samples;
    float *dec = malloc((size_t)S * P * KR_D_IN * sizeof(float));
    float *sum = calloc((size_t)P * KR_D_IN, sizeof(float));
    double *vals = malloc((size_t)S * sizeof(double));
    double *paths = malloc((size_t)S * KR_D_IN * P * sizeof(double));
    int rc = -1;
    if (!dec || !sum || !vals || !paths) {
        kr_fail(err, "forecast: out of memory summarising %d paths", S);
        goto out;
    }
    if (decode_paths(m, job, r->use_cache, dec, err)) goto out;
    for (int p = 0; p < S; p++)
        for (int i = 0; i < P; i++)
            for (int c = 0; c < KR_D_IN; c++) {
                float v = dec[((size_t)p * P + i) * KR_D_IN + c];
                sum[(size_t)i * KR_D_IN + c] += v;
                paths[((size_t)p * KR_D_IN + c) * P + i] =
                    (double)(v * (job->std[c] + 1e-5f) + job->mean[c]);
            }
    for (int i = 0; i < P; i++)
        for (int c = 0; c < KR_D_IN; c++) {
            float avg = sum[(size_t)i * KR_D_IN + c] / (float)S;
            res->mean[(size_t)c * P + i] = (double)(avg * (job->std[c] + 1e-5f) + job->mean[c]);
        }
    double last_close = r->columns[KR_CLOSE][L - 1];
    for (int i = 0; i < P; i++) {
        int up = 0;
        for (int p = 0; p < S; p++)
            up += paths[((size_t)p * KR_D_IN + KR_CLOSE) * P + i] > last_close;
        res->prob_close_up[i] = (double)up / S;
    }
    for (int c = 0; c < KR_D_IN && r->n_quantiles > 0; c++)
        for (int i = 0; i < P; i++) {
            for (int p = 0; p < S; p++)
                vals[p] = paths[((size_t)p * KR_D_IN + c) * P + i];
            qsort(vals, (size_t)S, sizeof *vals, cmp_double);
            for (int q = 0; q < r->n_quantiles; q++)
                res->quantiles[((size_t)q * KR_D_IN + c) * P + i] =
                    quantile_of(vals, S, r->quantiles[q]);
        }
    if (r->return_paths) {
        res->paths = paths;
        paths = NULL;
    }
    rc = 0;
out:
    free(dec);
    free(sum);
    free(vals);
    free(paths);
    return rc;
}

static int alloc_result(const kr_forecast_request *r, kr_forecast_result *res, kr_error *err) {
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
        return kr_fail(err, "forecast: out of memory for a horizon of %d", P);
    }
    return 0;
}

static void job_free(fc_job *job) {
    free(job->stamps);
    free(job->path_s1);
    free(job->path_s2);
}

int kr_forecast(const kr_model *m, kr_pool *pool, const kr_forecast_request *r,
                kr_forecast_result *res, kr_error *err) {
    double t0 = now_ms();
    memset(res, 0, sizeof *res);
    if (check_request(m, r, err)) return -1;
    int L = r->n_context, P = r->horizon, S = r->samples;
    if ((size_t)S * (size_t)(L + P) > (size_t)1 << 31)
        return kr_fail(err, "samples: %d paths of %d tokens is too many", S, L + P);
    fc_job job = {.L = L,
                  .P = P,
                  .samples = S,
                  .seed = r->seed,
                  .sampling = r->sampling,
                  .max_context = r->max_context ? r->max_context : m->max_context};
    if (alloc_result(r, res, err)) return -1;
    int rc = -1;
    kr_pool *own_pool = NULL;
    float *x = malloc((size_t)L * KR_D_IN * sizeof(float));
    float *xn = malloc((size_t)L * KR_D_IN * sizeof(float));
    job.stamps = malloc((size_t)(L + P) * sizeof *job.stamps);
    job.path_s1 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    job.path_s2 = malloc((size_t)S * (L + P) * sizeof(int32_t));
    if (!x || !xn || !job.stamps || !job.path_s1 || !job.path_s2) {
        kr_fail(err, "forecast: out of memory for %d candles and %d paths", L, S);
        goto out;
    }
    /* future rows: as given, or continuing at the series' last interval */
    int64_t step = r->timestamps[L - 1] - r->timestamps[L - 2];
    for (int i = 0; i < P; i++)
        res->timestamps[i] =
            r->future_timestamps ? r->future_timestamps[i] : r->timestamps[L - 1] + step * (i + 1);
    for (int i = 0; i < L; i++)
        job.stamps[i] = kr_stamp_from_wall(r->timestamps[i]);
    for (int i = 0; i < P; i++)
        job.stamps[L + i] = kr_stamp_from_wall(res->timestamps[i]);

    raw_candles(r, x);
    if (kr_normalise(x, L, xn, job.mean, job.std, err)) goto out;
    if (kr_tokenizer_encode(m, xn, L, job.path_s1, job.path_s2, err)) goto out;
    for (int p = 1; p < S; p++) {
        memcpy(job.path_s1 + (size_t)p * (L + P), job.path_s1, (size_t)L * sizeof(int32_t));
        memcpy(job.path_s2 + (size_t)p * (L + P), job.path_s2, (size_t)L * sizeof(int32_t));
    }
    if (r->use_cache) {
        kr_pool *use = pool;
        if (!use && !(own_pool = kr_pool_create(m, forecast_pool_bytes(m, &job), err))) goto out;
        if (cached_paths(m, use ? use : own_pool, &job, res, err)) goto out;
    } else {
        for (int p = 0; p < S; p++)
            if (reference_path(m, &job, p, err)) goto out;
        res->usage.recomputed_steps = P;
    }
    if (summarise(m, r, &job, res, err)) goto out;
    res->usage.context_candles = L;
    res->usage.generated_tokens = S * P;
    res->usage.elapsed_ms = now_ms() - t0;
    rc = 0;
out:
    free(x);
    free(xn);
    job_free(&job);
    kr_pool_free(own_pool);
    if (rc) kr_forecast_result_free(res);
    return rc;
}
