/* test_train.c — core/train on shapes the upstream fixture does not have (8-bit tokens, six
 * heads of 8, three blocks, fixed temporal tables, dropout): every tensor's gradient against
 * the loss's own finite differences, freezing by depth, the refusals, a checkpoint saved and
 * read back, a run's bookkeeping (best step, early stopping, cancelling), and the same gradient and
 * weight bytes at every SIMD level and at 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "kronos_train.h"
#include "matmul.h"      /* kr_simd_set */
#include "safetensors.h" /* the saved file read back */
#include "test_util.h"   /* tu_random_candles */

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { B = 3, T = 12 };

static char dir[64], pred[96], pred_drop[96];
static int32_t s1[B * (T + 1)], s2[B * (T + 1)], sib[B * T];
static kr_stamp stamps[B * (T + 1)];

static uint32_t lcg_state = 12345;
static uint32_t lcg(void) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

static int make_models(void) {
    const char *tool = getenv("KR_MKMODEL");
    if (!tool) return fprintf(stderr, "KR_MKMODEL is not set\n"), -1;
    snprintf(dir, sizeof dir, "/tmp/kr-train-test-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --out %s/m --preset tiny --seed 5 --s1-bits 8 --s2-bits 8 --n-layers 3 "
             "--d-model 48 --n-heads 6 --ff-dim 96 --no-learn-te >/dev/null && "
             "cp -r %s/m %s/drop && sed -i 's/_dropout_p\": 0.0/_dropout_p\": 0.125/' "
             "%s/drop/predictor/config.json",
             tool, dir, dir, dir, dir);
    if (system(cmd) != 0) return -1;
    snprintf(pred, sizeof pred, "%s/m/predictor", dir);
    snprintf(pred_drop, sizeof pred_drop, "%s/drop/predictor", dir);
    return 0;
}

static void fill_batch(void) {
    for (int i = 0; i < B * (T + 1); i++) {
        s1[i] = (int32_t)(lcg() % 256), s2[i] = (int32_t)(lcg() % 256);
        stamps[i] = (kr_stamp){(int)(lcg() % 60), (int)(lcg() % 24), (int)(lcg() % 7),
                               1 + (int)(lcg() % 31), 1 + (int)(lcg() % 12)};
    }
    for (int i = 0; i < B * T; i++)
        sib[i] = (int32_t)(lcg() % 256);
}

static int setup(void **state) {
    (void)state;
    fill_batch();
    return make_models();
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static kr_train_model *load(const char *path) {
    kr_error err = {0};
    kr_train_model *m = kr_train_load(path, &err);
    if (!m) fprintf(stderr, "%s\n", err.msg);
    assert_non_null(m);
    return m;
}

static kr_train_batch batch(kr_s2_condition c) {
    return (kr_train_batch){B, T, s1, s2, stamps, c, c == KR_S2_SAMPLED ? sib : NULL, 9};
}

static double loss_of(kr_train_model *m, const kr_train_batch *b) {
    kr_train_losses l;
    kr_error err = {0};
    assert_int_equal(kr_train_gradients(m, b, &l, &err), 0);
    return l.loss;
}

/* each tensor: the loss along its own gradient's direction, (L(w + hu) - L(w - hu)) / 2h,
 * equals the gradient's norm (u = g / |g|) */
static void directional(const char *path, kr_s2_condition c) {
    kr_train_model *m = load(path);
    kr_train_batch b = batch(c);
    loss_of(m, &b);
    int n = kr_train_tensor_count(m), checked = 0;
    for (int i = 0; i < n; i++) {
        const char *name = kr_train_tensor_name(m, i);
        const float *g0 = kr_train_tensor_gradient(m, i);
        if (strstr(name, "time_emb.")) assert_null(g0); /* fixed tables: no gradient */
        if (!g0) continue;
        size_t k;
        float *w = kr_train_tensor_weights(m, i, &k);
        float *g = malloc(k * sizeof(float)), *w0 = malloc(k * sizeof(float));
        assert_true(g && w0);
        memcpy(g, g0, k * sizeof(float));
        memcpy(w0, w, k * sizeof(float));
        double norm = 0;
        for (size_t e = 0; e < k; e++)
            norm += (double)g[e] * g[e];
        norm = sqrt(norm);
        double h = 2e-3, lp, lm;
        for (size_t e = 0; e < k; e++)
            w[e] = (float)(w0[e] + h * g[e] / norm);
        lp = loss_of(m, &b);
        for (size_t e = 0; e < k; e++)
            w[e] = (float)(w0[e] - h * g[e] / norm);
        lm = loss_of(m, &b);
        memcpy(w, w0, k * sizeof(float));
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - norm) > 0.02 * norm + 2e-4)
            fail_msg("%s: |g| %.6e, finite difference %.6e", name, norm, fd);
        checked++;
        free(g);
        free(w0);
    }
    print_message("# %s, %s: %d tensors' gradients match their finite differences\n", path,
                  c == KR_S2_TEACHER ? "teacher" : "sampled", checked);
    assert_true(checked > 30);
    kr_train_free(m);
}

static void test_gradients_teacher(void **state) {
    (void)state;
    directional(pred, KR_S2_TEACHER);
}

static void test_gradients_sampled(void **state) {
    (void)state;
    directional(pred, KR_S2_SAMPLED);
}

/* dropout masks come from the seed and the step: the gradient is that of the same loss */
static void test_gradients_dropout(void **state) {
    (void)state;
    directional(pred_drop, KR_S2_TEACHER);
    kr_train_model *a = load(pred), *d = load(pred_drop);
    kr_train_batch b = batch(KR_S2_TEACHER);
    double plain = loss_of(a, &b), l9 = loss_of(d, &b);
    assert_true(l9 == loss_of(d, &b)); /* same seed and step: same masks */
    b.seed = 10;
    assert_true(plain != l9 && loss_of(d, &b) != l9);
    kr_train_free(a);
    kr_train_free(d);
}

/* drawn siblings: a function of the seed */
static void test_drawn_siblings(void **state) {
    (void)state;
    kr_train_model *m = load(pred);
    kr_train_batch b = batch(KR_S2_SAMPLED);
    b.sibling = NULL;
    double l1 = loss_of(m, &b);
    assert_true(l1 == loss_of(m, &b));
    b.seed = 77;
    assert_true(l1 != loss_of(m, &b));
    kr_train_free(m);
}

/* depth 1: the top block and the heads get the very gradients of a full backward, the rest
 * none */
static void test_depth(void **state) {
    (void)state;
    kr_train_model *full = load(pred), *top = load(pred);
    kr_error err = {0};
    assert_int_equal(kr_train_set_depth(top, 4, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "depth"));
    assert_int_equal(kr_train_set_depth(top, 1, &err), 0);
    kr_train_batch b = batch(KR_S2_TEACHER);
    assert_true(loss_of(full, &b) == loss_of(top, &b));
    int trained = 0;
    for (int i = 0; i < kr_train_tensor_count(full); i++) {
        const char *name = kr_train_tensor_name(full, i);
        const float *gf = kr_train_tensor_gradient(full, i), *gt = kr_train_tensor_gradient(top, i);
        bool upper = !strncmp(name, "transformer.2.", 14) || !strncmp(name, "head.", 5) ||
                     !strncmp(name, "dep_layer.", 10) || !strcmp(name, "norm.weight");
        if (!upper || !gf) {
            assert_null(gt);
            continue;
        }
        size_t k;
        kr_train_tensor_weights(full, i, &k);
        assert_non_null(gt);
        assert_memory_equal(gf, gt, k * sizeof(float));
        trained++;
    }
    assert_int_equal(trained, 13 + 4 * 2 + 1 + 1 + 4); /* block, dep q/k/v/o, norms, heads */
    kr_train_free(full);
    kr_train_free(top);
}

static void test_refusals(void **state) {
    (void)state;
    kr_train_model *m = load(pred);
    kr_train_batch b = batch(KR_S2_TEACHER);
    kr_train_losses l;
    kr_error err = {0};
    int32_t bad[B * (T + 1)];
    memcpy(bad, s1, sizeof bad);
    bad[T + 3] = 256;
    b.s1 = bad;
    assert_int_equal(kr_train_gradients(m, &b, &l, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_string_equal(err.msg, "batch.s1[1][2]: 256 is outside [0, 256)");
    b = batch(KR_S2_TEACHER);
    b.len = 0;
    assert_int_equal(kr_train_gradients(m, &b, &l, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    kr_train_free(m);
    char kv[128];
    snprintf(kv, sizeof kv, "%s/kv", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --out %s --preset tiny --kv-shift >/dev/null",
             getenv("KR_MKMODEL"), kv);
    assert_int_equal(system(cmd), 0);
    strcat(kv, "/predictor");
    assert_null(kr_train_load(kv, &err));
    assert_non_null(strstr(err.msg, "kv_shift"));
}

/* a copy of the predictor's file with an integer buffer added ("extra.count", I64 [2]) */
static void with_int_buffer(const char *from, const char *to) {
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size);
    assert_true(b && fread(b, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    json_error_t je;
    json_t *h = json_loadb((const char *)b + 8, n, 0, &je);
    assert_non_null(h);
    json_int_t data = size - 8 - (long)n;
    json_object_set_new(h, "extra.count",
                        json_pack("{s:s, s:[i], s:[I,I]}", "dtype", "I64", "shape", 2,
                                  "data_offsets", data, data + 16));
    char *hs = json_dumps(h, JSON_COMPACT);
    size_t len = strlen(hs), padded = (len + 7) / 8 * 8;
    f = fopen(to, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8; i++)
        fputc((int)(padded >> (8 * i) & 255), f);
    fputs(hs, f);
    for (size_t i = len; i < padded; i++)
        fputc(' ', f);
    fwrite(b + 8 + n, 1, (size_t)data, f);
    int64_t count[2] = {7, -3};
    fwrite(count, sizeof count, 1, f);
    fclose(f);
    free(hs);
    json_decref(h);
    free(b);
}

/* a trained predictor saved and read back (by training and by the inference loader): every
 * tensor the same, an integer buffer carried unchanged */
static void test_save(void **state) {
    (void)state;
    char saved[160], intdir[160], cmd[600], path[200], tok[160];
    snprintf(saved, sizeof saved, "%s/saved", dir);
    snprintf(intdir, sizeof intdir, "%s/int", dir);
    snprintf(tok, sizeof tok, "%s/m/tokenizer", dir);
    kr_train_model *m = load(pred);
    kr_train_batch b = batch(KR_S2_TEACHER);
    kr_adamw o = {1e-3, 0.9, 0.95, 1e-8, 0.1};
    loss_of(m, &b);
    kr_train_adamw(m, &o);
    kr_error err = {0};
    assert_int_equal(kr_train_save(m, saved, &err), 0);
    kr_train_model *back = load(saved);
    assert_int_equal(kr_train_tensor_count(back), kr_train_tensor_count(m));
    for (int i = 0; i < kr_train_tensor_count(m); i++) {
        size_t k, k2;
        const float *w = kr_train_tensor_weights(m, i, &k);
        int j = kr_train_tensor_find(back, kr_train_tensor_name(m, i));
        assert_true(j >= 0);
        const float *w2 = kr_train_tensor_weights(back, j, &k2);
        assert_int_equal(k, k2);
        assert_memory_equal(w, w2, k * sizeof(float));
    }
    kr_model_paths paths = {.tokenizer_dir = tok, .predictor_dir = saved, .max_context = 512};
    kr_model *inf = kr_model_load(&paths, &err);
    if (!inf) fail_msg("the inference loader: %s", err.msg);
    kr_model_free(inf);
    /* an integer buffer */
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/config.json %s/", intdir, pred, intdir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", intdir);
    char src[200];
    snprintf(src, sizeof src, "%s/model.safetensors", pred);
    with_int_buffer(src, path);
    kr_train_model *im = load(intdir);
    int c = kr_train_tensor_find(im, "extra.count");
    assert_true(c >= 0);
    assert_null(kr_train_tensor_weights(im, c, NULL));
    assert_null(kr_train_tensor_gradient(im, c));
    assert_int_equal(kr_train_save(im, saved, &err), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", saved);
    st_file f;
    assert_int_equal(st_open(&f, path, &err), 0);
    const st_tensor *t = st_find(&f, "extra.count");
    assert_non_null(t);
    assert_string_equal(t->dtype_name, "I64");
    int64_t count[2];
    memcpy(count, f.data + t->begin, sizeof count);
    assert_true(count[0] == 7 && count[1] == -3);
    st_close(&f);
    kr_train_free(im);
    kr_train_free(back);
    kr_train_free(m);
}

enum { SERIES_N = 400 };
static int64_t ser_ts[SERIES_N];
static double ser_col[KR_D_IN][SERIES_N];

static int stop_at_3(void *ctx, const kr_finetune_progress *p) {
    (void)ctx;
    return p->step == 3;
}

/* a run: the best step the lowest validation's, early stopping, cancelling, the refusals */
static void test_finetune_run(void **state) {
    (void)state;
    double *cols[KR_D_IN];
    for (int c = 0; c < KR_D_IN; c++)
        cols[c] = ser_col[c];
    tu_random_candles(21, SERIES_N, ser_ts, cols);
    kr_candles series = {SERIES_N, ser_ts, {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]}};
    char tok[160];
    snprintf(tok, sizeof tok, "%s/m/tokenizer", dir);
    kr_model_paths paths = {.tokenizer_dir = tok, .predictor_dir = pred, .max_context = 512};
    kr_error err = {0};
    kr_model *inf = kr_model_load(&paths, &err);
    assert_non_null(inf);
    kr_finetune_settings s;
    kr_finetune_defaults(&s);
    s.lookback = 24, s.predict = 4, s.batch = 4, s.steps = 8, s.eval_every = 2, s.lr = 1e-3;
    kr_finetune_result r;
    kr_train_model *m = load(pred);
    assert_int_equal(kr_finetune(inf, m, &series, 1, &s, NULL, NULL, NULL, &r, &err), 0);
    int cut = SERIES_N - (int)(SERIES_N * 0.2), W = 29;
    assert_int_equal(r.train_windows, cut - W + 1);
    assert_int_equal(r.validation_windows, SERIES_N - cut - W + 1);
    assert_int_equal(r.steps, 8);
    assert_int_equal(r.n_validation, 5);
    int best = 0;
    for (int i = 0; i < r.n_validation; i++) {
        assert_int_equal(r.validation_step[i], 2 * i);
        if (r.validation[i] < r.validation[best]) best = i;
    }
    assert_int_equal(r.best_step, r.validation_step[best]);
    assert_true(r.best_validation == r.validation[best]);
    kr_finetune_result_free(&r);
    kr_train_free(m);
    /* a rate that wrecks the model: validation worsens, patience 1 stops the run */
    m = load(pred);
    s.lr = 5.0, s.patience = 1, s.steps = 40;
    assert_int_equal(kr_finetune(inf, m, &series, 1, &s, NULL, NULL, NULL, &r, &err), 0);
    assert_true(r.stopped_early && r.steps < 40);
    assert_int_equal(r.best_step, 0);
    kr_finetune_result_free(&r);
    kr_train_free(m);
    /* cancelled by the report */
    m = load(pred);
    s.lr = 1e-3, s.patience = 0;
    assert_int_equal(kr_finetune(inf, m, &series, 1, &s, NULL, stop_at_3, NULL, &r, &err), -1);
    assert_int_equal(err.code, KR_E_CANCELLED);
    assert_true(r.cancelled && r.steps == 3);
    kr_finetune_result_free(&r);
    /* refusals, naming the setting */
    s.validation_share = 0.05; /* 20 rows: no validation window of 29 */
    assert_int_equal(kr_finetune(inf, m, &series, 1, &s, NULL, NULL, NULL, &r, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "validation_share"));
    kr_finetune_result_free(&r);
    s.validation_share = 0.2, s.lookback = 400;
    assert_int_equal(kr_finetune(inf, m, &series, 1, &s, NULL, NULL, NULL, &r, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_non_null(strstr(err.msg, "series"));
    kr_finetune_result_free(&r);
    kr_train_free(m);
    kr_model_free(inf);
}

/* FNV-1a of every tensor's weights and gradient after two clipped AdamW steps (dropout on,
 * drawn siblings) */
static uint64_t two_steps_hash(void) {
    kr_train_model *m = load(pred_drop);
    kr_train_batch b = batch(KR_S2_SAMPLED);
    b.sibling = NULL;
    kr_adamw o = {1e-3, 0.9, 0.95, 1e-8, 0.1};
    for (int s = 0; s < 2; s++) {
        double norm;
        loss_of(m, &b);
        kr_train_clip(m, 0.5, &norm);
        kr_train_adamw(m, &o);
    }
    loss_of(m, &b);
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < kr_train_tensor_count(m); i++) {
        size_t k;
        const unsigned char *p[2] = {(const void *)kr_train_tensor_weights(m, i, &k),
                                     (const void *)kr_train_tensor_gradient(m, i)};
        for (int j = 0; j < 2; j++)
            for (size_t e = 0; p[j] && e < k * sizeof(float); e++)
                h = (h ^ p[j][e]) * 1099511628211ULL;
    }
    kr_train_free(m);
    return h;
}

static void test_same_bytes(void **state) {
    (void)state;
    kr_simd best = kr_simd_level();
    uint64_t ref = two_steps_hash();
    for (int s = KR_SIMD_GENERIC; s <= (int)best; s++) {
        assert_int_equal(kr_simd_set((kr_simd)s), 0);
        assert_true(two_steps_hash() == ref);
        print_message("# %s at %d threads: the same bytes\n", kr_simd_name((kr_simd)s),
                      kr_threads());
    }
    kr_simd_set(best);
    /* the same at one thread, in a process of its own (the pool's size is fixed at start) */
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "KRONOS_THREADS=1 /proc/%d/exe --hash %s", (int)getpid(), dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    unsigned long long other = 0;
    assert_int_equal(fscanf(p, "%llx", &other), 1);
    assert_int_equal(pclose(p), 0);
    assert_true(other == ref);
    print_message("# 1 thread and %d threads: the same bytes\n", kr_threads());
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--hash")) { /* test_same_bytes's other process */
        snprintf(dir, sizeof dir, "%s", argv[2]);
        snprintf(pred_drop, sizeof pred_drop, "%s/drop/predictor", dir);
        fill_batch(); /* the models are the parent's */
        printf("%llx\n", (unsigned long long)two_steps_hash());
        return 0;
    }
    if (!getenv("KRONOS_THREADS")) kr_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_teacher),
        cmocka_unit_test(test_gradients_sampled),
        cmocka_unit_test(test_gradients_dropout),
        cmocka_unit_test(test_drawn_siblings),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_save),
        cmocka_unit_test(test_finetune_run),
        cmocka_unit_test(test_same_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
