/* test_keys.c — the key file (server/runtime/base/keys/keys.c): NAME:KEY lines, the bare
 * single key and its owner, every refusal with its line, keys never cut, the match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keys.h"

#define DATA KR_TEST_DATA "/keys"

static void assert_contains(const char *msg, const char *word) {
    if (!strstr(msg, word)) fail_msg("message \"%s\" does not contain \"%s\"", msg, word);
}

static kd_keys *parse(const char *text, char *err, size_t errlen) {
    err[0] = '\0';
    return kd_keys_parse(text, strlen(text), "keys", err, errlen);
}

/* text is refused, the message holding each of the words given. */
static void refused(const char *text, const char *word1, const char *word2) {
    char err[512];
    kd_keys *k = parse(text, err, sizeof err);
    if (k) fail_msg("\"%s\" was taken (%d keys)", text, k->n);
    assert_contains(err, word1);
    if (word2) assert_contains(err, word2);
}

static void test_named_file(void **state) {
    (void)state;
    char err[512];
    kd_keys *k = kd_keys_read("api-key-file", DATA "/tenants.keys", err, sizeof err);
    if (!k) fail_msg("%s", err);
    assert_int_equal(k->n, 3);
    assert_false(k->bare);
    assert_string_equal(k->keys[0].name, "alice");
    assert_string_equal(k->keys[0].secret, "alice-secret-1");
    assert_string_equal(k->keys[0].owner, "key alice");
    assert_int_equal(k->keys[0].line, 3);
    /* whitespace around the name and the key is not theirs */
    assert_string_equal(k->keys[1].name, "bob");
    assert_string_equal(k->keys[1].secret, "bob-secret-2");
    /* the first ':' ends the name: a key may hold more */
    assert_string_equal(k->keys[2].name, "ops.team_3-x");
    assert_string_equal(k->keys[2].secret, "k3:with:colons");
    assert_ptr_equal(kd_keys_match(k, "bob-secret-2", 12), &k->keys[1]);
    assert_ptr_equal(kd_keys_find(k, "bob"), &k->keys[1]);
    assert_null(kd_keys_find(k, "carol"));
    kd_keys_free(k);
}

/* A bare key file: one line, one key, named default; its owner is the key's digest
 * (sessions journaled under a bare key file stay that key's). */
static void test_bare_key(void **state) {
    (void)state;
    char err[512];
    kd_keys *k = kd_keys_read("api-key-file", DATA "/bare.keys", err, sizeof err);
    if (!k) fail_msg("%s", err);
    assert_int_equal(k->n, 1);
    assert_true(k->bare);
    assert_string_equal(k->keys[0].name, "default");
    assert_string_equal(k->keys[0].secret, "s3cret-key");
    /* FNV-1a of "s3cret-key": the owner a bare key's sessions are journaled under */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *s = "s3cret-key"; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    char want[64];
    snprintf(want, sizeof want, "key %016llx", (unsigned long long)h);
    assert_string_equal(k->keys[0].owner, want);
    kd_keys_free(k);
    /* no newline at the end, comments around it */
    k = parse("# the key\n  s3cret-key", err, sizeof err);
    if (!k) fail_msg("%s", err);
    assert_true(k->bare);
    assert_string_equal(k->keys[0].owner, want);
    kd_keys_free(k);
}

static void test_refusals_name_the_line(void **state) {
    (void)state;
    refused("", "empty", NULL);
    refused("# only\n\n# comments\n", "only comments", NULL);
    refused("alice:a1\n:b2\n", "line 2", "no name");
    refused("alice:a1\n\nbob:\n", "line 3", "no key");
    refused("alice:a1\nbob:b2\nalice:a3\n", "line 3", "line 1");
    refused("alice:same\nbob:same\n", "line 2", "alice");
    refused("alice:a1\nb2\n", "line 2", "without a name");
    refused("b1\nb2\n", "line 1", "without a name");
    refused("al ice:a1\n", "line 1", "A-Z a-z 0-9");
    refused("al/ice:a1\n", "line 1", "al/ice");
    refused("alice:a\001b\n", "line 1", "control");
    char name[KD_KEY_NAME_MAX + 8];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    char line[sizeof name + 8];
    snprintf(line, sizeof line, "%s:k\n", name);
    refused(line, "line 1", "not 1 to 48");
    name[KD_KEY_NAME_MAX] = '\0'; /* the longest name is taken */
    snprintf(line, sizeof line, "%s:k\n", name);
    char err[512];
    kd_keys *k = parse(line, err, sizeof err);
    if (!k) fail_msg("%s", err);
    kd_keys_free(k);
}

/* A key longer than KD_KEY_MAX is refused whole: no prefix of it ever authenticates. */
static void test_long_key_refused(void **state) {
    (void)state;
    char *text = malloc(5002);
    assert_non_null(text);
    memset(text, 'k', 5000);
    memcpy(text + 5000, "\n", 2);
    char err[512];
    kd_keys *k = kd_keys_parse(text, 5001, "keys", err, sizeof err);
    assert_null(k);
    assert_contains(err, "line 1");
    assert_contains(err, "5000 bytes");
    /* named, the same */
    memcpy(text, "big:", 4);
    assert_null(kd_keys_parse(text, 5001, "keys", err, sizeof err));
    assert_contains(err, "4996 bytes");
    /* at the limit it is taken, whole */
    text[KD_KEY_MAX] = '\0';
    memset(text, 'k', KD_KEY_MAX);
    k = kd_keys_parse(text, KD_KEY_MAX, "keys", err, sizeof err);
    if (!k) fail_msg("%s", err);
    assert_int_equal(k->keys[0].len, KD_KEY_MAX);
    assert_null(kd_keys_match(k, text, KD_KEY_MAX - 1));
    assert_non_null(kd_keys_match(k, text, KD_KEY_MAX));
    kd_keys_free(k);
    free(text);
}

static void test_files(void **state) {
    (void)state;
    char err[512];
    assert_null(kd_keys_read("api-key-file", DATA, err, sizeof err));
    assert_contains(err, "is a directory");
    assert_contains(err, "api-key-file " DATA);
    assert_null(kd_keys_read("admin-key-file", DATA "/comments.keys", err, sizeof err));
    assert_contains(err, "only comments");
    assert_contains(err, "admin-key-file");
    assert_null(kd_keys_read("api-key-file", DATA "/missing.keys", err, sizeof err));
    assert_contains(err, "No such file");
}

/* Only a whole key matches: not a prefix, not a longer token, not another key's. */
static void test_match(void **state) {
    (void)state;
    char err[512];
    kd_keys *k = parse("alice:abcdef\nbob:abc\n", err, sizeof err);
    if (!k) fail_msg("%s", err);
    assert_ptr_equal(kd_keys_match(k, "abcdef", 6), &k->keys[0]);
    assert_ptr_equal(kd_keys_match(k, "abc", 3), &k->keys[1]);
    assert_null(kd_keys_match(k, "abcd", 4));
    assert_null(kd_keys_match(k, "abcdefg", 7));
    assert_null(kd_keys_match(k, "", 0));
    assert_null(kd_keys_match(k, "ABCDEF", 6));
    kd_keys_free(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_file),
        cmocka_unit_test(test_bare_key),
        cmocka_unit_test(test_refusals_name_the_line),
        cmocka_unit_test(test_long_key_refused),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
