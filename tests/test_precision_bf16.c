/* test_precision_bf16.c — weights bf16's dot products: AVX512-BF16's vdpbf16ps against this
 * file's own emulation of it, bit for bit on random and adversarial inputs (where the CPU has
 * the instruction); the kernels on every level against this file's plain C of the same
 * arithmetic (tile edges included); and a bf16 model's invariances: kernel levels, batch,
 * token by token, cached = uncached, a forecast alone or on one thread (registered at 3
 * threads too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"      /* kr_linear_forward, kr_simd_set */
#include "matmul_bf16.h" /* the packed layout, kr_bf16_has_dot */
#include "model.h"       /* the packed weights */
#include "parallel.h"    /* kr_parallel_alone */
#include "test_util.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KR_X86 1
#endif

#define N_TOK 40
#define V     1024
#define PATHS 4

static char dirs[2][64]; /* the model in F32 and BF16 */
static const char *const dtypes[2] = {"f32", "bf16"};

static int setup(void **state) {
    (void)state;
    return tu_mkmodels(dirs, dtypes, 2, 13);
}

static int teardown(void **state) {
    (void)state;
    return tu_rmdirs(dirs, 2);
}

/* ---- the reference: the instruction's arithmetic written out plainly ----------------------- */

static float widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A denormal (or zero) to a zero of its sign */
static float flush(float f) {
    return (bits(f) & 0x7f800000u) ? f : (bits(f) & 0x80000000u ? -0.0f : 0.0f);
}

/* The nearest BF16 of f, ties to even, by distances in double; a denormal result flushed */
static uint16_t nearest(float f) {
    uint32_t lo = bits(f) & 0xffff0000u, hi = lo + 0x10000u;
    double dlo = fabs((double)f - widen((uint16_t)(lo >> 16)));
    double dhi = fabs((double)f - widen((uint16_t)(hi >> 16)));
    uint16_t h = (uint16_t)((dlo < dhi || (dlo == dhi && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
    return (h & 0x7f80u) ? h : (uint16_t)(h & 0x8000u);
}

/* acc + a b rounded to nearest even, unless the exact sum rounded to 24 bits as if the
 * exponent were unbounded is below FLT_MIN in magnitude (tiny as x86 detects it): then a zero
 * of its sign (an exact zero keeps IEEE's). That rounding is below FLT_MIN exactly when the
 * sum is below FLT_MIN - 2^-151 (the tie rounds to FLT_MIN, even). The exact sum is hi + lo:
 * a b is exact in double (8-bit mantissas) and Knuth's two-sum is exact. */
static float add_flushed(float acc, float a, float b) {
    double p = (double)a * (double)b, hi = acc + p, z = hi - acc;
    double lo = (acc - (hi - z)) + (p - z), t = (double)FLT_MIN - 0x1p-151;
    bool neg = hi < 0 || (hi == 0 && lo < 0);
    bool below = fabs(hi) < t || (fabs(hi) == t && lo != 0 && (lo < 0) != (hi < 0));
    if ((hi != 0 || lo != 0) && below) return neg ? -0.0f : 0.0f;
    return fmaf(a, b, acc);
}

/* One pair as vdpbf16ps adds it (Intel's SDM; the flush as measured on AMD Zen 5): inputs read with
 * denormals as zero, the odd product added first. */
static float dp_pair(float acc, uint16_t a_even, uint16_t a_odd, uint16_t b_even, uint16_t b_odd) {
    acc = add_flushed(acc, flush(widen(a_odd)), flush(widen(b_odd)));
    return add_flushed(acc, flush(widen(a_even)), flush(widen(b_even)));
}

/* ---- the instruction against the emulation ------------------------------------------------ */

static uint32_t rng = 12345u;
static uint32_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

/* A BF16 of kind: 0 near 1, 1 any finite exponent, 2 near the denormals (some denormal) */
static uint16_t some_bf16(int kind) {
    uint32_t m = next() & 0x7f, s = (next() & 1) << 15, e;
    if (kind == 0)
        e = 127 + next() % 11 - 5;
    else if (kind == 1)
        e = next() % 255;
    else
        e = next() % 14;
    return (uint16_t)(s | e << 7 | m);
}

/* 16 lanes of acc + the odd pair product + the even one, each pair (even low) in a and b */
typedef void (*hw_fn)(float out[16], const float acc[16], const uint32_t a[16],
                      const uint32_t b[16]);

#ifdef KR_X86
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
hw_dp(float out[16], const float acc[16], const uint32_t a[16], const uint32_t b[16]) {
    __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                (__m512bh)_mm512_loadu_si512(b));
    _mm512_storeu_ps(out, r);
}

/* The FMA tiles' arithmetic: the pairs' halves widened and flushed (as the kernels' packed
 * weights and rounded rows are), two FMAs under MXCSR's FTZ and DAZ, 8 lanes at a time (the
 * flush is MXCSR's at every width; the avx512 tiles are held to this by the tile tests). The
 * empty asms keep the FMAs between the MXCSR writes (GCC does not order register arithmetic
 * against them). */
__attribute__((target("avx2,fma"), noinline)) static void
hw_fma(float out[16], const float acc[16], const uint32_t a[16], const uint32_t b[16]) {
    float ao[16], ae[16], bo[16], be[16], fa[16];
    for (int i = 0; i < 16; i++) {
        ao[i] = flush(widen((uint16_t)(a[i] >> 16))), ae[i] = flush(widen((uint16_t)a[i]));
        bo[i] = flush(widen((uint16_t)(b[i] >> 16))), be[i] = flush(widen((uint16_t)b[i]));
        fa[i] = flush(acc[i]);
    }
    for (int h = 0; h < 16; h += 8) {
        __m256 r = _mm256_loadu_ps(fa + h), xo = _mm256_loadu_ps(ao + h),
               xe = _mm256_loadu_ps(ae + h);
        __m256 wo = _mm256_loadu_ps(bo + h), we = _mm256_loadu_ps(be + h);
        unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8040);
        __asm__ volatile("" : "+v"(r), "+v"(xo), "+v"(xe), "+v"(wo), "+v"(we));
        r = _mm256_fmadd_ps(xe, we, _mm256_fmadd_ps(xo, wo, r));
        __asm__ volatile("" : "+v"(r));
        _mm_setcsr(csr);
        __asm__ volatile("" : "+v"(r));
        _mm256_storeu_ps(out + h, r);
    }
}
#endif

#ifdef KR_X86
/* Lanes of 16 pairs through hw against the emulation: sums near 1, wide exponent spreads,
 * near and below the denormals, cancellations (acc the exact negative of a product), acc near
 * ±FLT_MIN, and sums that land on FLT_MIN's either side. */
static long lanes_vs_emulation(hw_fn hw, const char *name) {
    long n = 0, flushed = 0, diff = 0;
    for (int it = 0; it < 400000; it++) {
        int kind = it % 3, am = (it / 3) % 6;
        float acc[16], out[16];
        uint32_t a[16], b[16];
        for (int i = 0; i < 16; i++) {
            uint16_t a0 = some_bf16(kind), a1 = some_bf16(kind), b0 = some_bf16(kind),
                     b1 = some_bf16(kind);
            a[i] = a0 | (uint32_t)a1 << 16, b[i] = b0 | (uint32_t)b1 << 16;
            float p1 = flush(widen(a1)) * flush(widen(b1));
            if (am == 0)
                acc[i] = 0.0f;
            else if (am == 1)
                acc[i] = widen(some_bf16(1)) * widen(some_bf16(0));
            else if (am == 2)
                acc[i] = -p1; /* the odd product cancels exactly */
            else if (am == 3)
                acc[i] = -p1 * (1.0f + 0x1p-12f * (float)(next() % 8));
            else if (am == 4)
                acc[i] = (next() & 1 ? -1.0f : 1.0f) * FLT_MIN * (1 + next() % 4);
            else {
                uint32_t u = next() & 0x807fffffu; /* a normal float of any exponent */
                u |= (1 + next() % 254) << 23;
                memcpy(&acc[i], &u, sizeof u);
            }
            if (!isfinite(acc[i]) || isnan(p1)) acc[i] = 0.0f;
        }
        hw(out, acc, a, b);
        for (int i = 0; i < 16; i++) {
            float e = dp_pair(flush(acc[i]), (uint16_t)a[i], (uint16_t)(a[i] >> 16), (uint16_t)b[i],
                              (uint16_t)(b[i] >> 16));
            n++;
            float raw = fmaf(flush(widen((uint16_t)a[i])), flush(widen((uint16_t)b[i])),
                             fmaf(flush(widen((uint16_t)(a[i] >> 16))),
                                  flush(widen((uint16_t)(b[i] >> 16))), flush(acc[i])));
            if (bits(raw) != bits(e)) flushed++;
            if (bits(e) != bits(out[i]) && !(isnan(e) && isnan(out[i]))) {
                if (diff++ < 5)
                    print_message("lane %a + %a*%a + %a*%a: %s %a, emulation %a\n", (double)acc[i],
                                  (double)widen((uint16_t)(a[i] >> 16)),
                                  (double)widen((uint16_t)(b[i] >> 16)),
                                  (double)widen((uint16_t)a[i]), (double)widen((uint16_t)b[i]),
                                  name, (double)out[i], (double)e);
            }
        }
    }
    print_message("# %s: %ld lanes, %ld where a flush decided the bits, %ld differ from "
                  "the emulation\n",
                  name, n, flushed, diff);
    assert_true(flushed > 0); /* the adversarial lanes reached the flushes */
    return diff;
}
#endif

static void test_instruction_vs_emulation(void **state) {
    (void)state;
    if (!kr_bf16_has_dot()) {
        print_message("# no AVX512-BF16 on this CPU: the instruction test does not run\n");
        skip();
    }
#ifdef KR_X86
    assert_int_equal(lanes_vs_emulation(hw_dp, "vdpbf16ps"), 0);
#endif
}

/* The FMA tiles rest on x86's FTZ flushing what the contract flushes: checked on this CPU */
static void test_fma_ftz_vs_emulation(void **state) {
    (void)state;
#ifdef KR_X86
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
#else
    {
#endif
        print_message("# no AVX2 and FMA on this CPU: the FMA-under-FTZ test does not run\n");
        skip();
    }
#ifdef KR_X86
    /* the core's own check (matmul_bf16_product.c) offers the FMA product exactly where these
     * lanes find no difference */
    long diff = lanes_vs_emulation(hw_fma, "FMAs under FTZ");
    print_message("# the core's check finds FMAs under FTZ %s\n",
                  kr_bf16_fma_ftz_exact() ? "exact" : "not exact: the FMA product is not used");
    assert_int_equal(diff == 0, kr_bf16_fma_ftz_exact());
    assert_int_equal(kr_bf16_product_set(KR_BF16_FMA) == 0, kr_bf16_fma_ftz_exact());
    assert_int_equal(kr_bf16_product_set(kr_bf16_product_get()), 0);
#endif
}

/* Each product the CPU runs (vdpbf16ps, FMAs under FTZ, FMAs with the sums checked) set in turn
 * for tu_linear_every_level, then the chosen one again */
static int products_run;

static void every_product(const kr_linear *l, const float *x, int T, const float *ref) {
    kr_bf16_product chosen = kr_bf16_product_get();
    products_run = 0;
    for (int p = KR_BF16_DOT; p <= KR_BF16_AVX2; p++) {
        if (kr_bf16_product_set((kr_bf16_product)p) != 0) continue;
        products_run++;
        tu_linear_every_level(l, x, T, ref);
    }
    assert_int_equal(kr_bf16_product_set(chosen), 0);
}

/* ---- the kernels against the reference --------------------------------------------------- */

/* y[T][out] from w[out][in] (torch layout): per row and column, pair by pair in order */
static void ref_linear(float *y, const float *x, int T, const float *w, const float *b, int out,
                       int in) {
    for (int r = 0; r < T; r++)
        for (int o = 0; o < out; o++) {
            const float *xr = x + (size_t)r * in, *wr = w + (size_t)o * in;
            float acc = 0.0f;
            for (int k = 0; k < in; k += 2) {
                uint16_t xo = k + 1 < in ? nearest(xr[k + 1]) : 0;
                uint16_t wo = k + 1 < in ? nearest(wr[k + 1]) : 0;
                acc = dp_pair(acc, nearest(xr[k]), xo, nearest(wr[k]), wo);
            }
            y[(size_t)r * out + o] = b ? acc + b[o] : acc;
        }
}

/* One shape: packed weights against the reference rounding, the product on every level
 * against ref_linear, each row alone against the batch, and the add and parts forms. x and w
 * scaled by scale (2^-63: sums near FLT_MIN, where the flushes decide; no bias then). */
static void scaled_shape(int out, int in, int T, uint32_t seed, float scale) {
    float *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *x = malloc(sizeof(float) * T * in), *ref = malloc(sizeof(float) * T * out);
    uint16_t *wh = malloc(sizeof(uint16_t) * kr_bf16_packed(out, in));
    assert_true(w && b && x && ref && wh);
    for (int i = 0; i < out * in; i++) /* mixed scales; some denormal once rounded */
        w[i] = scale * tu_lcg(&seed) * (i % 7 == 0 ? 3.0f : i % 13 == 0 ? 1e-38f : 0.05f);
    for (int o = 0; o < out; o++)
        b[o] = tu_lcg(&seed);
    for (int i = 0; i < T * in; i++)
        x[i] = scale * tu_lcg(&seed) * (i % 11 == 0 ? 40.0f : i % 17 == 0 ? 2e-39f : 1.0f);
    kr_bf16_pack(wh, w, out, in);
    const float *bias = scale == 1.0f ? b : NULL; /* a bias would hide sums near FLT_MIN */
    kr_linear l = {.b = bias, .out = out, .in = in, .wh = wh};
    for (int o = 0; o < out; o++)
        for (int k = 0; k < in; k++)
            assert_int_equal(kr_bf16_weight(&l, o, k), nearest(w[(size_t)o * in + k]));
    ref_linear(ref, x, T, w, bias, out, in);
    every_product(&l, x, T, ref);
    free(w), free(b), free(x), free(ref), free(wh);
}

static void one_shape(int out, int in, int T, uint32_t seed) {
    scaled_shape(out, in, T, seed, 1.0f);
}

static void test_kernels_against_reference(void **state) {
    (void)state;
    one_shape(48, 64, 5, 1u);
    one_shape(200, 100, 37, 2u);
    one_shape(64, 512, 1, 3u);
    one_shape(130, 96, 2, 4u);
    one_shape(256, 256, 70, 5u);
    scaled_shape(64, 64, 9, 6u, 0x1p-63f); /* sums near FLT_MIN */
    scaled_shape(48, 33, 3, 7u, 0x1p-62f);
    print_message("# bf16 kernels: the plain C reference's bits on every level, %d products\n",
                  products_run);
}

/* The tiles' edges: rows 1, 2, 3, 17, 33 (not a multiple of the row blocks, 4, 6 and 12, nor of
 * a tile's 24), 150 (many row tasks); columns not a whole panel, panels not a whole tile
 * (8) nor a group of 4; an odd input (its last pair padded). */
static void test_tile_edges(void **state) {
    (void)state;
    one_shape(144, 96, 17, 11u);  /* 9 panels: a tile of 8 and one of 1 */
    one_shape(40, 33, 33, 12u);   /* 2.5 panels, an odd input */
    one_shape(48, 161, 2, 13u);   /* two rows: 3 panels as 2 + 1 */
    one_shape(208, 64, 1, 14u);   /* one row: 13 panels as 8 + 4 + 1 */
    one_shape(16, 7, 3, 15u);     /* one panel, 3.5 pairs */
    one_shape(100, 40, 21, 16u);  /* a partial last panel */
    one_shape(72, 1, 33, 17u);    /* an input of one */
    one_shape(48, 512, 150, 18u); /* many row tasks */
    one_shape(245, 300, 3, 19u);  /* a row alone: four panels at a time, the last one partial;
                                   * its pairs widened in two chunks */
    print_message("# bf16 tiles: row and panel edges, odd inputs, the reference's bits on every "
                  "level, %d products\n",
                  products_run);
}

/* ---- a bf16 model ------------------------------------------------------------------------- */

/* Both files loaded as bf16 hold the same panels: each weight the reference's rounding of the
 * float32 value (the BF16 file's exactly, as it widens exactly). */
static void rounded_like(const kr_linear *f, const kr_linear *h) {
    assert_non_null(f->wp);
    assert_non_null(h->wh);
    assert_null(h->wp);
    for (int o = 0; o < f->out; o++)
        for (int k = 0; k < f->in; k++)
            assert_int_equal(kr_bf16_weight(h, o, k),
                             nearest(f->wp[((size_t)(o / 16) * f->in + k) * 16 + o % 16]));
}

static void test_bf16_loader(void **state) {
    (void)state;
    for (int f = 0; f < 2; f++) {
        kr_model *a = tu_load_dir(dirs[f], KR_PREC_F32, KR_PREC_F32);
        kr_model *h = tu_load_dir(dirs[f], KR_PREC_BF16, KR_PREC_F32);
        assert_non_null(a);
        assert_non_null(h);
        for (int i = 0; i < a->pred.n_layers; i++) {
            rounded_like(&a->pred.blocks[i].qkv, &h->pred.blocks[i].qkv);
            rounded_like(&a->pred.blocks[i].w13, &h->pred.blocks[i].w13);
            rounded_like(&a->pred.blocks[i].w2, &h->pred.blocks[i].w2);
        }
        rounded_like(&a->pred.dep_kv, &h->pred.dep_kv);
        rounded_like(&a->pred.proj_s1, &h->pred.proj_s1);
        rounded_like(&a->tok.head, &h->tok.head);
        kr_model_free(a);
        kr_model_free(h);
    }
}

#define OUT_FLOATS TU_LOGITS_FLOATS(PATHS)

/* On every level: batch and token by token (tu_fork_logits), cached = uncached, the same
 * numbers as the first level; a forecast on the calling thread alone equals it on the
 * pool; and the numbers moved from float32's, by a little. */
static void test_bf16_model_invariances(void **state) {
    (void)state;
    kr_model *m = tu_load_dir(dirs[0], KR_PREC_BF16, KR_PREC_F32);
    kr_model *f32 = tu_load_dir(dirs[0], KR_PREC_F32, KR_PREC_F32);
    assert_non_null(m);
    assert_non_null(f32);
    static float first[OUT_FLOATS], ref[OUT_FLOATS], other[OUT_FLOATS];
    int levels = tu_levels_agree(m, NULL, N_TOK, N_TOK, PATHS, first), products = 0;
    kr_bf16_product chosen = kr_bf16_product_get();
    for (int p = KR_BF16_DOT; p <= KR_BF16_AVX2; p++) { /* each product: the same */
        if (kr_bf16_product_set((kr_bf16_product)p) != 0) continue;
        products++;
        tu_levels_agree(m, NULL, N_TOK, N_TOK, PATHS, other);
        assert_memory_equal(other, first, sizeof first);
    }
    if (products) assert_int_equal(kr_bf16_product_set(chosen), 0);
    tu_fork_logits(f32, N_TOK, N_TOK, PATHS, ref);
    double scale, worst = tu_moved(ref, first, V, &scale);
    print_message("# weights bf16: %d levels and %d products agree; s1 logits moved by "
                  "%.3g of their %.3g\n",
                  levels, products, worst, scale);
    assert_true(worst > 0);
    assert_true(worst < 0.05 * scale);
    kr_forecast_result pool, alone;
    tu_walk_forecast(m, true, &pool);
    kr_parallel_alone(true);
    tu_walk_forecast(m, true, &alone);
    kr_parallel_alone(false);
    tu_same_paths(&pool, &alone);
    kr_forecast_result_free(&pool);
    kr_forecast_result_free(&alone);
    kr_model_free(m);
    kr_model_free(f32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instruction_vs_emulation),
        cmocka_unit_test(test_fma_ftz_vs_emulation),
        cmocka_unit_test(test_kernels_against_reference),
        cmocka_unit_test(test_tile_edges),
        cmocka_unit_test(test_bf16_loader),
        cmocka_unit_test(test_bf16_model_invariances),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
