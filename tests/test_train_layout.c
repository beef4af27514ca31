/* test_train_layout.c — the checkpoint kr_train_save writes loads strictly in upstream's code:
 * its model.safetensors holds exactly the tensor names, shapes and dtypes of upstream's
 * state_dict for the config (the list built here from the spec's naming, checked first against
 * tests/data/tiny, which upstream wrote), nothing more, its data contiguous, and its
 * config.json the same keys and values as the one it was loaded with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "kronos_train.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

/* the header of a safetensors file (its size checked against the data's end) */
static json_t *st_header(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char le[8];
    assert_int_equal(fread(le, 1, 8, f), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | le[i];
    char *h = malloc(n);
    assert_non_null(h);
    assert_int_equal(fread(h, 1, n, f), n);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    json_error_t je;
    json_t *j = json_loadb(h, n, 0, &je);
    free(h);
    if (!j) fail_msg("%s: header is not JSON (%s)", path, je.text);
    /* every tensor's bytes are its shape's, back to back from 0 to the file's end */
    json_int_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        if (!strcmp(k, "__metadata__")) continue;
        json_int_t elems = 1;
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(v, "shape"), i, d) elems *= json_integer_value(d);
        json_t *off = json_object_get(v, "data_offsets");
        json_int_t b = json_integer_value(json_array_get(off, 0)),
                   e = json_integer_value(json_array_get(off, 1));
        assert_int_equal(e - b, elems * 4); /* F32 */
        total += e - b;
    }
    assert_int_equal(total, size - 8 - (long)n);
    return j;
}

static void put(json_t *o, const char *name, int64_t a, int64_t b) {
    json_t *shape =
        b ? json_pack("[I,I]", (json_int_t)a, (json_int_t)b) : json_pack("[I]", (json_int_t)a);
    json_object_set_new(o, name, json_pack("{s:s, s:o}", "dtype", "F32", "shape", shape));
}

/* upstream's state_dict for a predictor config (the spec's names): name → dtype, shape */
static json_t *expected(const kr_predictor_config *c, bool learn_te) {
    json_t *o = json_object();
    int64_t d = c->d_model, ff = c->ff_dim, hd = d / c->n_heads;
    char n[160];
    const char *proj[4] = {"q", "k", "v", "out"};
    for (int l = 0; l < c->n_layers; l++) {
        const char *p = "transformer";
        snprintf(n, sizeof n, "%s.%d.norm1.weight", p, l), put(o, n, d, 0);
        snprintf(n, sizeof n, "%s.%d.norm2.weight", p, l), put(o, n, d, 0);
        for (int k = 0; k < 4; k++) {
            snprintf(n, sizeof n, "%s.%d.self_attn.%s_proj.weight", p, l, proj[k]), put(o, n, d, d);
            snprintf(n, sizeof n, "%s.%d.self_attn.%s_proj.bias", p, l, proj[k]), put(o, n, d, 0);
        }
        snprintf(n, sizeof n, "%s.%d.self_attn.rotary.inv_freq", p, l), put(o, n, hd / 2, 0);
        snprintf(n, sizeof n, "%s.%d.ffn.w1.weight", p, l), put(o, n, ff, d);
        snprintf(n, sizeof n, "%s.%d.ffn.w3.weight", p, l), put(o, n, ff, d);
        snprintf(n, sizeof n, "%s.%d.ffn.w2.weight", p, l), put(o, n, d, ff);
    }
    for (int k = 0; k < 4; k++) {
        snprintf(n, sizeof n, "dep_layer.cross_attn.%s_proj.weight", proj[k]), put(o, n, d, d);
        snprintf(n, sizeof n, "dep_layer.cross_attn.%s_proj.bias", proj[k]), put(o, n, d, 0);
    }
    put(o, "dep_layer.cross_attn.rotary.inv_freq", d / 4 / 2, 0); /* 4 heads */
    put(o, "dep_layer.norm.weight", d, 0);
    put(o, "embedding.emb_s1.weight", (int64_t)1 << c->s1_bits, d);
    put(o, "embedding.emb_s2.weight", (int64_t)1 << c->s2_bits, d);
    put(o, "embedding.fusion_proj.weight", d, 2 * d);
    put(o, "embedding.fusion_proj.bias", d, 0);
    const char *te[5] = {"minute", "hour", "weekday", "day", "month"};
    int rows[5] = {60, 24, 7, 32, 13};
    for (int k = 0; k < 5; k++) {
        snprintf(n, sizeof n, "time_emb.%s_embed.%sweight", te[k], learn_te ? "" : "emb.");
        put(o, n, rows[k], d);
    }
    put(o, "norm.weight", d, 0);
    put(o, "head.proj_s1.weight", (int64_t)1 << c->s1_bits, d);
    put(o, "head.proj_s1.bias", (int64_t)1 << c->s1_bits, 0);
    put(o, "head.proj_s2.weight", (int64_t)1 << c->s2_bits, d);
    put(o, "head.proj_s2.bias", (int64_t)1 << c->s2_bits, 0);
    return o;
}

/* header h has exactly want's tensors, each of its dtype and shape */
static void same_tensors(json_t *h, json_t *want, const char *what) {
    const char *k;
    json_t *v;
    json_object_foreach(want, k, v) {
        if (!strcmp(k, "__metadata__")) continue;
        json_t *got = json_object_get(h, k);
        if (!got) fail_msg("%s: tensor %s is missing", what, k);
        if (!json_equal(json_object_get(got, "dtype"), json_object_get(v, "dtype")) ||
            !json_equal(json_object_get(got, "shape"), json_object_get(v, "shape")))
            fail_msg("%s: tensor %s: dtype or shape differs", what, k);
    }
    /* safetensors' own metadata as torch's save writes it */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(h, "__metadata__"), "format")), "pt");
    json_object_foreach(h, k, v) {
        if (strcmp(k, "__metadata__") && !json_object_get(want, k))
            fail_msg("%s: tensor %s is not in upstream's state_dict", what, k);
    }
}

/* trains predictor_dir one AdamW step, saves it, and checks the saved files */
static void check_saved(const char *predictor_dir, bool learn_te, json_t *reference) {
    kr_error err = {0};
    kr_train_model *m = kr_train_load(predictor_dir, &err);
    if (!m) fail_msg("%s: %s", predictor_dir, err.msg);
    json_t *want = expected(kr_train_config(m), learn_te);
    if (reference) same_tensors(reference, want, "the upstream fixture");
    /* one step on a small batch, so that the weights saved are trained ones */
    enum { NB = 2, NT = 8 };
    int32_t s1[NB * (NT + 1)], s2[NB * (NT + 1)];
    kr_stamp st[NB * (NT + 1)];
    const kr_predictor_config *c = kr_train_config(m);
    for (int i = 0; i < NB * (NT + 1); i++) {
        s1[i] = (int32_t)((i * 37 + 5) % (1 << c->s1_bits));
        s2[i] = (int32_t)((i * 53 + 11) % (1 << c->s2_bits));
        st[i] = (kr_stamp){i * 5 % 60, i % 24, i % 7, 1 + i % 28, 1 + i % 12};
    }
    kr_train_batch b = {NB, NT, s1, s2, st, KR_S2_TEACHER, NULL, 1};
    kr_train_losses l;
    if (kr_train_gradients(m, &b, &l, &err)) fail_msg("%s", err.msg);
    kr_adamw o = {1e-3, 0.9, 0.95, 1e-8, 0.1};
    kr_train_adamw(m, &o);
    char out[128], path[200], src[200];
    snprintf(out, sizeof out, "%s/saved-%d", dir, learn_te);
    assert_int_equal(kr_train_save(m, out, &err), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    json_t *h = st_header(path);
    same_tensors(h, want, "the saved checkpoint");
    if (reference) same_tensors(h, reference, "the saved checkpoint against the fixture");
    /* config.json: the same keys and values */
    snprintf(path, sizeof path, "%s/config.json", out);
    snprintf(src, sizeof src, "%s/config.json", predictor_dir);
    json_error_t je;
    json_t *c1 = json_load_file(path, 0, &je), *c0 = json_load_file(src, 0, &je);
    assert_non_null(c1);
    assert_non_null(c0);
    assert_true(json_equal(c0, c1));
    json_decref(c0);
    json_decref(c1);
    json_decref(h);
    json_decref(want);
    kr_train_free(m);
}

/* upstream's own file (tests/data/tiny, learned time tables) */
static void test_upstream_tiny(void **state) {
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/tiny/predictor/model.safetensors", KR_TEST_DATA);
    json_t *ref = st_header(path);
    snprintf(path, sizeof path, "%s/tiny/predictor", KR_TEST_DATA);
    check_saved(path, true, ref);
    json_decref(ref);
}

/* another shape: fixed time tables (their "emb." names), 8-bit tokens, three blocks of six heads */
static void test_fixed_tables(void **state) {
    (void)state;
    const char *tool = getenv("KR_MKMODEL");
    if (!tool) fail_msg("KR_MKMODEL is not set");
    char cmd[400], pred[128];
    snprintf(cmd, sizeof cmd,
             "%s --out %s/m --preset tiny --seed 3 --s1-bits 8 --s2-bits 9 --n-layers 3 "
             "--d-model 48 --n-heads 6 --ff-dim 96 --no-learn-te >/dev/null",
             tool, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(pred, sizeof pred, "%s/m/predictor", dir);
    check_saved(pred, false, NULL);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kr-train-layout-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upstream_tiny),
        cmocka_unit_test(test_fixed_tables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
