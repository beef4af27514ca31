/* test_precision_int8.c — weights int8: the kernels against this file's own plain C of the
 * same quantised arithmetic, bit for bit on every level with each product the CPU runs
 * (tdpbsud, vpdpbusd, AVX-VNNI's vpdpbusd, vpmaddubsw, C), and the
 * activations' quantisation (its ties) on every level; the loader quantising F32, BF16 and
 * F16 checkpoints the same way (kronos-mkmodel writes one model in each dtype from the same
 * values; KR_MKMODEL names the tool); and the mode's invariances:
 * kernel levels, batch, cached = uncached (registered at 3 threads too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"    /* kr_linear_forward, kr_simd_set */
#include "matmul_q8.h" /* kr_q8_pack, the packed layout */
#include "model.h"     /* the packed weights, compared across loads */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 40
#define V     1024
#define PATHS 4

static char dirs[3][64]; /* the model in F32, BF16 and F16 */
static const char *const dtypes[3] = {"f32", "bf16", "f16"};

static int setup(void **state) {
    (void)state;
    return tu_mkmodels(dirs, dtypes, 3, 9);
}

static int teardown(void **state) {
    (void)state;
    return tu_rmdirs(dirs, 3);
}

static kr_model *load(int file, kr_precision weights) {
    return tu_load_dir(dirs[file], weights, KR_PREC_F32);
}

/* ---- the reference: Q8_0 as written out plainly ------------------------------------------ */

/* n <= 32 values of v into q[32]: scale |v| max / 127, each rounded half away from zero */
static float ref_quantise(int8_t q[32], const float *v, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; i++) {
        double t = i < n ? (double)(v[i] * id) : 0.0; /* the float product; + 0.5 exact */
        q[i] = (int8_t)(t < 0 ? -floor(-t + 0.5) : floor(t + 0.5));
    }
    return d;
}

/* block k of column o of the packed layer holds q (the pad inputs too) */
static void same_block(const kr_linear *l, int o, int k, const int8_t q[32]) {
    for (int i = 0; i < 32; i++)
        assert_int_equal(kr_q8_weight(l, o, 32 * k + i), q[i]);
}

/* y[T][out] from w[out][in] (torch layout), block by block in order */
static void ref_linear(float *y, const float *x, int T, const float *w, const float *b, int out,
                       int in) {
    for (int r = 0; r < T; r++)
        for (int o = 0; o < out; o++) {
            float acc = 0.0f;
            for (int k0 = 0; k0 < in; k0 += 32) {
                int n = in - k0 < 32 ? in - k0 : 32;
                int8_t qx[32], qw[32];
                float dx = ref_quantise(qx, x + (size_t)r * in + k0, n);
                float dw = ref_quantise(qw, w + (size_t)o * in + k0, n);
                int32_t s = 0;
                for (int i = 0; i < 32; i++)
                    s += qx[i] * qw[i];
                acc = fmaf(dx * dw, (float)s, acc);
            }
            y[(size_t)r * out + o] = b ? acc + b[o] : acc;
        }
}

/* One shape: packed weights against the reference quantisation, the product on every level
 * against ref_linear, each row alone against the batch, and the add and parts forms. */
static void one_shape(int out, int in, int T, uint32_t seed) {
    float *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *x = malloc(sizeof(float) * T * in), *ref = malloc(sizeof(float) * T * out);
    int nb = kr_q8_blocks(in);
    int8_t *wq = malloc(kr_q8_scales(out, in) * KR_Q8_BLOCK);
    float *ws = malloc(sizeof(float) * kr_q8_scales(out, in));
    assert_true(w && b && x && ref && wq && ws);
    for (int i = 0; i < out * in; i++) /* weights of mixed scales, a zero block, outliers */
        w[i] = tu_lcg(&seed) * (i % 7 == 0 ? 3.0f : 0.05f);
    for (int i = 0; i < in && i < 32; i++)
        w[i] = 0.0f;
    for (int o = 0; o < out; o++)
        b[o] = tu_lcg(&seed);
    for (int i = 0; i < T * in; i++)
        x[i] = tu_lcg(&seed) * (i % 11 == 0 ? 40.0f : 1.0f);
    kr_q8_pack(wq, ws, w, out, in);
    kr_linear l = {.b = b, .out = out, .in = in, .wq = wq, .ws = ws};
    for (int o = 0; o < out; o++)
        for (int k = 0; k < nb; k++) {
            int8_t q[32];
            int n = in - 32 * k < 32 ? in - 32 * k : 32;
            float d = ref_quantise(q, w + (size_t)o * in + 32 * k, n);
            same_block(&l, o, k, q);
            assert_true(d == kr_q8_scale(&l, o, k));
        }
    ref_linear(ref, x, T, w, b, out, in);
    kr_q8_avx2_product chosen = kr_q8_avx2_product_get();
    for (int pr = KR_Q8_AVX_VNNI; pr <= KR_Q8_MADDUBS; pr++) /* the avx2 level's two products */
        if (kr_q8_avx2_product_set((kr_q8_avx2_product)pr) == 0)
            tu_linear_every_level(&l, x, T, ref);
    assert_int_equal(kr_q8_avx2_product_set(chosen), 0);
    free(w), free(b), free(x), free(ref), free(wq), free(ws);
}

static void test_kernels_against_reference(void **state) {
    (void)state;
    one_shape(48, 64, 5, 1u);
    one_shape(200, 100, 37, 2u); /* a last block of 4 */
    one_shape(64, 512, 1, 3u);
    one_shape(130, 96, 2, 4u);
    one_shape(256, 256, 70, 5u);
    print_message("# int8 kernels: the plain C reference's bits on every level\n");
}

/* The tiles' edges: rows not a multiple of the row blocks (4, 16) nor of a task's; columns
 * not a whole panel, panels not a whole tile (8) nor a whole pair or four; an input a
 * multiple of the block but of no wider unit; products with and without the prefetch. At
 * the amx level: groups of 16 rows, a last shorter group, a last group of fewer than 8 rows
 * (vpdpbusd), odd and even counts of blocks. */
static void test_tile_edges(void **state) {
    (void)state;
    one_shape(144, 96, 17, 11u); /* 9 panels: a tile of 8 and one of 1 */
    one_shape(40, 32, 33, 12u);  /* 2.5 panels, one block */
    one_shape(48, 160, 2, 13u);  /* two rows: 3 panels as 2 + 1 */
    one_shape(208, 64, 1, 14u);  /* one row: 13 panels as 4 + 4 + 4 + 1 (in tiles of 8) */
    one_shape(16, 224, 3, 15u);  /* one panel, 7 blocks */
    one_shape(100, 40, 21, 16u); /* a partial last block and a partial last panel */
    one_shape(144, 64, 32, 17u); /* a decode step's few rows: two whole row blocks */
    one_shape(144, 64, 33, 18u); /* and one more: a partial third */
    one_shape(40, 100, 48, 19u); /* AMX: three whole groups of 16 rows, a last block of 4 */
    one_shape(72, 200, 49, 20u); /* a task of 16 rows four times, the last of one */
    one_shape(56, 72, 30, 21u);  /* a 30-path step: 16 + 14 rows, an odd count of blocks */
    one_shape(40, 96, 12, 22u);  /* AMX: one group of 12 rows, a partial last panel */
    print_message("# int8 tiles: row and panel edges, the reference's bits on every level\n");
}

/* The activations' quantisation on every level against ref_quantise: the scale, each byte and
 * -128 times the block's sum. A block whose largest |x| is 127 (scale 1) holds exact ties
 * (k + 0.5 rounds away from zero) and values a hair either side of them; a last block of 5
 * takes the portable path on every level. */
static void test_quantise_rows_every_level(void **state) {
    (void)state;
    enum { ROWS = 3, IN = 69, NB = 3 };
    static const float ties[] = {127.0f, 0.5f,    -0.5f, 1.5f,   -1.5f, 2.5f,  -2.5f,
                                 126.5f, -126.5f, 3.25f, -3.75f, 0.0f,  -0.0f, 63.5f};
    float x[ROWS * IN];
    uint32_t seed = 21u;
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < IN; k++) {
            float *v = &x[r * IN + k];
            if (k < 32 && k < (int)(sizeof ties / sizeof *ties))
                *v = r == 1 ? -ties[k] : ties[k];
            else if (k < 32)
                *v = nextafterf((float)(k - 40) + 0.5f, k % 2 ? 0.0f : 1000.0f);
            else
                *v = tu_lcg(&seed) * (r + 1.0f) * 7.0f;
        }
    int levels = 0;
    for (int s = KR_SIMD_GENERIC; s <= KR_SIMD_AMX; s++) {
        if (kr_simd_set((kr_simd)s) != 0) continue;
        levels++;
        int8_t q[ROWS * NB * 32];
        float d[ROWS * NB];
        int32_t neg[ROWS * NB];
        kr_q8_rows xq = {.q = q, .d = d, .neg = neg, .nb = NB};
        kr_q8_quantise_rows(&xq, x, ROWS, IN, (kr_simd)s);
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < NB; b++) {
                int8_t want[32];
                int n = IN - 32 * b < 32 ? IN - 32 * b : 32, sum = 0;
                float dw = ref_quantise(want, x + r * IN + 32 * b, n);
                assert_true(d[r * NB + b] == dw);
                assert_memory_equal(q + (r * NB + b) * 32, want, 32);
                for (int i = 0; i < 32; i++)
                    sum += want[i];
                assert_int_equal(neg[r * NB + b], -128 * sum);
            }
    }
    kr_simd_set(kr_simd_level());
    assert_true(levels >= 1);
    print_message("# int8 activations: ties and partial blocks quantised as the reference, %d "
                  "levels\n",
                  levels);
}

/* l's weights unpacked from float32 panels ([panel][in][16]) into torch's [out][in] */
static float *unpack(const kr_linear *l) {
    float *w = malloc(sizeof(float) * l->out * l->in);
    assert_non_null(w);
    for (int o = 0; o < l->out; o++)
        for (int k = 0; k < l->in; k++)
            w[(size_t)o * l->in + k] = l->wp[((size_t)(o / 16) * l->in + k) * 16 + o % 16];
    return w;
}

/* q (int8) holds f's weights (float32 panels) quantised as the reference does */
static void quantised_like(const kr_linear *f, const kr_linear *q) {
    assert_non_null(f->wp);
    assert_non_null(q->wq);
    assert_null(q->wp);
    float *w = unpack(f);
    for (int o = 0; o < f->out; o++)
        for (int k = 0; k * 32 < f->in; k++) {
            int8_t r[32];
            int n = f->in - 32 * k < 32 ? f->in - 32 * k : 32;
            float d = ref_quantise(r, w + (size_t)o * f->in + 32 * k, n);
            same_block(q, o, k, r);
            assert_true(d == kr_q8_scale(q, o, k));
        }
    free(w);
}

static void block_like(const kr_block *f, const kr_block *q) {
    quantised_like(&f->qkv, &q->qkv);
    quantised_like(&f->o, &q->o);
    quantised_like(&f->w13, &q->w13);
    quantised_like(&f->w2, &q->w2);
}

/* Each file loaded as int8 holds the same file loaded as f32 (its values exactly: BF16 and
 * F16 widen exactly) quantised by the reference; the edges stay float32. */
static void test_int8_from_each_dtype(void **state) {
    (void)state;
    for (int f = 0; f < 3; f++) {
        kr_model *a = load(f, KR_PREC_F32), *q = load(f, KR_PREC_INT8);
        assert_non_null(a);
        assert_non_null(q);
        assert_int_equal(kr_model_weights(q), KR_PREC_INT8);
        for (int i = 0; i < a->tok.n_enc; i++)
            block_like(&a->tok.enc[i], &q->tok.enc[i]);
        for (int i = 0; i < a->tok.n_dec; i++)
            block_like(&a->tok.dec[i], &q->tok.dec[i]);
        for (int i = 0; i < a->pred.n_layers; i++)
            block_like(&a->pred.blocks[i], &q->pred.blocks[i]);
        quantised_like(&a->pred.fusion, &q->pred.fusion);
        quantised_like(&a->pred.dep_q, &q->pred.dep_q);
        quantised_like(&a->pred.dep_o, &q->pred.dep_o);
        quantised_like(&a->pred.dep_kv, &q->pred.dep_kv);
        const kr_linear *edges_a[] = {&a->tok.embed, &a->tok.head, &a->pred.proj_s1,
                                      &a->pred.proj_s2},
                        *edges_q[] = {&q->tok.embed, &q->tok.head, &q->pred.proj_s1,
                                      &q->pred.proj_s2};
        for (int e = 0; e < 4; e++) { /* float32, the same panels */
            assert_null(edges_q[e]->wq);
            assert_non_null(edges_q[e]->wp);
            assert_memory_equal(edges_a[e]->wp, edges_q[e]->wp,
                                kr_linear_packed_floats(edges_a[e]->out, edges_a[e]->in) *
                                    sizeof(float));
        }
        kr_model_free(a);
        kr_model_free(q);
    }
    print_message("# int8 loader: F32, BF16 and F16 files quantised as the reference does\n");
}

/* tu_fork_logits of this file's sequence, every token also one by one */
#define OUT_FLOATS TU_LOGITS_FLOATS(PATHS)
static void logits(const kr_model *m, float *out) {
    tu_fork_logits(m, N_TOK, N_TOK, PATHS, out);
}

/* On every level: batch and token by token (logits()), cached = uncached, and the same
 * numbers as the first level; and the numbers moved from float32's, by a little. */
static void test_int8_model_invariances(void **state) {
    (void)state;
    kr_model *m = load(0, KR_PREC_INT8), *f32 = load(0, KR_PREC_F32);
    assert_non_null(m);
    assert_non_null(f32);
    static float first[OUT_FLOATS], ref[OUT_FLOATS], again[OUT_FLOATS];
    int levels = tu_levels_agree(m, NULL, N_TOK, N_TOK, PATHS, first);
    kr_q8_avx2_product chosen = kr_q8_avx2_product_get(),
                       other = KR_Q8_AVX_VNNI + KR_Q8_MADDUBS - chosen;
    if (kr_q8_avx2_product_set(other) == 0) { /* the avx2 level's other product: the same bits */
        levels += tu_levels_agree(m, NULL, N_TOK, N_TOK, PATHS, again);
        assert_memory_equal(again, first, sizeof first);
        assert_int_equal(kr_q8_avx2_product_set(chosen), 0);
    }
    logits(f32, ref);
    double scale, worst = tu_moved(ref, first, V, &scale);
    print_message("# weights int8: %d levels agree; s1 logits moved by %.3g of their %.3g\n",
                  levels, worst, scale);
    assert_true(worst > 0);
    assert_true(worst < 0.1 * scale);
    kr_model_free(m);
    kr_model_free(f32);
}

static void test_int8_names(void **state) {
    (void)state;
    kr_precision p = KR_PREC_F32;
    kr_error err = {0};
    assert_int_equal(kr_precision_parse("int8", "weights", &p, &err), 0);
    assert_int_equal(p, KR_PREC_INT8);
    assert_string_equal(kr_precision_name(KR_PREC_INT8), "int8");
    assert_int_equal(kr_precision_parse("q8", "weights", &p, &err), -1);
    assert_string_equal(err.msg, "weights: must be f32, bf16 or int8, got 'q8'");
    assert_int_equal(kr_kv_precision_parse("int8", "kv", &p, &err), -1);
    assert_string_equal(err.msg, "kv: must be f32 or bf16, got 'int8'");
    assert_int_equal(kr_kv_precision_parse("bf16", "kv", &p, &err), 0);
    assert_int_equal(p, KR_PREC_BF16);
    char tok[128], pred[128];
    snprintf(tok, sizeof tok, "%s/tokenizer", dirs[0]);
    snprintf(pred, sizeof pred, "%s/predictor", dirs[0]);
    kr_model_paths kv8 = {.tokenizer_dir = tok, .predictor_dir = pred, .kv = KR_PREC_INT8};
    assert_null(kr_model_load(&kv8, &err));
    assert_int_equal(err.code, KR_E_INVALID);
    assert_string_equal(err.msg, "model load: kv: must be f32 or bf16, got int8");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_names),
        cmocka_unit_test(test_kernels_against_reference),
        cmocka_unit_test(test_tile_edges),
        cmocka_unit_test(test_quantise_rows_every_level),
        cmocka_unit_test(test_int8_from_each_dtype),
        cmocka_unit_test(test_int8_model_invariances),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
