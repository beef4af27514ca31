/* test_keep_f32.c — kr_model_paths.keep_f32 (the layers a reduced weights mode keeps float32,
 * for kronos-bench --agreement's measurement): the kept layers packed exactly as float32's,
 * the others in the mode; the mode's invariances with them kept (kernel levels, batch,
 * cached = uncached); unknown bits and a shared tokenizer packed otherwise refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h" /* kr_linear_packed_floats */
#include "model.h"  /* the packed weights */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static kr_model *load_keep(kr_precision weights, unsigned keep, kr_error *err) {
    kr_model_paths p = {.tokenizer_dir = KR_TEST_DATA "/tiny/tokenizer",
                        .predictor_dir = KR_TEST_DATA "/tiny/predictor",
                        .max_context = 512,
                        .weights = weights,
                        .keep_f32 = keep};
    return kr_model_load(&p, err);
}

static kr_model *must_load(kr_precision weights, unsigned keep) {
    kr_error err = {0};
    kr_model *m = load_keep(weights, keep, &err);
    if (!m) fail_msg("load: %s", err.msg);
    return m;
}

/* l is packed float32, the same floats as f32's packing of the layer */
static void same_f32(const kr_linear *l, const kr_linear *f32) {
    assert_non_null(l->wp);
    assert_null(l->wh);
    assert_null(l->wq);
    assert_non_null(f32->wp);
    assert_memory_equal(l->wp, f32->wp, kr_linear_packed_floats(l->out, l->in) * sizeof(float));
}

static void test_bf16_heads_kept(void **state) {
    (void)state;
    kr_model *f = must_load(KR_PREC_F32, 0), *b = must_load(KR_PREC_BF16, 0);
    kr_model *h = must_load(KR_PREC_BF16, KR_KEEP_HEADS);
    /* the mode's own choice: the heads in BF16 too */
    assert_non_null(b->pred.proj_s1.wh);
    assert_non_null(b->pred.proj_s2.wh);
    same_f32(&h->pred.proj_s1, &f->pred.proj_s1);
    same_f32(&h->pred.proj_s2, &f->pred.proj_s2);
    /* the rest stays BF16: the s2 head's keys and values, the fusion, the blocks */
    assert_non_null(h->pred.dep_kv.wh);
    assert_non_null(h->pred.fusion.wh);
    assert_non_null(h->pred.blocks[0].qkv.wh);
    assert_non_null(h->tok.head.wh);
    assert_int_equal(kr_model_weights(h), KR_PREC_BF16);
    kr_model_free(f), kr_model_free(b), kr_model_free(h);
}

static void test_bf16_edges_kept(void **state) {
    (void)state;
    kr_model *f = must_load(KR_PREC_F32, 0);
    kr_model *e = must_load(KR_PREC_BF16, KR_KEEP_HEADS | KR_KEEP_EMBEDDINGS);
    same_f32(&e->pred.proj_s1, &f->pred.proj_s1);
    same_f32(&e->pred.fusion, &f->pred.fusion);
    same_f32(&e->tok.embed, &f->tok.embed);
    same_f32(&e->tok.quant_embed, &f->tok.quant_embed);
    same_f32(&e->tok.post_quant_embed, &f->tok.post_quant_embed);
    same_f32(&e->tok.head, &f->tok.head);
    assert_non_null(e->pred.dep_q.wh);
    assert_non_null(e->tok.enc[0].w13.wh);
    kr_model_free(f), kr_model_free(e);
}

static void test_int8_embeddings_kept(void **state) {
    (void)state;
    kr_model *f = must_load(KR_PREC_F32, 0), *q = must_load(KR_PREC_INT8, 0);
    kr_model *e = must_load(KR_PREC_INT8, KR_KEEP_EMBEDDINGS);
    kr_model *h = must_load(KR_PREC_INT8, KR_KEEP_HEADS);
    assert_non_null(q->pred.fusion.wq);
    same_f32(&e->pred.fusion, &f->pred.fusion);
    assert_non_null(e->pred.blocks[0].w2.wq);
    /* int8 keeps the heads float32 anyway: the bit changes nothing there */
    same_f32(&q->pred.proj_s2, &f->pred.proj_s2);
    same_f32(&h->pred.proj_s1, &f->pred.proj_s1);
    assert_non_null(h->pred.dep_kv.wq);
    kr_model_free(f), kr_model_free(q), kr_model_free(e), kr_model_free(h);
}

/* The mode with its heads kept keeps the mode's invariances, and its logits are neither the
 * plain mode's nor float32's */
static void test_invariances(void **state) {
    (void)state;
    const int n_tok = 24, tail = 4, paths = 3;
    const size_t n = TU_LOGITS_FLOATS(paths);
    float *first = malloc(n * sizeof *first), *plain = malloc(n * sizeof *plain),
          *f32 = malloc(n * sizeof *f32);
    assert_true(first && plain && f32);
    kr_model *h = must_load(KR_PREC_BF16, KR_KEEP_HEADS), *b = must_load(KR_PREC_BF16, 0),
             *f = must_load(KR_PREC_F32, 0);
    assert_true(tu_levels_agree(h, NULL, n_tok, tail, paths, first) >= 1);
    tu_fork_logits(b, n_tok, tail, paths, plain);
    tu_fork_logits(f, n_tok, tail, paths, f32);
    assert_memory_not_equal(first, plain, n * sizeof *first);
    assert_memory_not_equal(first, f32, n * sizeof *first);
    kr_model_free(h), kr_model_free(b), kr_model_free(f);
    free(first), free(plain), free(f32);
}

static void test_refusals(void **state) {
    (void)state;
    kr_error err = {0};
    assert_null(load_keep(KR_PREC_BF16, 4, &err));
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "keep_f32"));
    /* a shared tokenizer keeps the packing its own model gave it */
    kr_model *a = must_load(KR_PREC_BF16, 0);
    kr_model_paths p = {.predictor_dir = KR_TEST_DATA "/tiny/predictor",
                        .tokenizer_dir = KR_TEST_DATA "/tiny/tokenizer",
                        .weights = KR_PREC_BF16,
                        .keep_f32 = KR_KEEP_EMBEDDINGS};
    memset(&err, 0, sizeof err);
    assert_null(kr_model_load_sharing(&p, a, &err));
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "keep_f32"));
    p.keep_f32 = KR_KEEP_HEADS; /* the heads are the predictor's own */
    kr_model *s = kr_model_load_sharing(&p, a, &err);
    assert_non_null(s);
    assert_non_null(s->pred.proj_s1.wp);
    kr_model_free(s), kr_model_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_heads_kept),
        cmocka_unit_test(test_bf16_edges_kept),
        cmocka_unit_test(test_int8_embeddings_kept),
        cmocka_unit_test(test_invariances),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
