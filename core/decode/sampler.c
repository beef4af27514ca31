/* sampler.c — upstream's sample_from_logits: temperature, then top-k (which overrides
 * top-p) or nucleus filtering, then one draw from a seeded RNG. */
#include "kronos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kr_sampling_check(const kr_sampling *s, kr_error *err) {
    if (!(s->temperature > 0.0) || !isfinite(s->temperature))
        return kr_fail_code(err, KR_E_INVALID, "temperature: must be a finite number > 0, got %g",
                            s->temperature);
    if (s->top_k < 0)
        return kr_fail_code(err, KR_E_INVALID, "top_k: must be >= 0, got %d", s->top_k);
    if (!(s->top_p > 0.0 && s->top_p <= 1.0))
        return kr_fail_code(err, KR_E_INVALID, "top_p: must be in (0, 1], got %g", s->top_p);
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

/* Order-preserving map of a float onto an unsigned key (larger float, larger key). */
static uint32_t sort_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* idx[0..n) = token ids by descending logit, ties by ascending id: an LSD radix sort of
 * 11-bit digits, stable, so the order is the same on every run. tmp: 2n entries. The three
 * digits' counts are taken in one pass over the keys; a digit that every key shares moves
 * nothing and is skipped (the order is a total one, so it comes out the same). */
static void rank_desc(const float *logits, int n, uint32_t *idx, uint32_t *tmp) {
    uint32_t *keys = tmp, *alt = tmp + n, *cur = idx;
    uint32_t count[3][2049];
    memset(count, 0, sizeof count);
    for (int i = 0; i < n; i++) {
        cur[i] = (uint32_t)i;
        keys[i] = ~sort_key(logits[i]); /* ascending in ~key is descending in the logit */
        for (int d = 0; d < 3; d++)
            count[d][((keys[i] >> (11 * d)) & 2047) + 1]++;
    }
    for (int d = 0; d < 3; d++) {
        int shift = 11 * d;
        uint32_t *c = count[d];
        if (c[((keys[0] >> shift) & 2047) + 1] == (uint32_t)n) continue; /* one digit for all */
        for (int b = 0; b < 2048; b++)
            c[b + 1] += c[b];
        for (int i = 0; i < n; i++)
            alt[c[(keys[cur[i]] >> shift) & 2047]++] = cur[i];
        uint32_t *t = cur;
        cur = alt;
        alt = t;
    }
    if (cur != idx) memcpy(idx, cur, (size_t)n * sizeof *idx);
}

static void filter_top_k(float *logits, int n, int k, const uint32_t *idx) {
    if (k >= n) return;
    float kth = logits[idx[k - 1]];
    for (int i = 0; i < n; i++)
        if (logits[i] < kth) logits[i] = -INFINITY; /* ties with the k-th are kept */
}

/* e: n doubles of scratch (each token's exp, computed once for the sum and the cut). */
static void filter_top_p(float *logits, int n, double top_p, const uint32_t *idx, double *e) {
    double mx = logits[idx[0]], sum = 0.0;
    for (int i = 0; i < n; i++) {
        e[i] = exp((double)logits[i] - mx);
        sum += e[i];
    }
    /* drop where the cumulative probability *before* this token already exceeds top_p:
     * upstream's mask shifted right by one, so the first token always stays; cum only grows,
     * so every token ranked after the first dropped one is dropped too */
    double cum = 0.0;
    int r = 0;
    for (; r < n; r++) {
        if (r > 0 && cum > top_p) break;
        cum += e[idx[r]] / sum;
    }
    for (; r < n; r++)
        logits[idx[r]] = -INFINITY;
}

void kr_sampling_filter(float *logits, int n, const kr_sampling *s) {
    float t = (float)s->temperature;
    for (int i = 0; i < n; i++)
        logits[i] /= t;
    bool top_k = s->top_k > 0 && s->top_k < n, top_p = s->top_k <= 0 && s->top_p < 1.0;
    if (!top_k && !top_p) return;
    /* the ranking and its two sort buffers; each token's exp as a double (top-p) */
    uint32_t small[3 * 1024], *idx = n <= 1024 ? small : malloc((size_t)3 * n * sizeof *idx);
    double e_small[1024], *e = n <= 1024 ? e_small : malloc((size_t)n * sizeof *e);
    if (!idx || !e) { /* no memory for a ranking: keep only the maximum, always a valid subset */
        if (idx != small) free(idx);
        if (e != e_small) free(e);
        float mx = -INFINITY;
        for (int i = 0; i < n; i++)
            if (logits[i] > mx) mx = logits[i];
        for (int i = 0; i < n; i++)
            if (logits[i] < mx) logits[i] = -INFINITY;
        return;
    }
    rank_desc(logits, n, idx, idx + n);
    if (top_k)
        filter_top_k(logits, n, s->top_k, idx);
    else
        filter_top_p(logits, n, s->top_p, idx, e);
    if (idx != small) free(idx);
    if (e != e_small) free(e);
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
