/* test_openapi.c — the API's document (server/app/openapi.h) against the router: every route
 * of the table is an operation of the document and every operation is answered by the router
 * (not 404, not 405), public exactly when the route is; the error object's codes are the error
 * table's; this server's figures stand where the parts ask for them. tests/e2e/openapi.py
 * checks the daemon's real answers against the document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "errors.h"
#include "openapi.h"
#include "routes.h"

static const kd_openapi_figures figures = {111, 222, 333, 444, 555, 1023, -1};

static json_t *document(void) {
    char err[256] = "";
    json_t *doc = kd_routes_document(&figures, err, sizeof err);
    if (!doc) fprintf(stderr, "%s\n", err);
    assert_non_null(doc);
    return doc;
}

/* "/sessions/{session}/generate" -> "/sessions/kronos-1-abc/generate" */
static void concrete(const char *path, char *out, size_t n) {
    const char *p = strstr(path, "{session}");
    if (p)
        snprintf(out, n, "%.*skronos-1-abc%s", (int)(p - path), path, p + strlen("{session}"));
    else
        snprintf(out, n, "%s", path);
}

static void test_every_route_is_documented(void **state) {
    (void)state;
    json_t *doc = document(), *paths = json_object_get(doc, "paths");
    size_t operations = 0;
    const char *path;
    json_t *item;
    json_object_foreach(paths, path, item) operations += json_object_size(item);
    assert_int_equal(operations, kd_route_count);
    for (size_t i = 0; i < kd_route_count; i++) {
        const kd_route_doc rt = kd_route_doc_at(i);
        int found = 0;
        json_object_foreach(paths, path, item) {
            const char *method;
            json_t *op;
            json_object_foreach(item, method, op) {
                if (strcmp(json_string_value(json_object_get(op, "operationId")), rt.operation))
                    continue;
                found++;
                assert_true(strcasecmp(method, rt.method) == 0);
            }
        }
        assert_int_equal(found, 1);
    }
    json_decref(doc);
}

/* The reverse: each documented operation is one the router answers, with the document's
 * public routes exactly the router's. */
static void test_every_operation_is_routed(void **state) {
    (void)state;
    json_t *doc = document();
    const char *path, *method;
    json_t *item, *op;
    json_object_foreach(json_object_get(doc, "paths"), path, item) {
        json_object_foreach(item, method, op) {
            char url[256], upper[16], allow[128];
            size_t k = 0;
            for (; method[k] && k + 1 < sizeof upper; k++)
                upper[k] = (char)(method[k] - 'a' + 'A');
            upper[k] = '\0';
            concrete(path, url, sizeof url);
            int endpoint = -1, status = -1;
            const kd_route *rt =
                kd_routes.match(upper, url, &endpoint, &status, allow, sizeof allow);
            if (!rt) fprintf(stderr, "%s %s: %d\n", upper, url, status);
            assert_non_null(rt);
            assert_int_equal(status, 0);
            const json_t *security = json_object_get(op, "security");
            assert_int_equal(kd_routes.is_public(rt), security && json_array_size(security) == 0);
            /* every operation answers its errors with the error object */
            json_t *responses = json_object_get(op, "responses");
            assert_non_null(json_object_get(responses, "400"));
            /* a public route answers 401 only when it asks for an admin key */
            assert_int_equal(json_object_get(responses, "401") != NULL,
                             !kd_routes.is_public(rt) ||
                                 json_is_true(json_object_get(op, "x-admin-key")));
        }
    }
    json_decref(doc);
}

static void test_error_codes_are_the_table(void **state) {
    (void)state;
    json_t *doc = document();
    const json_t *codes = json_object_get(doc, "components");
    const char *const walk[] = {"schemas",    "Error", "properties", "error",
                                "properties", "code",  "enum"};
    for (size_t i = 0; i < sizeof walk / sizeof walk[0]; i++)
        codes = json_object_get(codes, walk[i]);
    assert_int_equal(json_array_size(codes), kd_error_kind_count);
    for (size_t i = 0; i < kd_error_kind_count; i++)
        assert_string_equal(json_string_value(json_array_get(codes, i)), kd_error_kinds[i].code);
    json_decref(doc);
}

/* No placeholder is left; a known figure stands in its place, an unknown one leaves none. */
static int placeholders(const json_t *v) {
    int n = json_is_string(v) && json_string_value(v)[0] == '$';
    const char *key;
    json_t *m;
    size_t i;
    if (json_is_object(v)) json_object_foreach((json_t *)v, key, m) n += placeholders(m);
    if (json_is_array(v)) json_array_foreach(v, i, m) n += placeholders(m);
    return n;
}

static void test_figures(void **state) {
    (void)state;
    json_t *doc = document();
    assert_int_equal(placeholders(doc), 0);
    const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    const json_t *fr = json_object_get(json_object_get(schemas, "ForecastRequest"), "properties");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(fr, "horizon"), "maximum")),
                     222);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(fr, "samples"), "maximum")),
                     333);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(fr, "max_context"), "maximum")), 444);
    const json_t *pair = json_object_get(json_object_get(schemas, "Token"), "prefixItems");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pair, 0), "maximum")), 1023);
    assert_null(json_object_get(json_array_get(pair, 1), "maximum")); /* unknown: none */
    json_decref(doc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_is_documented),
        cmocka_unit_test(test_every_operation_is_routed),
        cmocka_unit_test(test_error_codes_are_the_table),
        cmocka_unit_test(test_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
