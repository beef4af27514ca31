/* test_finetune_rules.c — the fine-tuning settings' rules (kr_finetune_check,
 * kr_finetune_gate_check) that kronosd finetune and POST /finetune share: every field's
 * refusal names it; and a run kept on its own thread (kr_finetune_this_thread_alone, as the
 * daemon's low-priority training thread runs) writes the same bytes as one on the pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "kronos_train.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void refused(const kr_finetune_settings *s, const kr_predictor_config *pc,
                    const char *field) {
    kr_error err = {0};
    assert_int_equal(kr_finetune_check(s, pc, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    char lead[40];
    snprintf(lead, sizeof lead, "%s: ", field);
    if (strncmp(err.msg, lead, strlen(lead)) != 0) fail_msg("%s: got \"%s\"", field, err.msg);
}

static void test_rules(void **state) {
    (void)state;
    kr_finetune_settings d, s;
    kr_finetune_defaults(&d);
    kr_predictor_config pc = {.n_layers = 2};
    kr_error err = {0};
    assert_int_equal(kr_finetune_check(&d, &pc, &err), 0);
    /* each field just out of its range */
    s = d, s.lookback = 0;
    refused(&s, &pc, "lookback");
    s = d, s.lookback = KR_FINETUNE_MAX_LEN + 1;
    refused(&s, &pc, "lookback");
    s = d, s.predict = -1;
    refused(&s, &pc, "predict");
    s = d, s.batch = 0;
    refused(&s, &pc, "batch");
    s = d, s.batch = KR_FINETUNE_MAX_BATCH + 1;
    refused(&s, &pc, "batch");
    s = d, s.steps = -1;
    refused(&s, &pc, "steps");
    s = d, s.steps = 0, s.epochs = 0;
    refused(&s, &pc, "steps");
    s = d, s.epochs = -2;
    refused(&s, &pc, "epochs");
    s = d, s.lr = 0;
    refused(&s, &pc, "lr");
    s = d, s.lr = NAN;
    refused(&s, &pc, "lr");
    s = d, s.lr = INFINITY;
    refused(&s, &pc, "lr");
    s = d, s.validation_share = 0.95;
    refused(&s, &pc, "validation_share");
    s = d, s.validation_share = -0.1;
    refused(&s, &pc, "validation_share");
    s = d, s.clip = 0;
    refused(&s, &pc, "clip");
    s = d, s.eval_every = -1;
    refused(&s, &pc, "eval_every");
    s = d, s.patience = -1;
    refused(&s, &pc, "patience");
    s = d, s.depth = 3;
    refused(&s, &pc, "depth");
    s = d, s.depth = -1;
    refused(&s, NULL, "depth");
    /* the edges pass; without the model's config the depth is not bounded above */
    s = d, s.lr = 5, s.validation_share = 0.9, s.depth = 2, s.predict = 0, s.steps = 1,
    s.epochs = 0;
    assert_int_equal(kr_finetune_check(&s, &pc, &err), 0);
    s.depth = 7;
    assert_int_equal(kr_finetune_check(&s, NULL, &err), 0);
    assert_int_equal(kr_finetune_gate_check(0, &err), 0);
    assert_int_equal(kr_finetune_gate_check(KR_FINETUNE_MAX_GATE_SAMPLES, &err), 0);
    assert_int_equal(kr_finetune_gate_check(-1, &err), -1);
    assert_int_equal(err.code, KR_E_INVALID);
    assert_int_equal(strncmp(err.msg, "gate_samples: ", 14), 0);
    assert_int_equal(kr_finetune_gate_check(KR_FINETUNE_MAX_GATE_SAMPLES + 1, &err), -1);
}

enum { N = 300 };

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* one short run of tests/data/tiny, its losses into loss[6], its checkpoint into out */
static void run(bool alone, const kr_candles *series, const char *out, double loss[6]) {
    kr_model_paths paths = {.tokenizer_dir = KR_TEST_DATA "/tiny/tokenizer",
                            .predictor_dir = KR_TEST_DATA "/tiny/predictor",
                            .max_context = 512};
    kr_error err = {0};
    kr_model *tok = kr_model_load(&paths, &err);
    kr_train_model *m = kr_train_load(paths.predictor_dir, &err);
    assert_non_null(tok);
    assert_non_null(m);
    kr_finetune_settings s;
    kr_finetune_defaults(&s);
    s.lookback = 24, s.predict = 4, s.batch = 4, s.steps = 6, s.eval_every = 3, s.lr = 1e-3;
    s.validation_share = 0, s.condition = KR_S2_SAMPLED, s.seed = 4;
    kr_finetune_result r;
    kr_finetune_this_thread_alone(alone);
    assert_int_equal(kr_finetune(tok, m, series, 1, &s, out, NULL, NULL, &r, &err), 0);
    kr_finetune_this_thread_alone(false);
    assert_int_equal(r.steps, 6);
    memcpy(loss, r.loss, 6 * sizeof *loss);
    kr_finetune_result_free(&r);
    kr_train_free(m);
    kr_model_free(tok);
}

static void test_alone_same_bytes(void **state) {
    (void)state;
    static int64_t ts[N];
    static double col[KR_D_IN][N];
    double *cols[KR_D_IN];
    for (int c = 0; c < KR_D_IN; c++)
        cols[c] = col[c];
    tu_random_candles(7, N, ts, cols);
    kr_candles series = {N, ts, {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]}};
    char base[] = "/tmp/kr-ft-rules-XXXXXX", a[64], b[64], fa[96], fb[96];
    assert_non_null(mkdtemp(base));
    snprintf(a, sizeof a, "%s/pool", base);
    snprintf(b, sizeof b, "%s/alone", base);
    double la[6], lb[6];
    run(false, &series, a, la);
    run(true, &series, b, lb);
    assert_memory_equal(la, lb, sizeof la);
    snprintf(fa, sizeof fa, "%s/model.safetensors", a);
    snprintf(fb, sizeof fb, "%s/model.safetensors", b);
    size_t na, nb;
    char *ba = read_all(fa, &na), *bb = read_all(fb, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ba, bb, na);
    free(ba);
    free(bb);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_alone_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
