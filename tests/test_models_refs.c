/* test_models_refs.c — the model registry's references (server/runtime/base/models/models.c): a
 * removed model is unlisted at once and freed at its last reference, the default model and
 * a model with live sessions are refused, a freed slot is reused, and a model borrowing a
 * tokenizer holds the model it borrows from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

#define TINY KR_TEST_DATA "/tiny"

typedef struct {
    kd_config c;
    kd_models ms;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    char *argv[] = {"serve", "--model", "tiny=" TINY, NULL};
    char err[512];
    if (!f || kd_config_load(&f->c, 3, argv, err, sizeof err) != 0 ||
        kd_models_load(&f->ms, &f->c, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    kd_models_free(&f->ms);
    kd_config_free(&f->c);
    free(f);
    return 0;
}

/* tiny's folder again, as id: loaded, the load's reference dropped; its slot. */
static int add(fixture *f, const char *id) {
    const kd_model *md = NULL;
    char err[512];
    assert_int_equal(kd_models_add(&f->ms, &f->c, id, TINY, NULL, &md, err, sizeof err),
                     KD_MODEL_ADD_OK);
    assert_int_equal(md->refs, 1);
    kd_models_release(&f->ms, md);
    return (int)(md - f->ms.v);
}

static void ids_are(fixture *f, const char *want) {
    char ids[256];
    kd_models_ids(&f->ms, ids, sizeof ids);
    assert_string_equal(ids, want);
}

static void test_removed_is_freed_at_the_last_reference(void **state) {
    fixture *f = *state;
    const int b = add(f, "b");
    /* the same tokenizer files: b borrows tiny's, and holds tiny for it */
    assert_int_equal(f->ms.v[b].tokenizer_of, 0);
    assert_int_equal(f->ms.v[0].refs, 1);
    ids_are(f, "tiny, b");
    const kd_model *held = kd_models_acquire(&f->ms, "b");
    assert_ptr_equal(held, &f->ms.v[b]);
    char err[512];
    assert_int_equal(kd_models_remove(&f->ms, "b", err, sizeof err), KD_MODEL_REMOVE_OK);
    /* unlisted at once, still whole for the holder */
    assert_null(kd_models_acquire(&f->ms, "b"));
    ids_are(f, "tiny");
    assert_true(f->ms.v[b].used);
    assert_non_null(held->m);
    assert_int_equal(kr_model_max_context(held->m) > 0, 1);
    kd_models_release(&f->ms, held);
    /* freed, and its reference on tiny gone with it */
    assert_false(f->ms.v[b].used);
    assert_null(f->ms.v[b].m);
    assert_int_equal(f->ms.v[0].refs, 0);
    /* the slot is reused by the next load */
    assert_int_equal(add(f, "c"), b);
    assert_int_equal(kd_models_remove(&f->ms, "c", err, sizeof err), KD_MODEL_REMOVE_OK);
    assert_false(f->ms.v[b].used); /* no reference: freed at once */
}

static void test_refusals(void **state) {
    fixture *f = *state;
    char err[512];
    assert_int_equal(kd_models_remove(&f->ms, "tiny", err, sizeof err), KD_MODEL_REMOVE_DEFAULT);
    assert_non_null(strstr(err, "default model"));
    assert_int_equal(kd_models_remove(&f->ms, "nope", err, sizeof err), KD_MODEL_REMOVE_UNKNOWN);
    assert_non_null(strstr(err, "the models are: tiny"));
    const int d = add(f, "d");
    kd_models_bind_session(&f->ms, &f->ms.v[d]);
    kd_models_bind_session(&f->ms, &f->ms.v[d]);
    assert_int_equal(kd_models_remove(&f->ms, "d", err, sizeof err), KD_MODEL_REMOVE_BUSY);
    assert_non_null(strstr(err, "2 live sessions"));
    kd_models_unbind_session(&f->ms, &f->ms.v[d]);
    kd_models_unbind_session(&f->ms, &f->ms.v[d]);
    assert_true(f->ms.v[d].live); /* refused: nothing changed */
    const kd_model *md = NULL;
    assert_int_equal(kd_models_add(&f->ms, &f->c, "d", TINY, NULL, &md, err, sizeof err),
                     KD_MODEL_ADD_EXISTS);
    assert_int_equal(kd_models_remove(&f->ms, "d", err, sizeof err), KD_MODEL_REMOVE_OK);
    assert_false(f->ms.v[d].used);
}

static void test_default_is_acquired_by_null(void **state) {
    fixture *f = *state;
    const kd_model *md = kd_models_acquire(&f->ms, NULL);
    assert_ptr_equal(md, &f->ms.v[0]);
    assert_int_equal(md->refs, 1);
    kd_models_release(&f->ms, md);
    assert_int_equal(f->ms.v[0].refs, 0);
    assert_true(f->ms.v[0].used); /* listed: never freed by a release */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_removed_is_freed_at_the_last_reference, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_is_acquired_by_null, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
