/* test_parsers.c — the parsers of outside input: timestamps compared
 * as instants, the config file's comments and quotes, a safetensors header from memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candles_csv.h"
#include "config.h"
#include "forecast_json.h"
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

/* ---- one rule for every way in: JSON columns, JSON rows, CSV ----------------------------- */

#define WAYS 3
static const char *const way_names[WAYS] = {"JSON columns", "JSON rows", "CSV"};

/* Three candles, each a timestamp (JSON text: a "string" or a number) and an open value
 * (JSON number text); high, low and close are 1. */
typedef struct {
    const char *ts[3], *open[3];
} three;

/* The candles written the way `way` takes them, parsed by that way's parser. */
static int parse_way(int way, const three *c, kd_owned_candles *out, char *err, size_t n) {
    char text[2048];
    size_t k = 0;
    if (way == 2) {
        k += (size_t)snprintf(text + k, sizeof text - k, "timestamps,open,high,low,close\n");
        for (int i = 0; i < 3; i++) { /* a CSV cell is the JSON text without quotes */
            const char *t = c->ts[i];
            const size_t tl = strlen(t) - (t[0] == '"' ? 2 : 0);
            k += (size_t)snprintf(text + k, sizeof text - k, "%.*s,%s,1,1,1\n", (int)tl,
                                  t + (t[0] == '"'), c->open[i]);
        }
        return kd_candles_csv_parse(text, k, 2, 0, out, err, n);
    }
    if (way == 0)
        snprintf(text, sizeof text,
                 "{\"timestamps\":[%s,%s,%s],\"open\":[%s,%s,%s],\"high\":[1,1,1],"
                 "\"low\":[1,1,1],\"close\":[1,1,1]}",
                 c->ts[0], c->ts[1], c->ts[2], c->open[0], c->open[1], c->open[2]);
    else
        for (int i = 0; i < 3; i++)
            k += (size_t)snprintf(text + k, sizeof text - k,
                                  "%s{\"timestamp\":%s,\"open\":%s,\"high\":1,\"low\":1,"
                                  "\"close\":1}%s",
                                  i ? "," : "[", c->ts[i], c->open[i], i == 2 ? "]" : "");
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v) fail_msg("%s: test JSON does not parse: %s (%s)", way_names[way], je.text, text);
    const int rc = kd_candles_parse(v, 2, 0, out, err, n);
    json_decref(v);
    return rc;
}

static void test_one_rule_every_way(void **state) {
    (void)state;
    static const struct {
        three c;
        const char *where[WAYS]; /* each way's locator of the bad value */
        const char *reason;      /* the same after it, whichever way */
    } bad[] = {
        {{{"1", "2", "3"}, {"1", "1e39", "1"}},
         {"candles.open[1]", "candles[1].open", "CSV line 3, column 2 (open)"},
         "1e+39 is outside the float32 range the model computes in (magnitude up to "
         "3.40282e+38)"},
        {{{"1", "2", "3"}, {"1", "1", "-4e38"}},
         {"candles.open[2]", "candles[2].open", "CSV line 4, column 2 (open)"},
         "-4e+38 is outside the float32 range the model computes in (magnitude up to "
         "3.40282e+38)"},
        {{{"1", "\"2024-13-01\"", "3"}, {"1", "1", "1"}},
         {"candles.timestamps[1]", "candles[1].timestamp", "CSV line 3, column 1 (timestamps)"},
         "\"2024-13-01\" is not a valid timestamp (month 13 is out of range 1-12)"},
        {{{"\"2024-06-18T10:00:00+24:00\"", "2", "3"}, {"1", "1", "1"}},
         {"candles.timestamps[0]", "candles[0].timestamp", "CSV line 2, column 1 (timestamps)"},
         "\"2024-06-18T10:00:00+24:00\" is not a valid timestamp (zone offset 24:00 is out of "
         "range)"},
        {{{"1", "1e300", "3"}, {"1", "1", "1"}},
         {"candles.timestamps[1]", "candles[1].timestamp", "CSV line 3, column 1 (timestamps)"},
         "Unix seconds 1e+300 are outside years 0000-9999"},
        /* 05:00Z is 10:00+05:00: not after 10:05+05:00 as an instant */
        {{{"\"2024-06-18T10:00:00+05:00\"", "\"2024-06-18T10:05:00+05:00\"",
           "\"2024-06-18T05:00:00Z\""},
          {"1", "1", "1"}},
         {"candles.timestamps[2]", "candles[2].timestamp", "CSV line 4, column 1 (timestamps)"},
         "not after the previous timestamp (compared as instants)"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (int w = 0; w < WAYS; w++) {
            kd_owned_candles c;
            char err[512] = "", want[512];
            if (parse_way(w, &bad[b].c, &c, err, sizeof err) == 0)
                fail_msg("case %zu, %s: accepted", b, way_names[w]);
            snprintf(want, sizeof want, "%s: %s", bad[b].where[w], bad[b].reason);
            if (strcmp(err, want) != 0)
                fail_msg("case %zu, %s:\n  got  %s\n  want %s", b, way_names[w], err, want);
        }

    /* the same candles, accepted, come out the same whichever way: instants on the last
     * one's clock (05:20Z is 10:20+05:00 is 05:20 on the Z clock) */
    const three ok = {{"\"2024-06-18T10:00:00+05:00\"", "\"2024-06-18T10:05:00+05:00\"",
                       "\"2024-06-18T05:20:00Z\""},
                      {"1", "2.5", "3"}};
    kd_owned_candles first;
    char err[512];
    assert_int_equal(parse_way(0, &ok, &first, err, sizeof err), 0);
    assert_int_equal(first.timestamps[2] - first.timestamps[1], 15 * 60);
    assert_int_equal(first.timestamps[1] - first.timestamps[0], 5 * 60);
    for (int w = 1; w < WAYS; w++) {
        kd_owned_candles c;
        if (parse_way(w, &ok, &c, err, sizeof err) != 0) fail_msg("%s: %s", way_names[w], err);
        assert_int_equal(c.n, first.n);
        assert_memory_equal(c.timestamps, first.timestamps, 3 * sizeof(int64_t));
        assert_memory_equal(c.columns[0], first.columns[0], 3 * sizeof(double));
        assert_int_equal(c.time_form.tz_offset_min, first.time_form.tz_offset_min);
        assert_int_equal(c.time_form.has_tz, first.time_form.has_tz);
        kd_candles_free(&c);
    }
    kd_candles_free(&first);
}

/* A NUL inside a CSV cell is refused, not read as the end of the value. */
static void test_csv_control_bytes(void **state) {
    (void)state;
    static const char csv[] = "timestamps,open,high,low,close\n1,1,1,1,1\n2,10.5\0"
                              "999,1,1,1\n";
    kd_owned_candles c;
    char err[512];
    assert_int_equal(kd_candles_csv_parse(csv, sizeof csv - 1, 2, 0, &c, err, sizeof err), -1);
    assert_string_equal(err, "CSV line 3, column 2: a control byte (0x00) is not allowed");
    static const char ts[] =
        "timestamps,open,high,low,close\n1,1,1,1,1\n1700002700\0junk,1,1,1,1\n";
    assert_int_equal(kd_candles_csv_parse(ts, sizeof ts - 1, 2, 0, &c, err, sizeof err), -1);
    assert_string_equal(err, "CSV line 3, column 1: a control byte (0x00) is not allowed");
    static const char bell[] = "timestamps,open,high,low,close\n1,1,1,1,1\n2,1\a,1,1,1\n";
    assert_int_equal(kd_candles_csv_parse(bell, sizeof bell - 1, 2, 0, &c, err, sizeof err), -1);
    assert_string_equal(err, "CSV line 3, column 2: a control byte (0x07) is not allowed");
    /* numbers as JSON writes them only */
    static const char hex[] = "timestamps,open,high,low,close\n1,1,1,1,1\n2,0x10,1,1,1\n";
    assert_int_equal(kd_candles_csv_parse(hex, sizeof hex - 1, 2, 0, &c, err, sizeof err), -1);
    assert_string_equal(err, "CSV line 3, column 2 (open): must be a number, got \"0x10\"");
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
        cmocka_unit_test(test_one_rule_every_way),
        cmocka_unit_test(test_csv_control_bytes),
        cmocka_unit_test(test_config_comments_and_quotes),
        cmocka_unit_test(test_config_flags_replace_file_model),
        cmocka_unit_test(test_safetensors_from_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
