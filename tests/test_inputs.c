/* test_inputs.c — the parsers of outside input that issue 11 hardened: timestamps compared
 * as instants, the config file's comments and quotes, a safetensors header from memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "json_fields.h"
#include "safetensors.h"
#include "timefmt.h"

static int64_t wall(const char *s, int *offset) {
    int64_t w = 0;
    bool has_tz = false;
    char err[256];
    assert_int_equal(kd_parse_timestamp(s, &w, offset, &has_tz, err, sizeof err), 0);
    if (!has_tz) *offset = 0;
    return w;
}

static void test_instants(void **state) {
    (void)state;
    int64_t w[2];
    int off[2];
    char err[256];
    w[0] = wall("2024-01-01T10:00+05:00", &off[0]);
    w[1] = wall("2024-01-01T09:30Z", &off[1]);
    /* on the last one's clock (UTC): 05:00 then 09:30 */
    assert_int_equal(kd_align_timestamps(w, off, 2, off[1], NULL, "t[%zu]", err, sizeof err), 0);
    assert_true(w[0] < w[1]);
    assert_int_equal(w[1] - w[0], 4 * 3600 + 1800);

    w[0] = wall("2024-01-01T10:00Z", &off[0]);
    w[1] = wall("2024-01-01T10:30+05:00", &off[1]); /* 05:30Z: before */
    assert_int_equal(kd_align_timestamps(w, off, 2, off[1], NULL, "t[%zu]", err, sizeof err), -1);
    assert_non_null(strstr(err, "t[1]: not after the previous timestamp"));

    const int64_t after = wall("2024-01-01T12:00:00", &off[0]);
    w[0] = wall("2024-01-01T12:00:00", &off[0]);
    assert_int_equal(kd_align_timestamps(w, off, 1, 0, &after, "f[%zu]", err, sizeof err), -1);
    assert_non_null(strstr(err, "f[0]: not after the last context timestamp"));

    /* moved to +14:00, the last second of year 9999 cannot be written */
    w[0] = wall("9999-12-31T23:59:59Z", &off[0]);
    assert_int_equal(kd_align_timestamps(w, off, 1, 14 * 60, NULL, "t[%zu]", err, sizeof err), -1);
    assert_non_null(strstr(err, "years 0000-9999"));
}

static int parse_config(const char *text, kd_config *c, char *err, size_t errlen) {
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    memset(c, 0, sizeof *c);
    const int rc = kd_config_parse_stream(c, f, "t.conf", err, errlen);
    fclose(f);
    return rc;
}

static void test_config_comments_and_quotes(void **state) {
    (void)state;
    kd_config c;
    char err[512];
    assert_int_equal(parse_config("# a comment\n"
                                  "model = /srv/m#1   # a comment after whitespace\n"
                                  "host = \"127.0.0.1\"\n"
                                  "node-id = \"a # b\"\n"
                                  "port=9000#not a comment, so not a number\n",
                                  &c, err, sizeof err),
                     -1);
    assert_string_equal(c.model, "/srv/m#1");
    assert_string_equal(c.host, "127.0.0.1");
    assert_string_equal(c.node_id, "a # b");
    assert_non_null(strstr(err, "t.conf:5"));
    kd_config_free(&c);

    assert_int_equal(parse_config("model = \"/srv/m\n", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.conf:1: unbalanced quotes"));
    kd_config_free(&c);
}

static void test_config_flags_replace_file_model(void **state) {
    (void)state;
    char path[] = "/tmp/kronosd-test-XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("model = /srv/file-model\n", f);
    fclose(f);
    char *argv[] = {"serve", "--config", path, "--tokenizer", "/t", "--predictor", "/p", NULL};
    kd_config c;
    char err[512];
    assert_int_equal(kd_config_load(&c, 7, argv, err, sizeof err), 0);
    assert_null(c.model);
    assert_string_equal(c.tokenizer, "/t");
    assert_string_equal(c.predictor, "/p");
    kd_config_free(&c);
    remove(path);
}

static void test_safetensors_from_memory(void **state) {
    (void)state;
    static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char buf[8 + sizeof header - 1 + 8] = {0};
    buf[0] = (unsigned char)(sizeof header - 1);
    memcpy(buf + 8, header, sizeof header - 1);
    st_file f = {0};
    kr_error err = {0};
    assert_int_equal(st_parse(&f, buf, sizeof buf, "mem", &err), 0);
    assert_int_equal(f.n_tensors, 1);
    assert_non_null(st_find(&f, "w"));
    st_close(&f);

    buf[0] = 200; /* a header longer than the buffer */
    assert_int_equal(st_parse(&f, buf, sizeof buf, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "exceeds the file size"));
    st_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instants),
        cmocka_unit_test(test_config_comments_and_quotes),
        cmocka_unit_test(test_config_flags_replace_file_model),
        cmocka_unit_test(test_safetensors_from_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
