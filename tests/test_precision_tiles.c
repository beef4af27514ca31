/* test_precision_tiles.c — the reduced-precision products (weights bf16 and int8) write their tiles
 * straight into y: blocks of columns (q|k|v parts) that a tile of several panels would
 * straddle, partial last panels, the bias and y += product, and a decode step's rows as one
 * task at the edges of what a task holds. Each checked against the same product written whole
 * and row by row (test_precision_bf16 and test_precision_int8 check that one against plain C),
 * on every kernel level the CPU has, with each product the CPU runs (bf16: vdpbf16ps, FMAs under
 * FTZ and FMAs with the sums checked; int8 at avx2: AVX-VNNI and vpmaddubsw); registered at 3
 * threads too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"      /* kr_linear_forward*, kr_simd_set */
#include "matmul_bf16.h" /* kr_bf16_pack, kr_bf16_product_set */
#include "matmul_q8.h"   /* kr_q8_pack, kr_q8_avx2_product_set */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

enum { BF16, INT8 };

typedef struct {
    kr_linear l;
    void *wpacked;
    float *ws;
} layer;

static void make_layer(layer *ly, int mode, const float *w, const float *b, int out, int in) {
    memset(ly, 0, sizeof *ly);
    ly->l = (kr_linear){.b = b, .out = out, .in = in};
    if (mode == BF16) {
        ly->wpacked = malloc(sizeof(uint16_t) * kr_bf16_packed(out, in));
        assert_non_null(ly->wpacked);
        kr_bf16_pack(ly->wpacked, w, out, in);
        ly->l.wh = ly->wpacked;
    } else {
        ly->wpacked = malloc(kr_q8_scales(out, in) * KR_Q8_BLOCK);
        ly->ws = malloc(sizeof(float) * kr_q8_scales(out, in));
        assert_true(ly->wpacked && ly->ws);
        kr_q8_pack(ly->wpacked, ly->ws, w, out, in);
        ly->l.wq = ly->wpacked;
        ly->l.ws = ly->ws;
    }
}

/* n parts of out / n columns against the whole product (want), and y += product into parts */
static void check_parts(const kr_linear *l, const float *x, int T, int n, const float *want) {
    int out = l->out, w = out / n;
    float *ys[4];
    for (int i = 0; i < n; i++) {
        ys[i] = malloc(sizeof(float) * T * w);
        assert_non_null(ys[i]);
        memset(ys[i], 0x7f, sizeof(float) * T * w);
    }
    assert_int_equal(kr_linear_forward_parts(ys, n, x, T, l), 0);
    for (int r = 0; r < T; r++)
        for (int o = 0; o < out; o++)
            if (memcmp(&ys[o / w][(size_t)r * w + o % w], &want[(size_t)r * out + o], 4))
                fail_msg("%d parts of %d, %d rows: row %d column %d differs", n, out, T, r, o);
    for (int i = 0; i < n; i++)
        free(ys[i]);
}

static void one_shape(int mode, int out, int in, int T, int n_parts, uint32_t seed) {
    float *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *x = malloc(sizeof(float) * T * in), *y = malloc(sizeof(float) * T * out);
    float *first = malloc(sizeof(float) * T * out), *one = malloc(sizeof(float) * out);
    float *acc = malloc(sizeof(float) * T * out), *bare = malloc(sizeof(float) * T * out);
    assert_true(w && b && x && y && first && one && acc && bare);
    for (int i = 0; i < out * in; i++)
        w[i] = tu_lcg(&seed) * 0.1f;
    for (int o = 0; o < out; o++)
        b[o] = tu_lcg(&seed);
    for (int i = 0; i < T * in; i++)
        x[i] = tu_lcg(&seed);
    layer ly;
    make_layer(&ly, mode, w, b, out, in);
    int levels = 0;
    kr_bf16_product chosen = kr_bf16_product_get();
    kr_q8_avx2_product chosen_q8 = kr_q8_avx2_product_get();
    /* every level with each product the CPU runs in turn, the same bits: bf16's vdpbf16ps, FMAs
     * under FTZ and FMAs with the sums checked; int8's AVX-VNNI and vpmaddubsw at avx2 */
    for (int pl = 0; pl < (KR_BF16_AVX2 + 1) * (KR_SIMD_AMX + 1); pl++) {
        int s = pl % (KR_SIMD_AMX + 1), pr = pl / (KR_SIMD_AMX + 1);
        if (mode == INT8 && pr > KR_Q8_MADDUBS) break;
        if (mode == BF16 && kr_bf16_product_set((kr_bf16_product)pr) != 0) continue;
        if (mode == INT8 && kr_q8_avx2_product_set((kr_q8_avx2_product)pr) != 0) continue;
        if (kr_simd_set((kr_simd)s) != 0) continue;
        kr_linear_forward(y, x, T, &ly.l);
        if (levels++ == 0) memcpy(first, y, sizeof(float) * T * out);
        assert_memory_equal(y, first, sizeof(float) * T * out); /* every level: one answer */
        for (int r = 0; r < T; r++) { /* each row alone: another task shape, the same bits */
            kr_linear_forward(one, x + (size_t)r * in, 1, &ly.l);
            assert_memory_equal(one, y + (size_t)r * out, sizeof(float) * out);
        }
        for (int i = 0; i < T * out; i++) /* y += product: the product rounded first */
            acc[i] = (float)(i % 97) - 48.0f;
        kr_linear_forward_add(acc, x, T, &ly.l);
        for (int i = 0; i < T * out; i++)
            assert_true(acc[i] == (float)(i % 97) - 48.0f + y[i]);
        check_parts(&ly.l, x, T, n_parts, y);
        ly.l.b = NULL; /* no bias: the sums themselves, which plus the bias are y */
        kr_linear_forward(bare, x, T, &ly.l);
        for (int i = 0; i < T * out; i++)
            assert_true(y[i] == bare[i] + b[i % out]);
        kr_linear_forward(one, x, 1, &ly.l);
        assert_memory_equal(one, bare, sizeof(float) * out);
        ly.l.b = b;
    }
    assert_true(levels >= 1);
    kr_simd_set(kr_simd_level());
    kr_bf16_product_set(chosen); /* (-1 and nothing to restore without AVX-512) */
    assert_int_equal(kr_q8_avx2_product_set(chosen_q8), 0);
    free(w), free(b), free(x), free(y), free(first), free(one), free(acc), free(bare);
    free(ly.wpacked);
    free(ly.ws);
}

static void shapes(int mode) {
    one_shape(mode, 144, 96, 30, 3, 1u);   /* parts of 3 panels: tiles of 8 would straddle */
    one_shape(mode, 144, 64, 1, 3, 2u);    /* one row */
    one_shape(mode, 96, 33, 48, 2, 3u);    /* a step of 48 rows, an odd input */
    one_shape(mode, 96, 40, 49, 2, 4u);    /* one row past a step's */
    one_shape(mode, 64, 4500, 47, 4, 5u);  /* a step that one task cannot hold */
    one_shape(mode, 160, 128, 100, 2, 6u); /* many rows: row tasks */
}

static void test_bf16_tiles_into_y(void **state) {
    (void)state;
    shapes(BF16);
}

static void test_int8_tiles_into_y(void **state) {
    (void)state;
    shapes(INT8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_tiles_into_y),
        cmocka_unit_test(test_int8_tiles_into_y),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
