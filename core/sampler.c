/* sampler.c — upstream's sample_from_logits: temperature, then top-k (which overrides
 * top-p) or nucleus filtering, then one draw from a seeded RNG. */
#include "kronos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kr_sampling_check(const kr_sampling *s, kr_error *err) {
    if (!(s->temperature > 0.0) || !isfinite(s->temperature))
        return kr_fail(err, "temperature: must be a finite number > 0, got %g", s->temperature);
    if (s->top_k < 0) return kr_fail(err, "top_k: must be >= 0, got %d", s->top_k);
    if (!(s->top_p > 0.0 && s->top_p <= 1.0))
        return kr_fail(err, "top_p: must be in (0, 1], got %g", s->top_p);
    return 0;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void kr_rng_seed(kr_rng *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t kr_rng_next(kr_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kr_rng_uniform(kr_rng *rng) {
    return (double)(kr_rng_next(rng) >> 11) * 0x1.0p-53;
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

typedef struct {
    float logit;
    int index;
} ranked;

static int cmp_ranked_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->logit != y->logit) return (x->logit < y->logit) - (x->logit > y->logit);
    return (x->index > y->index) - (x->index < y->index); /* stable: lower index first */
}

static void filter_top_k(float *logits, int n, int k, float *sorted) {
    if (k >= n) return;
    memcpy(sorted, logits, (size_t)n * sizeof(float));
    qsort(sorted, (size_t)n, sizeof(float), cmp_desc);
    float kth = sorted[k - 1];
    for (int i = 0; i < n; i++)
        if (logits[i] < kth) logits[i] = -INFINITY; /* ties with the k-th are kept */
}

static void filter_top_p(float *logits, int n, double top_p, ranked *r) {
    for (int i = 0; i < n; i++)
        r[i] = (ranked){logits[i], i};
    qsort(r, (size_t)n, sizeof *r, cmp_ranked_desc);
    double mx = r[0].logit, sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)r[i].logit - mx);
    /* drop where the cumulative probability *before* this token already exceeds top_p:
     * upstream's mask shifted right by one, so the first token always stays */
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && cum > top_p) logits[r[i].index] = -INFINITY;
        cum += exp((double)r[i].logit - mx) / sum;
    }
}

void kr_sampling_filter(float *logits, int n, const kr_sampling *s) {
    float t = (float)s->temperature;
    for (int i = 0; i < n; i++)
        logits[i] /= t;
    if (s->top_k > 0) {
        float *sorted = malloc((size_t)n * sizeof(float));
        if (sorted) {
            filter_top_k(logits, n, s->top_k, sorted);
            free(sorted);
        } else { /* no memory for a sort: keep only the maximum (k = 1 is always valid) */
            int best = 0;
            for (int i = 1; i < n; i++)
                if (logits[i] > logits[best]) best = i;
            float kth = logits[best];
            for (int i = 0; i < n; i++)
                if (logits[i] < kth) logits[i] = -INFINITY;
        }
    } else if (s->top_p < 1.0) {
        ranked *r = malloc((size_t)n * sizeof *r);
        if (r) {
            filter_top_p(logits, n, s->top_p, r);
            free(r);
        }
    }
}

int32_t kr_sample(float *logits, int n, const kr_sampling *s, kr_rng *rng) {
    kr_sampling_filter(logits, n, s);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        logits[i] = logits[i] == -INFINITY ? 0.0f : expf(logits[i] - mx);
        sum += logits[i];
    }
    double u = kr_rng_uniform(rng) * sum, cum = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (logits[i] <= 0.0f) continue;
        cum += logits[i];
        last = i;
        if (u < cum) return i;
    }
    return last; /* rounding left u at the very top: the last token with mass */
}
