/* test_kernels.c — the product kernels (matmul.c) at every level this CPU has, bit for bit
 * against the one chain they all promise: each output element is fused multiply-adds over
 * k = 0 .. in-1, in that order from 0, then plus the bias (reference_row below, written
 * here from that definition, independent of the kernels' blocking). The shapes are every
 * linear layer of Kronos-small and Kronos-base (and the tokenizer's), the row counts drawn
 * at random from 1 to 2048 and the rows taken at random offsets, so a row is checked at many
 * positions within its call, in calls of many sizes. The portable kernel (scalar fmaf) gets
 * calls of at most about 4 million multiply-adds, to keep the test short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"
#include "parallel.h"

#include <stdatomic.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 2048
/* Under AddressSanitizer (CI's second pass) calls go up to 512 rows: every load is checked
 * there, and the release pass already covers 2048. */
#if defined(__SANITIZE_ADDRESS__)
#define MAX_CALL_ROWS 512
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAX_CALL_ROWS 512
#endif
#endif
#ifndef MAX_CALL_ROWS
#define MAX_CALL_ROWS MAX_ROWS
#endif

static uint32_t lcg_state = 2026;
static uint32_t lcg_u32(void) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}
static float lcg(void) { /* uniform in [-1, 1) */
    return (float)(lcg_u32() * (1.0 / 16777216.0) * 2.0 - 1.0);
}

/* A product's weights w[out][in], bias b[out] and rows x[rows][in], uniform in [-1, 1), drawn
 * in that order, and w packed into wp. */
static void random_linear(float *w, float *b, float *x, float *wp, int out, int in, int rows) {
    for (size_t i = 0; i < (size_t)out * in; i++)
        w[i] = lcg();
    for (int i = 0; i < out; i++)
        b[i] = lcg();
    for (size_t i = 0; i < (size_t)rows * in; i++)
        x[i] = lcg();
    kr_linear_pack(wp, w, out, in);
}

/* A random product (random_linear) in buffers of its own, with its packed layer. */
typedef struct {
    float *w, *b, *x, *wp;
    kr_linear l;
} test_linear;

static test_linear new_linear(int in, int out, int rows, int with_bias) {
    test_linear t = {malloc((size_t)out * in * sizeof(float)),
                     malloc((size_t)out * sizeof(float)),
                     malloc((size_t)rows * in * sizeof(float)),
                     malloc(kr_linear_packed_floats(out, in) * sizeof(float)),
                     {.out = out, .in = in}};
    assert_true(t.w && t.b && t.x && t.wp);
    random_linear(t.w, t.b, t.x, t.wp, out, in, rows);
    t.l.b = with_bias ? t.b : NULL;
    t.l.wp = t.wp;
    return t;
}

static void free_linear(test_linear *t) {
    free(t->w), free(t->b), free(t->x), free(t->wp);
}

/* The definition, one element at a time: fmaf rounds once, as the vector FMAs do. */
static void reference_row(float *y, const float *x, const float *w, const float *b, int in,
                          int out) {
    for (int o = 0; o < out; o++) {
        float acc = 0.0f;
        for (int k = 0; k < in; k++)
            acc = fmaf(x[k], w[(size_t)o * in + k], acc);
        y[o] = b ? acc + b[o] : acc;
    }
}

/* Rows checked against the reference in every call that holds them: the first and last of
 * the input, and some between. */
enum { CHECKED = 10 };

/* One layer shape: calls of random sizes at random offsets on every level, each call's rows
 * equal to the reference (the checked ones) and to the best level's (all of them). */
static void shape(const char *name, int in, int out, int with_bias, int calls) {
    float *w = malloc((size_t)out * in * sizeof(float)), *b = malloc((size_t)out * sizeof(float));
    float *wp = malloc(kr_linear_packed_floats(out, in) * sizeof(float));
    float *x = malloc((size_t)MAX_ROWS * in * sizeof(float));
    float *y = malloc((size_t)MAX_ROWS * out * sizeof(float));
    float *best_y = malloc((size_t)MAX_ROWS * out * sizeof(float));
    float *ref = malloc((size_t)CHECKED * out * sizeof(float));
    assert_true(w && b && wp && x && y && best_y && ref);
    random_linear(w, b, x, wp, out, in, MAX_ROWS);
    kr_linear l = {.b = with_bias ? b : NULL, .out = out, .in = in, .wp = wp};
    int checked[CHECKED] = {0, MAX_ROWS - 1};
    for (int i = 2; i < CHECKED; i++)
        checked[i] = (int)(lcg_u32() % MAX_ROWS);
    for (int i = 0; i < CHECKED; i++)
        reference_row(ref + (size_t)i * out, x + (size_t)checked[i] * in, w, l.b, in, out);

    kr_simd best = kr_simd_level();
    for (int c = 0; c < calls; c++) {
        /* sizes spread over 1 .. 2048 on a log scale, plus the decode step's 1 and 30 */
        int n = c == 0 ? 1 : c == 1 ? 30 : c == 2 ? MAX_ROWS : 1 + (int)(lcg_u32() % MAX_ROWS);
        if (c > 2 && c % 2) n = 1 + (int)(lcg_u32() % (1u << (1 + lcg_u32() % 11)));
        if (n > MAX_CALL_ROWS) n = MAX_CALL_ROWS;
        int r0 = (int)(lcg_u32() % (uint32_t)(MAX_ROWS - n + 1));
        const float *xs = x + (size_t)r0 * in;
        assert_int_equal(kr_simd_set(best), 0);
        kr_linear_forward(best_y, xs, n, &l);
        for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
            int rows = n, cap = 1 + 4000000 / (in * out);
            if (s == KR_SIMD_GENERIC && rows > cap) rows = cap;
            assert_int_equal(kr_simd_set((kr_simd)s), 0);
            kr_linear_forward(y, xs, rows, &l);
            assert_memory_equal(y, best_y, (size_t)rows * out * sizeof(float));
            for (int i = 0; i < CHECKED; i++)
                if (checked[i] >= r0 && checked[i] < r0 + rows)
                    assert_memory_equal(y + (size_t)(checked[i] - r0) * out, ref + (size_t)i * out,
                                        (size_t)out * sizeof(float));
        }
    }
    assert_int_equal(kr_simd_set(best), 0);
    print_message("# %s (%d -> %d%s): %d calls, each level equal to the chain\n", name, in, out,
                  with_bias ? ", bias" : "", calls);
    free(w), free(b), free(wp), free(x), free(y), free(best_y), free(ref);
}

static void test_small_layers(void **state) {
    (void)state;
    shape("small q|k|v", 512, 1536, 1, 6);
    shape("small o, dependency q/k/v/o", 512, 512, 1, 6);
    shape("small w1|w3", 512, 2048, 0, 6);
    shape("small w2", 1024, 512, 0, 6);
    shape("small s1/s2 heads", 512, 1024, 1, 6);
    shape("small fusion", 1024, 512, 1, 4);
}

static void test_base_layers(void **state) {
    (void)state;
    shape("base q|k|v", 832, 2496, 1, 3);
    shape("base o", 832, 832, 1, 3);
    shape("base w1|w3", 832, 4096, 0, 3);
    shape("base w2", 2048, 832, 0, 3);
    shape("base s1/s2 heads", 832, 1024, 1, 3);
}

static void test_tokenizer_layers(void **state) {
    (void)state;
    shape("tokenizer embed", 6, 256, 1, 6);
    shape("tokenizer q|k|v", 256, 768, 1, 6);
    shape("tokenizer o", 256, 256, 1, 6);
    shape("tokenizer w1|w3", 256, 1024, 0, 6);
    shape("tokenizer w2", 512, 256, 0, 6);
    shape("tokenizer quant embed", 256, 20, 1, 6);
    shape("tokenizer post-quant embed", 20, 256, 1, 6);
    shape("tokenizer head", 256, 6, 1, 6);
}

/* kr_linear_forward_then: the epilogue sees each (row, column) of the output once, in blocks
 * that hold the same columns of every part, each block already equal to the plain product
 * when the epilogue gets it. On the pool's threads (as many as the machine has). */
typedef struct {
    float *const *ys; /* what the product writes: n parts of [rows][width] */
    float *seen;      /* [n][rows][width]: the blocks as the epilogue found them */
    int *visits;      /* [rows][width] */
    int n, rows, width;
} epi_record;

static void record(void *arg, int r0, int r1, int c0, int c1) {
    const epi_record *e = arg;
    for (int r = r0; r < r1; r++)
        for (int c = c0; c < c1; c++) {
            size_t at = (size_t)r * e->width + c;
            e->visits[at]++; /* blocks are disjoint: no two threads touch one element */
            for (int p = 0; p < e->n; p++)
                e->seen[(size_t)p * e->rows * e->width + at] = e->ys[p][at];
        }
}

static void epilogue_case(int in, int out, int n, int rows) {
    int width = out / n;
    test_linear t = new_linear(in, out, rows, 1);
    const float *x = t.x;
    const kr_linear l = t.l;
    float *plain = malloc((size_t)rows * out * sizeof(float));
    float *y = malloc((size_t)rows * out * sizeof(float));
    float *seen = malloc((size_t)rows * out * sizeof(float));
    int *visits = malloc((size_t)rows * width * sizeof(int));
    assert_true(plain && y && seen && visits);
    float *ys[4], *plains[4];
    for (int p = 0; p < n; p++) {
        ys[p] = y + (size_t)p * rows * width;
        plains[p] = plain + (size_t)p * rows * width;
    }
    kr_simd best = kr_simd_level();
    for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
        if (s == KR_SIMD_GENERIC && (size_t)rows * in * out > 40000000u) continue;
        assert_int_equal(kr_simd_set((kr_simd)s), 0);
        if (n == 1)
            kr_linear_forward(plain, x, rows, &l);
        else
            assert_int_equal(kr_linear_forward_parts(plains, n, x, rows, &l), 0);
        memset(visits, 0, (size_t)rows * width * sizeof(int));
        memset(seen, 0xff, (size_t)rows * out * sizeof(float));
        epi_record e = {ys, seen, visits, n, rows, width};
        assert_int_equal(kr_linear_forward_then(ys, n, x, rows, &l, record, &e), 0);
        assert_memory_equal(y, plain, (size_t)rows * out * sizeof(float));
        assert_memory_equal(seen, plain, (size_t)rows * out * sizeof(float));
        for (size_t i = 0; i < (size_t)rows * width; i++)
            assert_int_equal(visits[i], 1);
    }
    assert_int_equal(kr_simd_set(best), 0);
    free_linear(&t);
    free(plain), free(y), free(seen), free(visits);
}

static void test_epilogue_blocks(void **state) {
    (void)state;
    const int rows[] = {1, 2, 3, 30, 200};
    for (int i = 0; i < 5; i++) {
        epilogue_case(512, 2048, 2, rows[i]); /* w1|w3: h1 and h3 side by side */
        epilogue_case(512, 512, 1, rows[i]);  /* o: a residual */
        epilogue_case(64, 20, 1, rows[i]);    /* one part of any width, last panel partial */
        epilogue_case(64, 96, 3, rows[i]);    /* three parts of two panels */
    }
    assert_int_equal(kr_linear_forward_then((float *const[]){NULL, NULL}, 2, NULL, 1,
                                            &(kr_linear){.out = 40, .in = 8}, record, NULL),
                     -1); /* 20-column parts straddle a panel */
    print_message("# epilogues: every block once, complete, on every level\n");
}

/* kr_linear_forward_add: y + the product, each element the stored product added to y's (a
 * residual x += y), on every level, for a decode step's rows, a few paths' and a prefill's,
 * with and without a bias and with a partial last panel. */
static void add_case(int in, int out, int rows, int with_bias) {
    test_linear t = new_linear(in, out, rows, with_bias);
    const float *x = t.x;
    const kr_linear l = t.l;
    float *base = malloc((size_t)rows * out * sizeof(float));
    float *y = malloc((size_t)rows * out * sizeof(float));
    float *want = malloc((size_t)rows * out * sizeof(float));
    assert_true(base && y && want);
    for (size_t i = 0; i < (size_t)rows * out; i++)
        base[i] = lcg() * 4.0f;
    kr_simd best = kr_simd_level();
    for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
        assert_int_equal(kr_simd_set((kr_simd)s), 0);
        kr_linear_forward(want, x, rows, &l);
        for (size_t i = 0; i < (size_t)rows * out; i++)
            want[i] = base[i] + want[i];
        memcpy(y, base, (size_t)rows * out * sizeof(float));
        kr_linear_forward_add(y, x, rows, &l);
        assert_memory_equal(y, want, (size_t)rows * out * sizeof(float));
    }
    assert_int_equal(kr_simd_set(best), 0);
    free_linear(&t);
    free(base), free(y), free(want);
}

static void test_forward_add(void **state) {
    (void)state;
    const int rows[] = {1, 2, 3, 30, 200};
    for (int i = 0; i < 5; i++) {
        add_case(512, 512, rows[i], 1);  /* o */
        add_case(1024, 512, rows[i], 0); /* w2 */
        add_case(64, 20, rows[i], 1);    /* a partial panel */
    }
    print_message("# forward_add: the stored product added to y, on every level\n");
}

/* kr_parallel_claim_next: a claimed item is the next one its thread runs, every item runs once. */
enum { CLAIM_ITEMS = 4000, CLAIM_MAX_THREADS = 64 };
typedef struct {
    atomic_int runs[CLAIM_ITEMS];
    int claimed[CLAIM_ITEMS], again[CLAIM_ITEMS];
    int order[CLAIM_MAX_THREADS][CLAIM_ITEMS], count[CLAIM_MAX_THREADS];
} claim_log;

static void claim_item(void *arg, int i, int worker) {
    claim_log *g = arg;
    atomic_fetch_add(&g->runs[i], 1);
    g->order[worker][g->count[worker]++] = i;
    volatile double spin = 0; /* items of unequal length, so that threads overtake */
    for (int k = 0; k < (i * 7919) % 300; k++)
        spin += k;
    (void)spin;
    g->claimed[i] = i % 3 ? kr_parallel_claim_next() : -3;
    g->again[i] = i % 3 == 1 ? kr_parallel_claim_next() : -1; /* one claim an item: -1 */
}

static void test_claim_next(void **state) {
    (void)state;
    static claim_log g;
    assert_true(kr_parallel_threads() <= CLAIM_MAX_THREADS);
    for (int round = 0; round < 20; round++) {
        memset(&g, 0, sizeof g);
        kr_parallel_for(CLAIM_ITEMS, claim_item, &g);
        for (int i = 0; i < CLAIM_ITEMS; i++) {
            assert_int_equal(atomic_load(&g.runs[i]), 1);
            assert_int_equal(g.again[i], -1);
        }
        for (int t = 0; t < kr_parallel_threads(); t++)
            for (int k = 0; k < g.count[t]; k++) {
                int c = g.claimed[g.order[t][k]];
                if (c >= 0) {
                    assert_true(k + 1 < g.count[t]);
                    assert_int_equal(g.order[t][k + 1], c);
                }
            }
    }
    memset(&g, 0, sizeof g);
    kr_serial_for(10, claim_item, &g); /* alone, the next item is the next index */
    assert_int_equal(g.claimed[1], 2);
    assert_int_equal(g.claimed[8], 9);
    assert_int_equal(g.claimed[5], 6);
    assert_int_equal(g.again[4], -1);
    assert_int_equal(kr_parallel_claim_next(), -1); /* outside a loop */
    print_message("# claim ahead: each item once, a claimed item next on its thread\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_layers),     cmocka_unit_test(test_base_layers),
        cmocka_unit_test(test_tokenizer_layers), cmocka_unit_test(test_epilogue_blocks),
        cmocka_unit_test(test_forward_add),      cmocka_unit_test(test_claim_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
