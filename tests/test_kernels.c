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
    for (size_t i = 0; i < (size_t)out * in; i++)
        w[i] = lcg();
    for (int i = 0; i < out; i++)
        b[i] = lcg();
    for (size_t i = 0; i < (size_t)MAX_ROWS * in; i++)
        x[i] = lcg();
    kr_linear_pack(wp, w, out, in);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_layers),
        cmocka_unit_test(test_base_layers),
        cmocka_unit_test(test_tokenizer_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
