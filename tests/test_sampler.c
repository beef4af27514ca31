/* test_sampler.c — upstream's sampling rules (temperature, top-k with ties, top-p with the
 * shifted mask), the draws themselves and the seeded RNG. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static kr_sampling sampling(double t, int k, double p) {
    return (kr_sampling){.temperature = t, .top_k = k, .top_p = p};
}

/* Filters `in` and checks that exactly the tokens marked in `keep` survive, unchanged but
 * for the temperature, and that the rest are -inf. */
static void expect_filter(const float *in, int n, kr_sampling s, const int *keep) {
    float l[64];
    assert_true(n <= 64);
    memcpy(l, in, (size_t)n * sizeof(float));
    kr_sampling_filter(l, n, &s);
    for (int i = 0; i < n; i++) {
        if (keep[i]) {
            if (!(fabsf(l[i] - in[i] / (float)s.temperature) <= 1e-6f))
                fail_msg("T=%g k=%d p=%g: token %d should stay as %g, got %g", s.temperature,
                         s.top_k, s.top_p, i, in[i] / s.temperature, (double)l[i]);
        } else if (!(isinf(l[i]) && l[i] < 0)) {
            fail_msg("T=%g k=%d p=%g: token %d (logit %g) should be dropped, got %g", s.temperature,
                     s.top_k, s.top_p, i, (double)in[i], (double)l[i]);
        }
    }
}

static int count_kept(const float *in, int n, kr_sampling s) {
    float l[64];
    memcpy(l, in, (size_t)n * sizeof(float));
    kr_sampling_filter(l, n, &s);
    int kept = 0;
    for (int i = 0; i < n; i++)
        kept += isfinite(l[i]);
    return kept;
}

/* ---- filter ------------------------------------------------------------------------------ */

static void test_temperature(void **state) {
    (void)state;
    float l[3] = {1, 2, -4};
    kr_sampling s = sampling(2.0, 0, 1.0);
    kr_sampling_filter(l, 3, &s);
    assert_true(l[0] == 0.5f && l[1] == 1.0f && l[2] == -2.0f);
    float m[3] = {1, 2, -4};
    s = sampling(0.5, 0, 1.0);
    kr_sampling_filter(m, 3, &s);
    assert_true(m[0] == 2.0f && m[1] == 4.0f && m[2] == -8.0f);
}

static void test_top_k(void **state) {
    (void)state;
    const float a[4] = {1, 3, 3, 2};
    expect_filter(a, 4, sampling(1, 2, 1), (const int[]){0, 1, 1, 0}); /* both 3s only */
    expect_filter(a, 4, sampling(1, 3, 1), (const int[]){0, 1, 1, 1}); /* 3, 3, 2 */
    expect_filter(a, 4, sampling(1, 1, 1), (const int[]){0, 1, 1, 0}); /* tie with the 1st */
    /* ties with the k-th are kept: [1, 3, 2, 2], k = 2: the k-th largest is 2, both 2s stay */
    const float b[4] = {1, 3, 2, 2};
    expect_filter(b, 4, sampling(1, 2, 1), (const int[]){0, 1, 1, 1});
    expect_filter(b, 4, sampling(1, 1, 1), (const int[]){0, 1, 0, 0});
    /* k >= n keeps everything */
    expect_filter(b, 4, sampling(1, 4, 1), (const int[]){1, 1, 1, 1});
    expect_filter(b, 4, sampling(1, 10, 1), (const int[]){1, 1, 1, 1});
    /* top_k set: top_p is ignored (p = 0.01 alone would keep only the 3) */
    expect_filter(a, 4, sampling(1, 3, 0.01), (const int[]){0, 1, 1, 1});
    expect_filter(b, 4, sampling(1, 4, 0.01), (const int[]){1, 1, 1, 1});
    /* with a temperature: values divided, same selection */
    expect_filter(a, 4, sampling(0.5, 2, 1), (const int[]){0, 1, 1, 0});
    /* negative logits and an unsorted order */
    const float c[6] = {-5, -1, -3, -0.5f, -7, -1};
    expect_filter(c, 6, sampling(1, 2, 1), (const int[]){0, 1, 0, 1, 0, 1});
    expect_filter(c, 6, sampling(1, 4, 1), (const int[]){0, 1, 1, 1, 0, 1});
}

static void test_top_p(void **state) {
    (void)state;
    /* p = (0.5, 0.3, 0.15, 0.05): cumulative (0.5, 0.8, 0.95, 1.0). Rule: drop a token when
     * the cumulative probability *before* it is > top_p (first always kept):
     *   top_p 0.45: before = (0, .5, .8, .95) → keep 1
     *   top_p 0.55: keep 2 (0.5 is not > 0.55; 0.8 is)
     *   top_p 0.6 : keep 2
     *   top_p 0.85: keep 3 (0.8 ≤ 0.85 < 0.95)
     *   top_p 0.97: keep 4 (0.95 ≤ 0.97) */
    const float p[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    expect_filter(p, 4, sampling(1, 0, 0.45), (const int[]){1, 0, 0, 0});
    expect_filter(p, 4, sampling(1, 0, 0.55), (const int[]){1, 1, 0, 0});
    expect_filter(p, 4, sampling(1, 0, 0.6), (const int[]){1, 1, 0, 0});
    expect_filter(p, 4, sampling(1, 0, 0.85), (const int[]){1, 1, 1, 0});
    expect_filter(p, 4, sampling(1, 0, 0.97), (const int[]){1, 1, 1, 1});
    expect_filter(p, 4, sampling(1, 0, 1e-9), (const int[]){1, 0, 0, 0});
    expect_filter(p, 4, sampling(1, 0, 1.0), (const int[]){1, 1, 1, 1});
    /* the same distribution in another order: sorting is by probability, not position */
    const float q[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    expect_filter(q, 4, sampling(1, 0, 0.6), (const int[]){0, 1, 0, 1});
    expect_filter(q, 4, sampling(1, 0, 0.85), (const int[]){1, 1, 0, 1});
    expect_filter(q, 4, sampling(1, 0, 1e-9), (const int[]){0, 1, 0, 0});
    /* exact boundaries: four equal logits, each 1/4 exactly. "before" = (0, .25, .5, .75);
     * top_p 0.5 drops only the token after cumulative 0.75 > 0.5 → 3 stay (0.5 is not
     * > 0.5); top_p 0.25 → 2 stay */
    const float u[4] = {0, 0, 0, 0};
    assert_int_equal(count_kept(u, 4, sampling(1, 0, 0.5)), 3);
    assert_int_equal(count_kept(u, 4, sampling(1, 0, 0.25)), 2);
    assert_int_equal(count_kept(u, 4, sampling(1, 0, 0.2)), 1);
    assert_int_equal(count_kept(u, 4, sampling(1, 0, 0.75)), 4);
    /* top_p is applied after the temperature: T = 2 flattens (.5, .3, .15, .05) to
     * sqrt(p)/Σ sqrt(p) = (0.3790, 0.2936, 0.2076, 0.1198): before = (0, .379, .673, .880)
     * → top_p 0.45 keeps 2 where T = 1 kept 1, top_p 0.7 keeps 3 where T = 1 kept 2 */
    expect_filter(p, 4, sampling(2, 0, 0.45), (const int[]){1, 1, 0, 0});
    expect_filter(p, 4, sampling(2, 0, 0.7), (const int[]){1, 1, 1, 0});
    expect_filter(p, 4, sampling(1, 0, 0.7), (const int[]){1, 1, 0, 0});
    /* top_p = 1 keeps even negligible tokens */
    const float tiny[3] = {0, -50, -100};
    expect_filter(tiny, 3, sampling(1, 0, 1.0), (const int[]){1, 1, 1});
    expect_filter(tiny, 3, sampling(1, 0, 0.9), (const int[]){1, 0, 0});
}

/* ---- draws ------------------------------------------------------------------------------- */

/* The filter as written from its definition: tokens ranked by a comparison sort (logit
 * descending, id ascending), top-p's cumulative mass in rank order with every exp taken
 * afresh. The library's filter (radix ranking, exps reused, a cut that stops early) must
 * leave the same logits, bit for bit. */
static const float *plain_logits;
static int plain_rank_cmp(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    float x = plain_logits[i], y = plain_logits[j];
    if (x != y) return x > y ? -1 : 1;
    return i - j;
}

static void plain_filter(float *l, int n, const kr_sampling *s, int *idx) {
    for (int i = 0; i < n; i++)
        l[i] /= (float)s->temperature;
    for (int i = 0; i < n; i++)
        idx[i] = i;
    plain_logits = l;
    qsort(idx, (size_t)n, sizeof *idx, plain_rank_cmp);
    if (s->top_k > 0 && s->top_k < n) {
        float kth = l[idx[s->top_k - 1]];
        for (int i = 0; i < n; i++)
            if (l[i] < kth) l[i] = -INFINITY;
        return;
    }
    if (s->top_k > 0 || !(s->top_p < 1.0)) return;
    double mx = l[idx[0]], sum = 0.0, cum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)l[i] - mx);
    for (int r = 0; r < n; r++) {
        double p = exp((double)l[idx[r]] - mx) / sum;
        if (r > 0 && cum > s->top_p) l[idx[r]] = -INFINITY;
        cum += p;
    }
}

static void test_filter_as_defined(void **state) {
    (void)state;
    enum { N = 1024 };
    static float a[N], b[N];
    static int idx[N];
    uint64_t x = 12345;
    const double tops[] = {0.5, 0.9, 0.99};
    for (int round = 0; round < 60; round++) {
        int n = round % 3 == 0 ? N : 1 + (int)(x % N);
        double spread = 0.5 + (round % 7) * (round % 7) * 4.0; /* flat to peaked */
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i] = (float)((double)(x >> 40) / (double)(1 << 24) - 0.5) * (float)spread;
            if (round % 5 == 0 && i % 9 == 0) a[i] = a[i / 2]; /* ties */
        }
        for (int k = 0; k < round % 4; k++) /* a few tokens well above the rest */
            a[(x >> (8 * k)) % (uint64_t)n] += (float)(spread * (k + 1) / 2);
        kr_sampling s =
            sampling(round % 4 == 0 ? 0.7 : 1.0, round % 6 == 1 ? 1 + round : 0, tops[round % 3]);
        memcpy(b, a, (size_t)n * sizeof(float));
        kr_sampling_filter(a, n, &s);
        plain_filter(b, n, &s, idx);
        assert_memory_equal(a, b, (size_t)n * sizeof(float));
    }
}

static void test_sample_greedy(void **state) {
    (void)state;
    enum { N = 100 };
    float base[N], l[N];
    for (int i = 0; i < N; i++)
        base[i] = (float)sin(i * 1.7) * 3.0f;
    base[37] = 3.5f; /* the argmax */
    kr_rng rng;
    kr_rng_seed(&rng, 1);
    kr_sampling s = sampling(1.0, 1, 0.9);
    for (int r = 0; r < 200; r++) {
        memcpy(l, base, sizeof l);
        assert_int_equal(kr_sample(l, N, &s, &rng), 37);
    }
    s = sampling(5.0, 1, 1.0); /* greedy whatever the temperature */
    for (int r = 0; r < 50; r++) {
        memcpy(l, base, sizeof l);
        assert_int_equal(kr_sample(l, N, &s, &rng), 37);
    }
}

static void test_sample_one_finite(void **state) {
    (void)state;
    enum { N = 16 };
    float l[N];
    kr_rng rng;
    kr_rng_seed(&rng, 7);
    const kr_sampling ss[] = {sampling(1, 0, 1.0), sampling(1, 0, 0.9), sampling(0.3, 5, 1),
                              sampling(2, 0, 1e-6)};
    for (int k = 0; k < N_OF(ss); k++)
        for (int r = 0; r < 100; r++) {
            for (int i = 0; i < N; i++)
                l[i] = -INFINITY;
            l[7] = 0.3f;
            assert_int_equal(kr_sample(l, N, &ss[k], &rng), 7);
        }
    /* the last token as the only finite one */
    for (int r = 0; r < 100; r++) {
        for (int i = 0; i < N; i++)
            l[i] = -INFINITY;
        l[N - 1] = -3.0f;
        assert_int_equal(kr_sample(l, N, &ss[0], &rng), N - 1);
    }
}

static void test_sample_frequencies(void **state) {
    (void)state;
    const double p[3] = {0.5, 0.3, 0.2};
    int count[3] = {0};
    kr_rng rng;
    kr_rng_seed(&rng, 2024);
    kr_sampling s = sampling(1.0, 0, 1.0);
    enum { DRAWS = 20000 };
    for (int r = 0; r < DRAWS; r++) {
        float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
        int32_t t = kr_sample(l, 3, &s, &rng);
        assert_true(t >= 0 && t < 3);
        count[t]++;
        /* the logits are left as (unnormalised) probabilities */
        assert_true(fabsf(l[0] / l[2] - 2.5f) < 1e-5f);
    }
    for (int i = 0; i < 3; i++) {
        double f = (double)count[i] / DRAWS;
        print_message("token %d: frequency %.4f (p = %.2f)\n", i, f, p[i]);
        assert_true(fabs(f - p[i]) < 0.02);
    }
    /* with top_p = 0.6 only tokens 0 and 1 can come out, in proportion 5:3 */
    int c2[3] = {0};
    s = sampling(1.0, 0, 0.6);
    for (int r = 0; r < DRAWS; r++) {
        float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
        c2[kr_sample(l, 3, &s, &rng)]++;
    }
    assert_int_equal(c2[2], 0);
    assert_true(fabs((double)c2[0] / DRAWS - 0.625) < 0.02);
}

/* ---- RNG --------------------------------------------------------------------------------- */

static void test_rng_reference(void **state) {
    (void)state;
    /* splitmix64 from 0 gives 0xe220a8397b1dcdaf first (the published reference value); the
     * rest were computed with an independent implementation of splitmix64 + xoshiro256** */
    kr_rng rng;
    kr_rng_seed(&rng, 0);
    assert_true(rng.s[0] == 0xe220a8397b1dcdafULL);
    assert_true(rng.s[1] == 0x6e789e6aa1b965f4ULL);
    assert_true(rng.s[2] == 0x06c45d188009454fULL);
    assert_true(rng.s[3] == 0xf88bb8a8724c81ecULL);
    assert_true(kr_rng_next(&rng) == 0x99ec5f36cb75f2b4ULL);
    assert_true(kr_rng_next(&rng) == 0xbf6e1f784956452aULL);
    assert_true(kr_rng_next(&rng) == 0x1a5f849d4933e6e0ULL);
    kr_rng_seed(&rng, 42);
    assert_true(kr_rng_next(&rng) == 0x15780b2e0c2ec716ULL);
    assert_true(kr_rng_next(&rng) == 0x6104d9866d113a7eULL);
    assert_true(kr_rng_next(&rng) == 0xae17533239e499a1ULL);
    /* uniform = top 53 bits / 2^53 */
    kr_rng_seed(&rng, 42);
    double u = kr_rng_uniform(&rng);
    assert_true(u == (double)(0x15780b2e0c2ec716ULL >> 11) / 9007199254740992.0);
}

static void test_rng_streams(void **state) {
    (void)state;
    kr_rng a, b, c;
    kr_rng_seed(&a, 12345);
    kr_rng_seed(&b, 12345);
    kr_rng_seed(&c, 12346);
    int same_ac = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = kr_rng_next(&a), y = kr_rng_next(&b), z = kr_rng_next(&c);
        assert_true(x == y);
        same_ac += x == z;
    }
    assert_int_equal(same_ac, 0);

    /* the same seed gives the same draws, a different seed a different sequence */
    float base[32];
    for (int i = 0; i < 32; i++)
        base[i] = (float)(i % 5) * 0.3f;
    kr_sampling s = sampling(1.0, 0, 1.0);
    int32_t d1[200], d2[200], d3[200];
    for (int r = 0; r < 3; r++) {
        kr_rng rng;
        kr_rng_seed(&rng, r == 2 ? 99 : 98);
        int32_t *d = r == 0 ? d1 : r == 1 ? d2 : d3;
        for (int i = 0; i < 200; i++) {
            float l[32];
            memcpy(l, base, sizeof l);
            d[i] = kr_sample(l, 32, &s, &rng);
        }
    }
    assert_memory_equal(d1, d2, sizeof d1);
    int differ = 0;
    for (int i = 0; i < 200; i++)
        differ += d1[i] != d3[i];
    assert_true(differ > 100);
}

static void test_rng_uniform_range(void **state) {
    (void)state;
    kr_rng rng;
    kr_rng_seed(&rng, 5);
    double sum = 0, lo = 1, hi = 0;
    enum { N = 100000 };
    for (int i = 0; i < N; i++) {
        double u = kr_rng_uniform(&rng);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
    }
    assert_true(fabs(sum / N - 0.5) < 0.01);
    assert_true(lo < 1e-3 && hi > 1 - 1e-3);
}

/* ---- validation -------------------------------------------------------------------------- */

static void expect_invalid(kr_sampling s, const char *field) {
    kr_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(kr_sampling_check(&s, &err), -1);
    if (!strstr(err.msg, field))
        fail_msg("T=%g k=%d p=%g: message \"%s\" does not name %s", s.temperature, s.top_k, s.top_p,
                 err.msg, field);
}

static void test_sampling_check(void **state) {
    (void)state;
    kr_error err = {0};
    assert_int_equal(kr_sampling_check(&(kr_sampling){1.0, 0, 0.9}, &err), 0);
    assert_int_equal(kr_sampling_check(&(kr_sampling){0.5, 5, 1.0}, &err), 0);
    assert_int_equal(kr_sampling_check(&(kr_sampling){1e-3, 1, 1e-9}, &err), 0);
    assert_int_equal(kr_sampling_check(&(kr_sampling){1.0, 0, 0.9}, NULL), 0);
    expect_invalid(sampling(0.0, 0, 0.9), "temperature");
    expect_invalid(sampling(-1.0, 0, 0.9), "temperature");
    expect_invalid(sampling(NAN, 0, 0.9), "temperature");
    expect_invalid(sampling(INFINITY, 0, 0.9), "temperature");
    expect_invalid(sampling(1.0, -1, 0.9), "top_k");
    expect_invalid(sampling(1.0, 0, 0.0), "top_p");
    expect_invalid(sampling(1.0, 0, -0.1), "top_p");
    expect_invalid(sampling(1.0, 0, 1.5), "top_p");
    expect_invalid(sampling(1.0, 0, NAN), "top_p");
    /* top_p is validated even when top_k makes it unused */
    expect_invalid(sampling(1.0, 3, 1.5), "top_p");
    assert_int_equal(kr_sampling_check(&(kr_sampling){1.0, -1, 0.9}, NULL), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_filter_as_defined),
        cmocka_unit_test(test_sample_greedy),
        cmocka_unit_test(test_sample_one_finite),
        cmocka_unit_test(test_sample_frequencies),
        cmocka_unit_test(test_rng_reference),
        cmocka_unit_test(test_rng_streams),
        cmocka_unit_test(test_rng_uniform_range),
        cmocka_unit_test(test_sampling_check),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
