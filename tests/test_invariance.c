/* test_invariance.c — a row's numbers depend on that row alone: the same bits whether it is
 * computed alone or in a batch, in one chunk or many, on any thread count and on every
 * kernel level this CPU has. This is what makes a request's answer independent of the
 * traffic it was batched with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h"         /* kr_cache_s1_logits */
#include "forecast_impl.h" /* kr_encode_fit */
#include "kronos.h"
#include "matmul.h"
#include "nn.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t lcg_state = 12345;
static float lcg(void) { /* uniform in [-1, 1) */
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)((lcg_state >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

/* ---- linear layers ---------------------------------------------------------------------- */

/* a partial panel and odd sizes on purpose; LIN_OUT2 spans a whole task of panels (the narrow
 * kernels for one or two rows take up to 8 panels at once) and a partial one */
enum { LIN_OUT = 70, LIN_IN = 53, LIN_ROWS = 41, LIN_OUT2 = 200 };

static void linear_rows(int OUT, int IN, int ROWS) {
    float *w = malloc(OUT * IN * sizeof(float)), *b = malloc(OUT * sizeof(float));
    float *wp = malloc(kr_linear_packed_floats(OUT, IN) * sizeof(float));
    float *x = malloc(ROWS * IN * sizeof(float)), *y = malloc(ROWS * OUT * sizeof(float));
    float *solo = malloc(ROWS * OUT * sizeof(float)), *ref = malloc(ROWS * OUT * sizeof(float));
    assert_true(w && b && wp && x && y && solo && ref);
    for (int i = 0; i < OUT * IN; i++)
        w[i] = lcg();
    for (int i = 0; i < OUT; i++)
        b[i] = lcg();
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = lcg();
    kr_linear_pack(wp, w, OUT, IN);
    kr_linear plain = {.w = w, .b = b, .out = OUT, .in = IN};
    kr_linear packed = {.b = b, .out = OUT, .in = IN, .wp = wp};
    kr_linear_forward(ref, x, ROWS, &plain); /* the portable chain, element by element */
    kr_simd best = kr_simd_level();
    for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
        assert_int_equal(kr_simd_set((kr_simd)s), 0);
        for (int r = 0; r < ROWS; r++)
            kr_linear_forward(solo + r * OUT, x + r * IN, 1, &packed);
        assert_memory_equal(solo, ref, ROWS * OUT * sizeof(float));
        for (int n = 1; n <= ROWS; n++) { /* every batch size: each row as computed alone */
            kr_linear_forward(y, x, n, &packed);
            assert_memory_equal(y, ref, (size_t)n * OUT * sizeof(float));
        }
        print_message("# %s: %d rows in every batch size equal the portable chain\n",
                      kr_simd_name((kr_simd)s), ROWS);
    }
    kr_simd_set(best);
    free(w), free(b), free(wp), free(x), free(y), free(solo), free(ref);
}

static void test_linear_rows(void **state) {
    (void)state;
    linear_rows(LIN_OUT, LIN_IN, LIN_ROWS);
    linear_rows(LIN_OUT2, LIN_IN, 5);
}

/* A stacked layer written into its parts equals the whole product cut afterwards, at every
 * level; parts that would cut a panel are refused. */
static void test_linear_parts(void **state) {
    (void)state;
    enum { PO = 96, PI = 37, PR = 11, W = PO / 3 };
    float *w = malloc(PO * PI * sizeof(float)), *b = malloc(PO * sizeof(float));
    float *wp = malloc(kr_linear_packed_floats(PO, PI) * sizeof(float));
    float *x = malloc(PR * PI * sizeof(float)), *whole = malloc(PR * PO * sizeof(float));
    float *part = malloc(3 * PR * W * sizeof(float));
    assert_true(w && b && wp && x && whole && part);
    for (int i = 0; i < PO * PI; i++)
        w[i] = lcg();
    for (int i = 0; i < PO; i++)
        b[i] = lcg();
    for (int i = 0; i < PR * PI; i++)
        x[i] = lcg();
    kr_linear_pack(wp, w, PO, PI);
    kr_linear packed = {.b = b, .out = PO, .in = PI, .wp = wp};
    float *ys[3] = {part, part + PR * W, part + 2 * PR * W};
    kr_simd best = kr_simd_level();
    for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
        assert_int_equal(kr_simd_set((kr_simd)s), 0);
        for (int n = 1; n <= PR; n++) {
            kr_linear_forward(whole, x, n, &packed);
            assert_int_equal(kr_linear_forward_parts(ys, 3, x, n, &packed), 0);
            for (int r = 0; r < n; r++)
                for (int p = 0; p < 3; p++)
                    assert_memory_equal(ys[p] + r * W, whole + r * PO + p * W, W * sizeof(float));
        }
    }
    kr_simd_set(best);
    assert_int_equal(kr_linear_forward_parts(ys, 4, x, 1, &packed), -1); /* 24 columns */
    assert_int_equal(kr_linear_forward_parts(ys, 5, x, 1, &packed), -1); /* not equal */
    free(w), free(b), free(wp), free(x), free(whole), free(part);
}

/* ---- attention's row path ---------------------------------------------------------------- */

/* Every output of attend_row_path, level by level: the first level's recorded, each other
 * level's compared with it bit for bit (the levels block rows, keys and columns differently:
 * attention_lanes.h). */
static tu_level_log level_log;

/* kr_attend runs each head alone; kr_attend_rows takes heads in groups (four heads of 64
 * share one pass over the values), scores aligned groups of 16 keys four at a time, and
 * runs rows sharing a prefix as a tile. All must give the same bits, for any number of keys
 * (whole groups, a partial one), block length and head count. */
static void attend_row_path(int d, int n_heads, int block_len) {
    enum { BLOCKS = 8, ROWS = 3, TILE_ROWS = 5 };
    float *blk[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) { /* one layer: K transposed [d][B], then V [B][d] */
        blk[b] = malloc((size_t)2 * block_len * d * sizeof(float));
        assert_non_null(blk[b]);
        for (size_t i = 0; i < (size_t)2 * block_len * d; i++)
            blk[b][i] = lcg();
    }
    kr_kv_view kv = {blk, block_len, d, 0};
    int max_keys = BLOCKS * block_len, n_keys[ROWS] = {max_keys, max_keys - 19, 37};
    float *q = malloc((size_t)TILE_ROWS * d * sizeof(float));
    float *ref = malloc((size_t)TILE_ROWS * d * sizeof(float));
    float *out = malloc((size_t)TILE_ROWS * d * sizeof(float));
    float *scratch = malloc(kr_attend_scores_floats(max_keys, n_heads, d) * sizeof(float));
    assert_true(q && ref && out && scratch);
    for (int i = 0; i < TILE_ROWS * d; i++)
        q[i] = 2 * lcg();
    kr_attn_row rows[ROWS];
    for (int r = 0; r < ROWS; r++) {
        rows[r] = (kr_attn_row){&kv, n_keys[r]};
        kr_attend(ref + (size_t)r * d, q + (size_t)r * d, &kv, 0, n_keys[r], n_heads, scratch);
    }
    kr_attend_rows(out, q, rows, ROWS, d, 0, n_heads, scratch, max_keys);
    assert_memory_equal(out, ref, (size_t)ROWS * d * sizeof(float));
    tu_level_log_check(&level_log, ref, (size_t)ROWS * d);
    for (int r = 0; r < ROWS; r++) { /* one row a call: a decode step of one path */
        kr_attend_rows(out, q + (size_t)r * d, &rows[r], 1, d, 0, n_heads, scratch, max_keys);
        assert_memory_equal(out, ref + (size_t)r * d, (size_t)d * sizeof(float));
    }
    /* five rows over one prefix of >= 64 keys: the tile path, each row's own keys after it */
    kr_attn_row tile[TILE_ROWS];
    int tile_keys[TILE_ROWS] = {max_keys, max_keys - 19, 100, max_keys - 7, max_keys - 40};
    for (int r = 0; r < TILE_ROWS; r++) {
        tile[r] = (kr_attn_row){&kv, tile_keys[r]};
        kr_attend(ref + (size_t)r * d, q + (size_t)r * d, &kv, 0, tile_keys[r], n_heads, scratch);
    }
    kr_attend_rows(out, q, tile, TILE_ROWS, d, 0, n_heads, scratch, max_keys);
    assert_memory_equal(out, ref, (size_t)TILE_ROWS * d * sizeof(float));
    tu_level_log_check(&level_log, ref, (size_t)TILE_ROWS * d);
    /* a causal run of rows (a prefill: each row one key more), its first rows over one cache
     * and the rest over a second one that holds the same first blocks and then its own: a
     * tile of one cache shares every key below its rows' ends, wherever they fall in the
     * blocks; a tile over both, the whole blocks they hold in common. 70 rows end in a
     * tile of 6 (half a tile or less: its first half scored alone), 90 in one of 26 (its
     * second half partly padding) */
    enum { RUN = 90, OWN_FROM = 40 };
    float *blk2[BLOCKS], *own[2];
    for (int b = 0; b < BLOCKS; b++)
        blk2[b] = blk[b];
    for (int i = 0; i < 2; i++) { /* the second cache's last two blocks are its own */
        own[i] = malloc((size_t)2 * block_len * d * sizeof(float));
        assert_non_null(own[i]);
        for (size_t k = 0; k < (size_t)2 * block_len * d; k++)
            own[i][k] = lcg();
        blk2[BLOCKS - 2 + i] = own[i];
    }
    kr_kv_view kv2 = {blk2, block_len, d, 0};
    float *qr = malloc((size_t)RUN * d * sizeof(float)),
          *rr = malloc((size_t)RUN * d * sizeof(float));
    float *orr = malloc((size_t)RUN * d * sizeof(float));
    assert_true(qr && rr && orr);
    for (int i = 0; i < RUN * d; i++)
        qr[i] = 2 * lcg();
    kr_attn_row run[RUN];
    const int run_rows[] = {70, RUN};
    for (int t = 0; t < 2; t++) {
        int n = run_rows[t];
        for (int r = 0; r < n; r++) {
            run[r] = (kr_attn_row){r < OWN_FROM ? &kv : &kv2, max_keys - n + r + 1};
            kr_attend(rr + (size_t)r * d, qr + (size_t)r * d, run[r].kv, 0, run[r].n_keys, n_heads,
                      scratch);
        }
        kr_attend_rows(orr, qr, run, n, d, 0, n_heads, scratch, max_keys);
        assert_memory_equal(orr, rr, (size_t)n * d * sizeof(float));
        tu_level_log_check(&level_log, rr, (size_t)n * d);
    }
    for (int b = 0; b < BLOCKS; b++)
        free(blk[b]);
    free(own[0]), free(own[1]), free(qr), free(rr), free(orr);
    free(q), free(ref), free(out), free(scratch);
}

/* On every level the CPU runs, from the same data: the same bits as the first level. */
static void test_attention_row_path(void **state) {
    (void)state;
    kr_simd best = kr_simd_level();
    for (int level = KR_SIMD_GENERIC; level <= (int)best; level++) {
        assert_int_equal(kr_simd_set((kr_simd)level), 0);
        lcg_state = 12345;
        tu_level_log_start(&level_log, level == KR_SIMD_GENERIC);
        attend_row_path(256, 4, 16);  /* four heads of 64: one group */
        attend_row_path(512, 8, 32);  /* Kronos-small's heads: two groups */
        attend_row_path(96, 3, 16);   /* heads of 32, not a multiple of four: one at a time */
        attend_row_path(256, 4, 24);  /* blocks of 24: a row's own keys scored key by key */
        attend_row_path(832, 16, 16); /* Kronos-base's heads of 52: each level's tails differ */
        attend_row_path(832, 4, 16);  /* its dependency layer's four heads of 208 */
        attend_row_path(120, 3, 16);  /* heads of 40 */
        tu_level_log_done(&level_log);
        print_message("# %s: attention's row and tile paths, %zu outputs\n",
                      kr_simd_name((kr_simd)level), level_log.at);
    }
    kr_simd_set(best);
    tu_level_log_free(&level_log);
}

/* ---- element-wise exp ------------------------------------------------------------------- */

/* exp_array's vectors give each element the bits of its scalar lane exp1, in the build for
 * every level this CPU runs: a sweep of bit patterns over [-100, 88] plus the edges. */
#define KR_LANES_TEMPLATE "lanes_probe.h"
#include "lanes.h"
KR_DISPATCH(exp_sweep, (float *v, float *s, int n), (v, s, n))

static void test_exp_lanes(void **state) {
    (void)state;
    enum { N = 1 << 16 };
    float *v = malloc(N * sizeof(float)), *sc = malloc(N * sizeof(float));
    float *in = malloc(N * sizeof(float));
    assert_true(v && sc && in);
    kr_simd best = kr_simd_level();
    uint32_t lo = 0x3f800000u; /* walk |x| from 1e-38-ish upwards on both signs */
    for (int pass = 0; pass < 64; pass++) {
        for (int i = 0; i < N; i++) {
            uint32_t u = lo + (uint32_t)pass * 0x01000000u / 8 + (uint32_t)i * 97u;
            union {
                uint32_t u;
                float f;
            } c = {.u = (u & 0x7fffffffu) % 0x42c80000u}; /* |x| < 100 */
            float x = (i & 1) ? -c.f : c.f;
            in[i] = x > 88.0f ? 88.0f : x;
        }
        in[0] = -87.3f;
        in[1] = -87.29f;
        in[2] = 0.0f;
        in[3] = -0.0f;
        in[4] = 88.0f;
        for (int level = KR_SIMD_GENERIC; level <= (int)best; level++) {
            assert_int_equal(kr_simd_set((kr_simd)level), 0);
            memcpy(v, in, N * sizeof(float));
            memcpy(sc, in, N * sizeof(float));
            exp_sweep(v, sc, N);
            assert_memory_equal(v, sc, N * sizeof(float));
        }
    }
    kr_simd_set(best);
    free(v), free(sc), free(in);
}

/* The AVX-512 stores of 16 keys (nn_lanes.h) transpose them in registers: r[i][l] becomes
 * the old r[l][i]. (The other levels store them one by one; the conformance tests on each
 * level cover both.) */
static void test_transpose16(void **state) {
    (void)state;
#ifdef KR_LANES_X86
    if (kr_simd_level() < KR_SIMD_AVX512) skip();
    float m[16][16];
    for (int i = 0; i < 16; i++)
        for (int l = 0; l < 16; l++)
            m[i][l] = (float)(i * 16 + l) + 0.5f;
    transpose_probe_avx512(&m[0][0]);
    for (int i = 0; i < 16; i++)
        for (int l = 0; l < 16; l++)
            assert_true(m[i][l] == (float)(l * 16 + i) + 0.5f);
#else
    skip();
#endif
}

/* ---- the decoder on KV caches ----------------------------------------------------------- */

#define PREFIX 80 /* past 64 keys: forks attend over the shared prefix as a tile */
#define PATHS  9  /* from 8 rows the row-wise loops run on the pool */

static kr_model *model;
static int32_t tok1[PREFIX + 24], tok2[PREFIX + 24];
static kr_stamp stamps[PREFIX + 24];

static int setup(void **state) {
    (void)state;
    model = tu_load_tiny(512);
    if (!model) return -1;
    tu_tokens(tok1, tok2, stamps, PREFIX + 24, 37, 91);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(model);
    return 0;
}

enum fork_mode { FORK_BATCHED, FORK_ALONE, FORK_LOGITS_APART };

/* s1 and s2 logits of PATHS forks of one prefix, each given its own token: all at once
 * (the tile path; the caches' bookkeeping on the pool), one fork at a time (the row path;
 * bookkeeping on the caller), or all at once with the s1 logits asked for apart
 * (kr_cache_s1_logits: dep_kv and proj_s1 as two products rather than the stacked one). */
static void fork_logits(enum fork_mode mode, float *l1, float *l2) {
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)64 << 20, &err);
    assert_non_null(pool);
    kr_cache *prefix = kr_cache_create(pool, 0, &err), *c[PATHS];
    assert_int_equal(kr_cache_append(&prefix, 1, tok1, tok2, stamps, PREFIX, NULL, &err), 0);
    int32_t a[PATHS], bb[PATHS], chosen[PATHS];
    kr_stamp st[PATHS];
    for (int p = 0; p < PATHS; p++) {
        assert_non_null(c[p] = kr_cache_fork(prefix, &err));
        a[p] = (int32_t)(100 + 17 * p);
        bb[p] = (int32_t)(900 - 31 * p);
        chosen[p] = (int32_t)(7 * p);
        st[p] = stamps[PREFIX];
    }
    if (mode == FORK_BATCHED) {
        assert_int_equal(kr_cache_append(c, PATHS, a, bb, st, 1, l1, &err), 0);
        assert_int_equal(kr_cache_s2_logits(c, PATHS, chosen, l2, &err), 0);
    } else if (mode == FORK_LOGITS_APART) {
        assert_int_equal(kr_cache_append(c, PATHS, a, bb, st, 1, NULL, &err), 0);
        for (int p = 0; p < PATHS; p++)
            assert_int_equal(kr_cache_s1_logits(c[p], l1 + p * 1024, &err), 0);
        assert_int_equal(kr_cache_s2_logits(c, PATHS, chosen, l2, &err), 0);
    } else {
        for (int p = 0; p < PATHS; p++) {
            assert_int_equal(kr_cache_append(&c[p], 1, &a[p], &bb[p], st, 1, l1 + p * 1024, &err),
                             0);
            assert_int_equal(kr_cache_s2_logits(&c[p], 1, &chosen[p], l2 + p * 1024, &err), 0);
        }
    }
    for (int p = 0; p < PATHS; p++)
        kr_cache_free(c[p]);
    kr_cache_free(prefix);
    kr_pool_free(pool);
}

static void test_batch_equals_alone(void **state) {
    (void)state;
    static float a1[PATHS * 1024], a2[PATHS * 1024], b1[PATHS * 1024], b2[PATHS * 1024];
    static float c1[PATHS * 1024], c2[PATHS * 1024];
    fork_logits(FORK_BATCHED, a1, a2);
    fork_logits(FORK_ALONE, b1, b2);
    fork_logits(FORK_LOGITS_APART, c1, c2);
    assert_memory_equal(a1, b1, sizeof a1);
    assert_memory_equal(a2, b2, sizeof a2);
    assert_memory_equal(a1, c1, sizeof a1);
    assert_memory_equal(a2, c2, sizeof a2);
}

/* The s1 logits after PREFIX + 24 tokens fed in the given chunks, and the s2 logits for
 * three s1 tokens (the dependency layer's keys and values of every position: a chunk of
 * one token writes them from the stacked product, a longer one from dep_kv alone). */
static void chunked_logits(const int *chunks, int n_chunks, float *l1, float *l2) {
    kr_error err;
    kr_pool *pool = kr_pool_create(model, (size_t)16 << 20, &err);
    kr_cache *c = kr_cache_create(pool, 0, &err);
    assert_non_null(c);
    int at = 0;
    for (int i = 0; i < n_chunks; i++) {
        assert_int_equal(
            kr_cache_append(&c, 1, tok1 + at, tok2 + at, stamps + at, chunks[i], l1, &err), 0);
        at += chunks[i];
    }
    assert_int_equal(at, PREFIX + 24);
    kr_cache *three[3] = {c, c, c};
    int32_t chosen[3] = {0, 511, 1023};
    assert_int_equal(kr_cache_s2_logits(three, 3, chosen, l2, &err), 0);
    kr_cache_free(c);
    kr_pool_free(pool);
}

static void test_chunking_changes_nothing(void **state) {
    (void)state;
    static float one[1024], split[1024], tokens[1024];
    static float one2[3 * 1024], split2[3 * 1024], tokens2[3 * 1024];
    const int whole[] = {PREFIX + 24}, parts[] = {1, PREFIX - 1, 17, 7};
    int each[PREFIX + 24];
    for (int i = 0; i < PREFIX + 24; i++)
        each[i] = 1;
    chunked_logits(whole, 1, one, one2);
    chunked_logits(parts, 4, split, split2);
    chunked_logits(each, PREFIX + 24, tokens, tokens2);
    assert_memory_equal(one, split, sizeof one);
    assert_memory_equal(one, tokens, sizeof one);
    assert_memory_equal(one2, split2, sizeof one2);
    assert_memory_equal(one2, tokens2, sizeof one2);
}

/* ---- forecasts batched across requests ------------------------------------------------------ */

static int stop_at_3(void *ctx) {
    int *calls = ctx;
    return ++*calls > 3 ? KR_E_DEADLINE : 0;
}

/* Five different requests (lengths, windows that slide, paths, sampling) in one batch, plus
 * one invalid and one cancelled: each valid one equals its solo run bit for bit, the bad
 * ones fail with their own codes, and nothing else changes. */
static void test_forecast_batch(void **state) {
    (void)state;
    json_t *g = tu_load_golden();
    json_t *cases = json_object_get(g, "cases");
    enum { N = 7 };
    tu_case tc[N];
    const kr_forecast_request *reqs[N];
    kr_forecast_request q[N];
    int calls = 0;
    for (int k = 0; k < N; k++) {
        assert_int_equal(tu_case_load(json_array_get(cases, (size_t)(k % 4)), &tc[k]), 0);
        q[k] = tc[k].req;
        q[k].samples = 1 + 3 * k;
        q[k].seed = (uint64_t)k;
        q[k].sampling = (kr_sampling){.temperature = 1.0, .top_k = 0, .top_p = 0.9};
        q[k].return_paths = true;
        q[k].n_quantiles = 2;
        q[k].quantiles[0] = 0.1;
        q[k].quantiles[1] = 0.9;
        reqs[k] = &q[k];
    }
    q[2].context.n = 1; /* invalid: one candle */
    q[5].cancel = (kr_cancel){stop_at_3, &calls};
    q[6].sampling.top_k = 1; /* greedy */
    kr_forecast_result res[N], solo;
    kr_error errs[N], err;
    assert_int_equal(kr_forecast_batch(model, NULL, reqs, N, res, errs), -1);
    assert_int_equal(errs[2].code, KR_E_INVALID);
    assert_int_equal(errs[5].code, KR_E_DEADLINE);
    for (int k = 0; k < N; k++) {
        if (k == 2 || k == 5) continue;
        assert_int_equal(errs[k].code, 0);
        assert_int_equal(kr_forecast(model, NULL, &q[k], &solo, &err), 0);
        tu_same_result(&res[k], &solo);
        kr_forecast_result_free(&solo);
        kr_forecast_result_free(&res[k]);
    }
    for (int k = 0; k < N; k++)
        tu_case_free(&tc[k]);
    json_decref(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_rows),
        cmocka_unit_test(test_linear_parts),
        cmocka_unit_test(test_attention_row_path),
        cmocka_unit_test(test_exp_lanes),
        cmocka_unit_test(test_transpose16),
        cmocka_unit_test_setup_teardown(test_batch_equals_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunking_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forecast_batch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
