/* test_cache.c — the KV cache changes no result: cached logits (one chunk, many chunks,
 * token by token, across calls) equal the uncached reference; cached forecasts equal
 * reference forecasts; the pool's accounting holds. Run on the fixture model and on a
 * random kv_shift model made by kronos-mkmodel (KR_MKMODEL names the tool). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h" /* KR_BLOCK_LEN */
#include "kronos.h"
#include "run.h" /* kr_generate_batch */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TOK 48 /* tokens of the parity sequence */
#define V     1024

typedef struct {
    kr_model *m;
    int32_t s1[N_TOK], s2[N_TOK];
    kr_stamp st[N_TOK];
} fixture;

static fixture tiny, shifted;
static char shifted_dir[64];

static double max_rel(const float *a, const float *b, int n) {
    double mx = 0, worst = 0;
    for (int i = 0; i < n; i++)
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
    for (int i = 0; i < n; i++) {
        double r = fabs(a[i] - b[i]) / mx;
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

/* A token sequence: the first golden case's context tokens and stamps. */
static void fill_tokens(fixture *f) {
    json_t *g = tu_load_golden();
    json_t *c = json_array_get(json_object_get(g, "cases"), 0);
    json_t *in = json_object_get(json_object_get(c, "intermediate"), "context_s1");
    json_t *in2 = json_object_get(json_object_get(c, "intermediate"), "context_s2");
    json_t *ts = json_object_get(json_object_get(c, "input"), "timestamps");
    for (int i = 0; i < N_TOK; i++) {
        f->s1[i] = (int32_t)json_integer_value(json_array_get(in, (size_t)i));
        f->s2[i] = (int32_t)json_integer_value(json_array_get(in2, (size_t)i));
        f->st[i] = kr_stamp_from_wall(tu_wall(json_string_value(json_array_get(ts, (size_t)i))));
    }
    json_decref(g);
}

static int setup(void **state) {
    (void)state;
    tiny.m = tu_load_tiny(512);
    if (!tiny.m) return -1;
    fill_tokens(&tiny);
    const char *tool = getenv("KR_MKMODEL");
    if (!tool) {
        fprintf(stderr, "KR_MKMODEL is not set\n");
        return -1;
    }
    snprintf(shifted_dir, sizeof shifted_dir, "/tmp/kr-cache-test-XXXXXX");
    if (!mkdtemp(shifted_dir)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --out %s --preset tiny --kv-shift --seed 11 >/dev/null", tool,
             shifted_dir);
    if (system(cmd) != 0) return -1;
    char tok[128], pred[128];
    snprintf(tok, sizeof tok, "%s/tokenizer", shifted_dir);
    snprintf(pred, sizeof pred, "%s/predictor", shifted_dir);
    kr_model_paths p = {.tokenizer_dir = tok, .predictor_dir = pred, .max_context = 512};
    kr_error err = {0};
    shifted.m = kr_model_load(&p, &err);
    if (!shifted.m) {
        fprintf(stderr, "kv_shift model: %s\n", err.msg);
        return -1;
    }
    assert_true(kr_model_predictor_config(shifted.m)->kv_shift);
    fill_tokens(&shifted);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(tiny.m);
    kr_model_free(shifted.m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", shifted_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Reference logits (s1, and s2 for s1 = the fixture's next token) after n tokens. */
static void reference(const fixture *f, int n, float *l1, float *l2) {
    kr_error err = {0};
    float *ctx = malloc((size_t)n * 64 * sizeof(float));
    assert_non_null(ctx);
    assert_int_equal(kr_predictor_window(f->m, f->s1, f->s2, f->st, n, l1, ctx, &err), 0);
    assert_int_equal(kr_predictor_s2_logits(f->m, ctx, n, f->s1[n % N_TOK], l2, &err), 0);
    free(ctx);
}

/* Appends the sequence in the given chunk sizes, comparing logits after every chunk. */
static void check_chunks(const fixture *f, const int *chunks, int n_chunks) {
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(f->m, kr_pool_bytes_for(f->m, 512), &err);
    assert_non_null(pool);
    kr_cache *c = kr_cache_create(pool, 0, &err);
    assert_non_null(c);
    float l1[V], l2[V], r1[V], r2[V];
    int at = 0;
    for (int k = 0; k < n_chunks; k++) {
        int T = chunks[k];
        assert_int_equal(kr_cache_append(&c, 1, f->s1 + at, f->s2 + at, f->st + at, T, l1, &err),
                         0);
        at += T;
        assert_int_equal(kr_cache_length(c), at);
        int32_t next = f->s1[at % N_TOK];
        assert_int_equal(kr_cache_s2_logits(&c, 1, &next, l2, &err), 0);
        reference(f, at, r1, r2);
        assert_true(max_rel(l1, r1, V) < 1e-5);
        assert_true(max_rel(l2, r2, V) < 1e-5);
    }
    kr_cache_free(c);
    kr_pool_free(pool);
}

static void parity(const fixture *f) {
    int one[] = {N_TOK};
    check_chunks(f, one, 1);
    int many[] = {5, 1, 16, 3, 11, 12};
    check_chunks(f, many, 6);
    int each[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        each[i] = 1;
    check_chunks(f, each, N_TOK);
}

static void test_parity_fixture(void **state) {
    (void)state;
    parity(&tiny);
}

static void test_parity_kv_shift(void **state) {
    (void)state;
    parity(&shifted);
}

/* Long appends, whose keys and values are stored in chunks of rows on the pool (each
 * sequence's first row reading the last one of the append before it): the same bits as
 * one token at a time, which stores on the calling thread. */
#define N_LONG 300

/* n tokens from the fixture's N_TOK, each repeat of them with other s1 bits, 5 minutes apart */
static void spread_tokens(const fixture *f, int n, int32_t *s1, int32_t *s2, kr_stamp *st) {
    for (int i = 0; i < n; i++) {
        s1[i] = f->s1[i % N_TOK] ^ (i / N_TOK);
        s2[i] = f->s2[i % N_TOK];
        st[i] = kr_stamp_from_wall(1700000000 + 300 * (int64_t)i);
    }
}

static void long_logits(const fixture *f, const int *chunks, int n_chunks, float *l1, float *l2) {
    static int32_t s1[N_LONG], s2[N_LONG];
    static kr_stamp st[N_LONG];
    spread_tokens(f, N_LONG, s1, s2, st);
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(f->m, kr_pool_bytes_for(f->m, 512), &err);
    assert_non_null(pool);
    kr_cache *c = kr_cache_create(pool, 0, &err);
    assert_non_null(c);
    int at = 0;
    for (int k = 0; k < n_chunks; k++) {
        assert_int_equal(kr_cache_append(&c, 1, s1 + at, s2 + at, st + at, chunks[k], l1, &err), 0);
        at += chunks[k];
    }
    assert_int_equal(at, N_LONG);
    int32_t next = 5;
    assert_int_equal(kr_cache_s2_logits(&c, 1, &next, l2, &err), 0);
    kr_cache_free(c);
    kr_pool_free(pool);
}

static void long_chunks(const fixture *f) {
    static float a1[V], a2[V], b1[V], b2[V], c1[V], c2[V];
    static int each[N_LONG];
    const int whole[] = {N_LONG}, parts[] = {40, 200, 60};
    for (int i = 0; i < N_LONG; i++)
        each[i] = 1;
    long_logits(f, each, N_LONG, a1, a2);
    long_logits(f, whole, 1, b1, b2);
    long_logits(f, parts, 3, c1, c2);
    assert_memory_equal(a1, b1, sizeof a1);
    assert_memory_equal(a2, b2, sizeof a2);
    assert_memory_equal(a1, c1, sizeof a1);
    assert_memory_equal(a2, c2, sizeof a2);
}

static void test_long_chunks(void **state) {
    (void)state;
    long_chunks(&tiny);
    long_chunks(&shifted);
}

/* A decode step of many paths, each cache one new row, stores their keys and values in runs
 * of whole sequences on the pool (nn.c's store_task: a kv_shift model's raw k, v saved in the
 * same task); one cache alone stores on the calling thread. The same logits, bit for bit,
 * step after step: paths forked from a prefix of 40 tokens (attention row by row) and of 100
 * (tiles over 96 shared keys). It alone fails when the runs skip the raw k, v. */
#define N_PATHS 6
static void many_paths(const fixture *f, int prefix) {
    static int32_t s1[128], s2[128];
    static kr_stamp st[128];
    spread_tokens(f, 128, s1, s2, st);
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(f->m, kr_pool_bytes_for(f->m, 512) * (2 * N_PATHS + 1), &err);
    assert_non_null(pool);
    kr_cache *base = kr_cache_create(pool, 0, &err), *batch[N_PATHS], *alone[N_PATHS];
    assert_non_null(base);
    assert_int_equal(kr_cache_append(&base, 1, s1, s2, st, prefix, NULL, &err), 0);
    for (int p = 0; p < N_PATHS; p++) {
        assert_non_null(batch[p] = kr_cache_fork(base, &err));
        assert_non_null(alone[p] = kr_cache_fork(base, &err));
    }
    static float lb[N_PATHS][V], la[V];
    for (int step = 0; step < 20; step++) {
        int32_t t1[N_PATHS], t2[N_PATHS];
        kr_stamp ts[N_PATHS];
        for (int p = 0; p < N_PATHS; p++) { /* each path its own tokens */
            t1[p] = s1[(7 * p + step) % 128];
            t2[p] = s2[(3 * p + step) % 128];
            ts[p] = st[prefix + step];
        }
        assert_int_equal(kr_cache_append(batch, N_PATHS, t1, t2, ts, 1, &lb[0][0], &err), 0);
        for (int p = 0; p < N_PATHS; p++) {
            assert_int_equal(kr_cache_append(&alone[p], 1, &t1[p], &t2[p], &ts[p], 1, la, &err), 0);
            assert_memory_equal(la, lb[p], sizeof la);
        }
    }
    for (int p = 0; p < N_PATHS; p++) {
        kr_cache_free(batch[p]);
        kr_cache_free(alone[p]);
    }
    kr_cache_free(base);
    kr_pool_free(pool);
}

static void test_many_paths_step(void **state) {
    (void)state;
    many_paths(&tiny, 40);
    many_paths(&tiny, 100);
    many_paths(&shifted, 40);
    many_paths(&shifted, 100);
}

/* Generation across separate calls equals one call over the concatenated input. */
static void generate_split(const fixture *f) {
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(f->m, kr_pool_bytes_for(f->m, 512) * 2, &err);
    assert_non_null(pool);
    kr_cache *one = kr_cache_create(pool, 0, &err), *two = kr_cache_create(pool, 0, &err);
    assert_non_null(one);
    assert_non_null(two);
    kr_generate_request r = {.s1 = f->s1,
                             .s2 = f->s2,
                             .stamps = f->st,
                             .n_append = 40,
                             .new_stamps = f->st + 40,
                             .n_new = 8,
                             .sampling = {1.0, 1, 1.0},
                             .seed = 1};
    int32_t a1[8], a2[8], b1[8], b2[8];
    assert_int_equal(kr_generate(one, &r, a1, a2, &err), 0);
    assert_int_equal(kr_cache_length(one), 48);
    kr_generate_request first = r;
    first.n_append = 17;
    first.n_new = 0;
    assert_int_equal(kr_generate(two, &first, NULL, NULL, &err), 0);
    kr_generate_request second = r;
    second.s1 += 17;
    second.s2 += 17;
    second.stamps += 17;
    second.n_append = 23;
    assert_int_equal(kr_generate(two, &second, b1, b2, &err), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(a1[i], b1[i]);
        assert_int_equal(a2[i], b2[i]);
    }
    /* and the greedy tokens are the reference's argmax, step by step */
    int32_t s1[48], s2[48];
    memcpy(s1, f->s1, sizeof s1);
    memcpy(s2, f->s2, sizeof s2);
    for (int i = 0; i < 8; i++) {
        float l1[V], l2[V], ctx[48 * 64];
        assert_int_equal(kr_predictor_window(f->m, s1, s2, f->st, 40 + i, l1, ctx, &err), 0);
        int best = 0;
        for (int k = 1; k < V; k++)
            if (l1[k] > l1[best]) best = k;
        assert_int_equal(best, a1[i]);
        assert_int_equal(kr_predictor_s2_logits(f->m, ctx, 40 + i, best, l2, &err), 0);
        int best2 = 0;
        for (int k = 1; k < V; k++)
            if (l2[k] > l2[best2]) best2 = k;
        assert_int_equal(best2, a2[i]);
        s1[40 + i] = a1[i];
        s2[40 + i] = a2[i];
    }
    kr_cache_free(one);
    kr_cache_free(two);
    kr_pool_free(pool);
}

static void test_generate_across_calls(void **state) {
    (void)state;
    generate_split(&tiny);
    generate_split(&shifted);
}

static void test_generate_fails_closed(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(tiny.m, kr_pool_bytes_for(tiny.m, 64), &err);
    kr_cache *c = kr_cache_create(pool, 32, &err);
    assert_non_null(c);
    kr_generate_request r = {.s1 = tiny.s1,
                             .s2 = tiny.s2,
                             .stamps = tiny.st,
                             .n_append = 30,
                             .new_stamps = tiny.st,
                             .n_new = 3,
                             .sampling = {1.0, 1, 1.0}};
    int32_t a[3], b[3];
    assert_int_equal(kr_generate(c, &r, a, b, &err), -1);
    assert_non_null(strstr(err.msg, "max_context"));
    assert_int_equal(kr_cache_length(c), 0);
    kr_pool_stats st;
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 0);
    r.n_new = 2; /* exactly fills the capacity */
    assert_int_equal(kr_generate(c, &r, a, b, &err), 0);
    assert_int_equal(kr_cache_length(c), 32);
    kr_cache_free(c);
    kr_pool_free(pool);
}

static void test_pool_accounting(void **state) {
    (void)state;
    kr_error err = {0};
    size_t block = kr_pool_bytes_for(tiny.m, KR_BLOCK_LEN);
    kr_pool *pool = kr_pool_create(tiny.m, 10 * block, &err);
    assert_non_null(pool);
    kr_pool_stats st;
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_total, 10);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(st.block_bytes, block);

    kr_cache *a = kr_cache_create(pool, 0, &err);
    assert_int_equal(kr_cache_append(&a, 1, tiny.s1, tiny.s2, tiny.st, 40, NULL, &err), 0);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 3); /* 40 positions in blocks of 16 */
    assert_int_equal(kr_cache_bytes(a), 3 * block);

    /* forks share the prefix: nothing is copied until a fork writes into the shared,
     * partly filled last block, and then only that block */
    kr_cache *f1 = kr_cache_fork(a, &err), *f2 = kr_cache_fork(a, &err);
    assert_non_null(f1);
    assert_non_null(f2);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 3);
    assert_int_equal(
        kr_cache_append(&f1, 1, tiny.s1 + 40, tiny.s2 + 40, tiny.st + 40, 1, NULL, &err), 0);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 4);

    /* exhaustion: an error, and the caches that exist are intact */
    kr_cache *big = kr_cache_create(pool, 0, &err);
    int32_t s1[200] = {0}, s2[200] = {0};
    kr_stamp sts[200];
    for (int i = 0; i < 200; i++)
        sts[i] = tiny.st[0];
    assert_int_equal(kr_cache_append(&big, 1, s1, s2, sts, 200, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "exhausted"));
    assert_int_equal(kr_cache_length(big), 0);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 4);
    float l1[V], r1[V], r2[V];
    assert_int_equal(kr_cache_s1_logits(a, l1, &err), 0);
    reference(&tiny, 40, r1, r2);
    assert_true(max_rel(l1, r1, V) < 1e-5);
    assert_int_equal(kr_cache_s1_logits(f1, l1, &err), 0);
    reference(&tiny, 41, r1, r2);
    assert_true(max_rel(l1, r1, V) < 1e-5);

    /* freeing returns memory: shared blocks only when their last holder goes */
    kr_cache_free(a);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 4);
    kr_cache_free(f2);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 3); /* f1: 2 shared + its own copy */
    kr_cache_reset(f1);
    assert_int_equal(kr_cache_length(f1), 0);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(kr_cache_append(&big, 1, s1, s2, sts, 150, NULL, &err), 0);
    kr_cache_free(f1);
    kr_cache_free(big);
    kr_pool_stats_get(pool, &st);
    assert_int_equal(st.blocks_used, 0);
    kr_pool_free(pool);
}

static kr_forecast_result run(const tu_case *tc, bool use_cache, kr_sampling s, int samples,
                              bool paths) {
    kr_forecast_request r = tc->req;
    r.use_cache = use_cache;
    r.sampling = s;
    r.samples = samples;
    r.seed = 42;
    r.return_paths = paths;
    r.n_quantiles = 3;
    r.quantiles[0] = 0.1;
    r.quantiles[1] = 0.5;
    r.quantiles[2] = 0.9;
    kr_forecast_result res;
    kr_error err = {0};
    int rc = kr_forecast(tiny.m, NULL, &r, &res, &err);
    if (rc) fprintf(stderr, "forecast: %s\n", err.msg);
    assert_int_equal(rc, 0);
    return res;
}

static double max_rel_d(const double *a, const double *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(a[i] - b[i]) / (fabs(b[i]) > 1e-6 ? fabs(b[i]) : 1e-6);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

static void test_forecast_paths(void **state) {
    (void)state;
    json_t *g = tu_load_golden();
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(g, "cases"), ci, c) {
        tu_case tc;
        assert_int_equal(tu_case_load(c, &tc), 0);
        int P = tc.req.horizon, S = 6;
        kr_sampling sampled = {1.0, 0, 0.9};
        kr_forecast_result cached = run(&tc, true, sampled, S, true);
        kr_forecast_result ref = run(&tc, false, sampled, S, true);
        size_t n = (size_t)S * KR_D_IN * P;
        /* the cache changes no sampled token: same paths, path for path */
        assert_true(max_rel_d(cached.paths, ref.paths, n) < 1e-5);
        assert_true(max_rel_d(cached.mean, ref.mean, (size_t)KR_D_IN * P) < 1e-5);
        /* paths are not pre-averaged: they differ, and their mean is `mean` */
        int differ = 0;
        for (size_t k = 0; k < (size_t)KR_D_IN * P; k++)
            differ += cached.paths[k] != cached.paths[(size_t)KR_D_IN * P + k];
        assert_true(differ > 0);
        for (int col = 0; col < KR_D_IN; col++)
            for (int i = 0; i < P; i++) {
                double sum = 0, lo = INFINITY, hi = -INFINITY;
                for (int p = 0; p < S; p++) {
                    double v = cached.paths[((size_t)p * KR_D_IN + col) * P + i];
                    sum += v;
                    lo = fmin(lo, v);
                    hi = fmax(hi, v);
                }
                double mean = cached.mean[(size_t)col * P + i];
                assert_true(fabs(sum / S - mean) <= 1e-5 * fmax(fabs(mean), 1.0));
                double q1 = cached.quantiles[((size_t)0 * KR_D_IN + col) * P + i];
                double q5 = cached.quantiles[((size_t)1 * KR_D_IN + col) * P + i];
                double q9 = cached.quantiles[((size_t)2 * KR_D_IN + col) * P + i];
                assert_true(lo <= q1 && q1 <= q5 && q5 <= q9 && q9 <= hi);
            }
        for (int i = 0; i < P; i++) {
            double pu = cached.prob_close_up[i];
            assert_true(pu >= 0.0 && pu <= 1.0);
            assert_true(fabs(pu * S - round(pu * S)) < 1e-9);
        }
        /* greedy: every path is the greedy path */
        kr_sampling greedy = {1.0, 1, 1.0};
        kr_forecast_result one = run(&tc, true, greedy, 1, true);
        kr_forecast_result many = run(&tc, true, greedy, 4, true);
        for (int p = 0; p < 4; p++)
            assert_true(max_rel_d(many.paths + (size_t)p * KR_D_IN * P, one.paths,
                                  (size_t)KR_D_IN * P) < 1e-6);
        printf("# %s: %d sampled paths equal the reference's; cached %d / recomputed %d steps\n",
               tc.name, S, cached.usage.cached_steps, cached.usage.recomputed_steps);
        kr_forecast_result_free(&cached);
        kr_forecast_result_free(&ref);
        kr_forecast_result_free(&one);
        kr_forecast_result_free(&many);
        tu_case_free(&tc);
    }
    json_decref(g);
}

static void test_seed_determinism(void **state) {
    (void)state;
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    kr_sampling s = {1.3, 0, 0.95};
    kr_forecast_result a = run(&tc, true, s, 5, true), b = run(&tc, true, s, 5, true);
    size_t n = (size_t)5 * KR_D_IN * tc.req.horizon;
    assert_memory_equal(a.paths, b.paths, n * sizeof(double));
    kr_forecast_result_free(&a);
    kr_forecast_result_free(&b);
    tu_case_free(&tc);
    json_decref(g);
}

/* Requests generated together in one batch get what each gets alone (greedy), and one that
 * cannot run (over its capacity) fails alone. */
static void test_generate_batch(void **state) {
    (void)state;
    kr_error err = {0};
    kr_pool *pool = kr_pool_create(shifted.m, kr_pool_bytes_for(shifted.m, 512) * 8, &err);
    assert_non_null(pool);
    enum { N = 4 };
    int append[N] = {40, 7, 0, 30}, fresh[N] = {8, 3, 5, 9}, cap[N] = {0, 0, 0, 32};
    kr_cache *alone[N], *together[N];
    kr_generate_request reqs[N];
    int32_t a1[N][16], a2[N][16], b1[N][16], b2[N][16];
    int32_t *o1[N], *o2[N];
    for (int i = 0; i < N; i++) {
        alone[i] = kr_cache_create(pool, cap[i], &err);
        together[i] = kr_cache_create(pool, cap[i], &err);
        assert_non_null(alone[i]);
        assert_non_null(together[i]);
        if (append[i] == 0) { /* continues a cache that already holds 12 tokens */
            kr_generate_request pre = {.s1 = shifted.s1,
                                       .s2 = shifted.s2,
                                       .stamps = shifted.st,
                                       .n_append = 12,
                                       .sampling = {1.0, 1, 1.0}};
            assert_int_equal(kr_generate(alone[i], &pre, NULL, NULL, &err), 0);
            assert_int_equal(kr_generate(together[i], &pre, NULL, NULL, &err), 0);
        }
        reqs[i] = (kr_generate_request){.s1 = shifted.s1,
                                        .s2 = shifted.s2,
                                        .stamps = shifted.st,
                                        .n_append = append[i],
                                        .new_stamps = shifted.st + 12,
                                        .n_new = fresh[i],
                                        .sampling = {1.0, 1, 1.0}};
        o1[i] = b1[i];
        o2[i] = b2[i];
    }
    kr_error errs[N];
    assert_int_equal(kr_generate_batch(together, reqs, N, o1, o2, errs), -1);
    for (int i = 0; i < N; i++) {
        int rc = kr_generate(alone[i], &reqs[i], a1[i], a2[i], &err);
        if (i == 3) { /* 30 + 9 > 32 */
            assert_int_equal(rc, -1);
            assert_int_equal(errs[i].code, KR_E_CAPACITY);
            assert_int_equal(kr_cache_length(together[i]), 0);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(errs[i].code, 0);
        assert_int_equal(kr_cache_length(together[i]), kr_cache_length(alone[i]));
        for (int k = 0; k < fresh[i]; k++) {
            assert_int_equal(a1[i][k], b1[i][k]);
            assert_int_equal(a2[i][k], b2[i][k]);
        }
    }
    for (int i = 0; i < N; i++) {
        kr_cache_free(alone[i]);
        kr_cache_free(together[i]);
    }
    kr_pool_free(pool);
}

/* The window is at most max_context tokens: a horizon of exactly that many rows works (every
 * row of the last window is generated), one more is an error naming the field. */
static void test_horizon_limit(void **state) {
    (void)state;
    tu_case tc;
    json_t *g = tu_first_case(&tc);
    tc.req.future_timestamps = NULL;
    tc.req.max_context = 24;
    tc.req.horizon = 24;
    kr_sampling s = {1.0, 0, 0.9};
    kr_forecast_result a = run(&tc, true, s, 3, true), b = run(&tc, false, s, 3, true);
    assert_true(max_rel_d(a.paths, b.paths, (size_t)3 * KR_D_IN * 24) < 1e-5);
    for (size_t i = 0; i < (size_t)3 * KR_D_IN * 24; i++)
        assert_true(fabs(a.paths[i]) < 1e7);
    kr_forecast_result_free(&a);
    kr_forecast_result_free(&b);
    tc.req.horizon = 25;
    kr_forecast_result res;
    kr_error err = {0};
    assert_int_equal(kr_forecast(tiny.m, NULL, &tc.req, &res, &err), -1);
    assert_non_null(strstr(err.msg, "horizon"));
    tu_case_free(&tc);
    json_decref(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_fixture),        cmocka_unit_test(test_parity_kv_shift),
        cmocka_unit_test(test_generate_across_calls), cmocka_unit_test(test_generate_fails_closed),
        cmocka_unit_test(test_pool_accounting),       cmocka_unit_test(test_forecast_paths),
        cmocka_unit_test(test_seed_determinism),      cmocka_unit_test(test_horizon_limit),
        cmocka_unit_test(test_generate_batch),        cmocka_unit_test(test_long_chunks),
        cmocka_unit_test(test_many_paths_step),
    };
    return cmocka_run_group_tests_name("cache", tests, setup, teardown);
}
