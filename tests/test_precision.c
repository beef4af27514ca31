/* test_precision.c — reduced-precision modes: weights bf16 on F32, BF16 and F16 checkpoints
 * (kronos-mkmodel writes one model in each dtype from the same values; KR_MKMODEL names the
 * tool), kv bf16's attention against float32 attention over the same rounded keys and
 * values, and each mode's invariances: kernel levels, batch, cached = uncached.
 *
 * weights bf16 multiplies BF16 weights by activations rounded to BF16 (vdpbf16ps's
 * arithmetic, test_precision_bf16.c checks it bit for bit); here, a BF16 checkpoint loaded
 * as bf16 agrees with itself on every level and moves from the same values run in float32
 * by a little. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attention.h"
#include "kronos.h"
#include "matmul.h"      /* kr_simd_set */
#include "matmul_bf16.h" /* the packed BF16 layout */
#include "model.h"       /* the packed weights, compared across loads */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 80 /* tokens of the logits sequence: past 64, the tile path's prefix */
#define V     1024
#define PATHS 6

static char dirs[4][64]; /* the model in F32, BF16 and F16; and in F32 with kv_shift */
static const char *const dtypes[4] = {"f32", "bf16", "f16", "f32 --kv-shift"};

static kr_model *load_kv(int file, kr_precision weights, kr_precision kv) {
    return tu_load_dir(dirs[file], weights, kv);
}

static kr_model *load(int file, kr_precision weights) {
    return load_kv(file, weights, KR_PREC_F32);
}

static int setup(void **state) {
    (void)state;
    return tu_mkmodels(dirs, dtypes, 4, 5);
}

static int teardown(void **state) {
    (void)state;
    return tu_rmdirs(dirs, 4);
}

/* tu_fork_logits of this file's sequence: past 64 tokens, the tile path's prefix */
#define OUT_FLOATS TU_LOGITS_FLOATS(PATHS)
static void logits(const kr_model *m, float *out) {
    tu_fork_logits(m, N_TOK, 8, PATHS, out);
}

/* On every level the CPU has: the batched and token-by-token logits of the BF16 file as
 * bf16 equal the whole ones (logits()), the level's numbers equal the first level's, and a
 * cached forecast equals the reference one; and they moved from the same values run in
 * float32 (the activations are rounded too), by a little. */
static void test_bf16_anchor_levels(void **state) {
    (void)state;
    kr_model *as_f32 = load(1, KR_PREC_F32), *as_bf16 = load(1, KR_PREC_BF16);
    assert_non_null(as_f32);
    assert_non_null(as_bf16);
    assert_int_equal(kr_model_weights(as_bf16), KR_PREC_BF16);
    assert_int_equal(kr_model_weights(as_f32), KR_PREC_F32);
    assert_null(as_bf16->pred.blocks[0].qkv.wp); /* BF16 panels only */
    assert_non_null(as_bf16->pred.blocks[0].qkv.wh);
    static float first[OUT_FLOATS], ref[OUT_FLOATS];
    int levels = tu_levels_agree(as_bf16, NULL, N_TOK, 8, PATHS, first);
    logits(as_f32, ref);
    double scale, worst = tu_moved(ref, first, V, &scale);
    print_message("# weights bf16: %d kernel levels agree; s1 logits moved by %.3g of their %.3g "
                  "from float32 on the BF16 values\n",
                  levels, worst, scale);
    assert_true(worst > 0);
    assert_true(worst < 0.05 * scale);
    kr_model_free(as_f32);
    kr_model_free(as_bf16);
}

/* The nearest BF16 of f, ties to even, found by comparing distances in double: a second
 * way to round, against the loader's bit trick */
static uint16_t nearest_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, sizeof flo);
    memcpy(&fhi, &hi, sizeof fhi);
    double dlo = fabs((double)f - flo), dhi = fabs((double)f - fhi);
    if (dlo < dhi || (dlo == dhi && !((lo >> 16) & 1))) return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

/* Every weight of a layer loaded as bf16 is the nearest BF16 of the same layer loaded as
 * f32 (a denormal flushed to a zero of its sign: vdpbf16ps reads it so). */
static void rounded_like(const kr_linear *f32, const kr_linear *bf, const char *what) {
    assert_non_null(f32->wp);
    assert_non_null(bf->wh);
    size_t n = (size_t)f32->out * f32->in, bad = 0;
    for (int o = 0; o < f32->out; o++)
        for (int k = 0; k < f32->in; k++) {
            uint16_t h = nearest_bf16(f32->wp[((size_t)(o / 16) * f32->in + k) * 16 + o % 16]);
            if (kr_bf16_weight(bf, o, k) != ((h & 0x7f80u) ? h : (h & 0x8000u))) bad++;
        }
    if (bad) print_message("%s: %zu of %zu weights not the nearest BF16\n", what, bad, n);
    assert_int_equal(bad, 0);
}

static void all_rounded_like(const kr_model *f32, const kr_model *bf) {
    for (int i = 0; i < f32->pc.n_layers; i++) {
        const kr_block *x = &f32->pred.blocks[i], *y = &bf->pred.blocks[i];
        rounded_like(&x->qkv, &y->qkv, "qkv");
        rounded_like(&x->o, &y->o, "o");
        rounded_like(&x->w13, &y->w13, "w13");
        rounded_like(&x->w2, &y->w2, "w2");
    }
    for (int i = 0; i < f32->tok.n_enc; i++)
        rounded_like(&f32->tok.enc[i].w13, &bf->tok.enc[i].w13, "encoder w13");
    rounded_like(&f32->tok.embed, &bf->tok.embed, "embed");
    rounded_like(&f32->tok.head, &bf->tok.head, "tokenizer head");
    rounded_like(&f32->pred.fusion, &bf->pred.fusion, "fusion");
    rounded_like(&f32->pred.dep_kv, &bf->pred.dep_kv, "dep_kv");
    rounded_like(&f32->pred.proj_s1, &bf->pred.proj_s1, "proj_s1");
    rounded_like(&f32->pred.proj_s2, &bf->pred.proj_s2, "proj_s2");
}

/* An F32 checkpoint as bf16: its linear layers rounded to the BF16 file's values (mkmodel
 * rounds with its own code); its embeddings and norms stay float32, so its numbers are its
 * own, with the invariances of the mode. An F16 checkpoint as bf16: each F16 value rounded
 * to the nearest BF16. */
static void test_bf16_from_f32_and_f16(void **state) {
    (void)state;
    kr_model *f32 = load(0, KR_PREC_F32), *f32_bf = load(0, KR_PREC_BF16);
    kr_model *bf_bf = load(1, KR_PREC_BF16);
    kr_model *f16 = load(2, KR_PREC_F32), *f16_bf = load(2, KR_PREC_BF16);
    assert_non_null(f32);
    assert_non_null(f32_bf);
    assert_non_null(bf_bf);
    assert_non_null(f16);
    assert_non_null(f16_bf);
    all_rounded_like(f32, f32_bf);
    all_rounded_like(f16, f16_bf);
    size_t n = kr_bf16_packed(bf_bf->pred.blocks[0].w13.out, bf_bf->pred.blocks[0].w13.in);
    assert_memory_equal(f32_bf->pred.blocks[0].w13.wh, bf_bf->pred.blocks[0].w13.wh,
                        n * sizeof(uint16_t));
    /* the F32 file as bf16: within the mode, batch and token by token (logits() checks),
     * cached = uncached; and its logits moved from float32's, but not far */
    static float a[OUT_FLOATS], b[OUT_FLOATS];
    logits(f32, a);
    logits(f32_bf, b);
    double scale, worst = tu_moved(a, b, V, &scale);
    print_message("# weights bf16 on an F32 file: s1 logits moved by %.3g of their %.3g\n", worst,
                  scale);
    assert_true(worst > 0);
    assert_true(worst < 0.05 * scale);
    kr_forecast_result cached, plain;
    tu_walk_forecast(f32_bf, true, &cached);
    tu_walk_forecast(f32_bf, false, &plain);
    tu_same_paths(&cached, &plain);
    kr_forecast_result_free(&cached);
    kr_forecast_result_free(&plain);
    logits(f16_bf, b); /* the F16 file runs in the mode too */
    kr_model_free(f32);
    kr_model_free(f32_bf);
    kr_model_free(bf_bf);
    kr_model_free(f16);
    kr_model_free(f16_bf);
}

/* ---- kv bf16 ------------------------------------------------------------------------------ */

/* Attention over a BF16 view equals attention over a float32 view holding the same keys and
 * values rounded by nearest_bf16 (the test's own rounding), bit for bit, on every level: the
 * row path (a few rows) and the tile path (many rows over a shared prefix), heads of 32
 * and 64 (the AVX-512 four-heads path). */
static void attention_over_bf16(int d, int n_heads, int n_rows) {
    enum { B = 16, KEYS = 112 };
    int blocks = KEYS / B;
    size_t per_block = (size_t)2 * B * d;
    float *fmem = malloc((size_t)blocks * per_block * sizeof(float));
    float *hmem = malloc((size_t)blocks * per_block * sizeof(float)); /* half of it used */
    float *fb[KEYS / B], *hb[KEYS / B];
    float *krow = malloc((size_t)d * sizeof(float)), *kw = malloc((size_t)d * sizeof(float));
    float *q = malloc((size_t)n_rows * d * sizeof(float));
    float *o1 = malloc((size_t)n_rows * d * sizeof(float)), *o2 = malloc((size_t)n_rows * d * 4);
    float *scratch = malloc(kr_attend_scores_floats(KEYS, n_heads, d) * sizeof(float));
    assert_non_null(fmem);
    assert_non_null(hmem);
    assert_non_null(scratch);
    for (int b = 0; b < blocks; b++) {
        fb[b] = fmem + (size_t)b * per_block;
        hb[b] = hmem + (size_t)b * per_block / 2;
    }
    kr_kv_view fv = {fb, B, d, 0}, hv = {hb, B, d, 1};
    uint32_t st = 12345u + (uint32_t)d;
    for (int pos = 0; pos < KEYS; pos++)
        for (int kind = 0; kind < 2; kind++) {
            for (int i = 0; i < d; i++) {
                krow[i] = tu_lcg(&st) * 3.0f;
                uint32_t u = (uint32_t)nearest_bf16(krow[i]) << 16;
                memcpy(&kw[i], &u, sizeof u);
            }
            if (kind == 0) {
                kr_kv_put_k(&fv, 0, pos, kw);
                kr_kv_put_k(&hv, 0, pos, krow);
            } else {
                kr_kv_put_v(&fv, 0, pos, kw);
                kr_kv_put_v(&hv, 0, pos, krow);
            }
        }
    for (size_t i = 0; i < (size_t)n_rows * d; i++)
        q[i] = tu_lcg(&st);
    kr_attn_row *fr = malloc((size_t)n_rows * sizeof *fr),
                *hr = malloc((size_t)n_rows * sizeof *hr);
    for (int r = 0; r < n_rows; r++) { /* causal ends from 70 keys: a shared prefix past 64 */
        int n = 70 + r * (KEYS - 70) / n_rows;
        fr[r] = (kr_attn_row){&fv, n};
        hr[r] = (kr_attn_row){&hv, n};
    }
    for (int s = KR_SIMD_GENERIC; s <= KR_SIMD_AMX; s++) {
        if (kr_simd_set((kr_simd)s) != 0) continue;
        kr_attend_rows(o1, q, fr, n_rows, d, 0, n_heads, scratch, KEYS);
        kr_attend_rows(o2, q, hr, n_rows, d, 0, n_heads, scratch, KEYS);
        assert_memory_equal(o1, o2, (size_t)n_rows * d * sizeof(float));
    }
    kr_simd_set(kr_simd_level());
    free(fmem), free(hmem), free(krow), free(kw), free(q), free(o1), free(o2), free(scratch);
    free(fr), free(hr);
}

static void test_kv_bf16_attention(void **state) {
    (void)state;
    attention_over_bf16(128, 4, 3);  /* heads of 32, the row path */
    attention_over_bf16(256, 4, 2);  /* heads of 64: four heads at once */
    attention_over_bf16(128, 4, 40); /* the tile path */
    attention_over_bf16(256, 4, 40);
    attention_over_bf16(104, 2, 40); /* heads of 52: each level's tails */
    attention_over_bf16(104, 2, 3);
}

/* A model with kv bf16: a pool position takes half the bytes; on every level the batched
 * and token-by-token logits equal the whole ones (logits()), the level's numbers equal the
 * first level's and a cached forecast equals the reference one; with weights bf16 too, and
 * on a kv_shift model (its shifted keys and values stored rounded alike). */
static void test_kv_bf16_model(void **state) {
    (void)state;
    for (int w = 0; w < 3; w++) { /* weights f32, bf16; f32 with kv_shift */
        kr_model *f32 = load(w == 2 ? 3 : 0, KR_PREC_F32);
        kr_model *m = load_kv(w == 2 ? 3 : 0, w == 1 ? KR_PREC_BF16 : KR_PREC_F32, KR_PREC_BF16);
        assert_non_null(f32);
        assert_non_null(m);
        assert_int_equal(kr_model_kv(m), KR_PREC_BF16);
        assert_int_equal(2 * kr_pool_bytes_for(m, 512), kr_pool_bytes_for(f32, 512));
        static float first[OUT_FLOATS], ref[OUT_FLOATS];
        int levels = tu_levels_agree(m, NULL, N_TOK, 8, PATHS, first);
        logits(f32, ref);
        double scale, worst = tu_moved(ref, first, V, &scale);
        print_message("# kv bf16%s: %d levels agree; s1 logits moved by %.3g of their %.3g\n",
                      w == 1   ? " with weights bf16"
                      : w == 2 ? " with kv_shift"
                               : "",
                      levels, worst, scale);
        assert_true(worst > 0);
        kr_model_free(m);
        kr_model_free(f32);
    }
}

static void test_precision_names(void **state) {
    (void)state;
    kr_precision p = KR_PREC_BF16;
    kr_error err = {0};
    assert_int_equal(kr_precision_parse("f32", "weights", &p, &err), 0);
    assert_int_equal(p, KR_PREC_F32);
    assert_int_equal(kr_precision_parse("bf16", "weights", &p, &err), 0);
    assert_int_equal(p, KR_PREC_BF16);
    assert_string_equal(kr_precision_name(KR_PREC_BF16), "bf16");
    assert_string_equal(kr_precision_name(KR_PREC_F32), "f32");
    assert_int_equal(kr_precision_parse("fp16", "weights", &p, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_string_equal(err.msg, "weights: must be f32, bf16 or int8, got 'fp16'");
    kr_model_paths bad = {.tokenizer_dir = dirs[0], .predictor_dir = dirs[0], .weights = 7};
    assert_null(kr_model_load(&bad, &err));
    assert_int_equal(err.code, KR_E_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision_names),       cmocka_unit_test(test_bf16_anchor_levels),
        cmocka_unit_test(test_bf16_from_f32_and_f16), cmocka_unit_test(test_kv_bf16_attention),
        cmocka_unit_test(test_kv_bf16_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
