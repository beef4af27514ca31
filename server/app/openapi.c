/* openapi.c — the OpenAPI document (openapi.h): the route table's rows, the error table,
 * this server's figures and the written parts, put together. */
#include "openapi.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"

kd_openapi_figures kd_openapi_figures_of(const kd_app *app) {
    const kd_config *c = &app->cfg;
    kd_openapi_figures f = {c->max_candles,
                            c->max_horizon,
                            c->max_samples,
                            c->max_context,
                            (long long)c->max_body_bytes,
                            -1,
                            -1};
    /* the model is written before the state first leaves KD_STARTING, and read-only after */
    if (atomic_load(&app->state) != KD_STARTING) {
        const kr_predictor_config *pc = kr_model_predictor_config(app->model);
        f.max_context = kr_model_max_context(app->model);
        f.s1_max = (1LL << pc->s1_bits) - 1;
        f.s2_max = (1LL << pc->s2_bits) - 1;
    }
    return f;
}

/* ---- the figures ------------------------------------------------------------------------ */

/* The figure a placeholder string ("$max_horizon") names: 1 and *out, 0 when it names none,
 * -1 when it names one this server does not know yet (the model still loading). */
static int figure(const kd_openapi_figures *f, const char *name, long long *out) {
    const struct {
        const char *name;
        long long value;
    } table[] = {
        {"$max_candles", f->max_candles},
        {"$max_horizon", f->max_horizon},
        {"$max_samples", f->max_samples},
        {"$max_context", f->max_context},
        {"$max_body_bytes", f->max_body_bytes},
        {"$s1_max", f->s1_max},
        {"$s2_max", f->s2_max},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            *out = table[i].value;
            return table[i].value >= 0 ? 1 : -1;
        }
    return 0;
}

/* Every member whose value is a placeholder gets the figure (or goes, when unknown); a
 * placeholder naming no figure is an error. */
static int put_figures(json_t *v, const kd_openapi_figures *f, char *err, size_t errlen) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (put_figures(json_array_get(v, i), f, err, errlen) < 0) return -1;
        return 0;
    }
    if (!json_is_object(v)) return 0;
    const char *key;
    json_t *m;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, m) {
        const char *s = json_string_value(m);
        if (s && s[0] == '$') {
            long long x = 0;
            const int known = figure(f, s, &x);
            if (known == 0) {
                snprintf(err, errlen, "openapi_parts.json: %s: no such figure", s);
                return -1;
            }
            if ((known > 0 ? json_object_set_new(v, key, json_integer(x))
                           : json_object_del(v, key)) < 0) {
                snprintf(err, errlen, "openapi: out of memory");
                return -1;
            }
        } else if (put_figures(m, f, err, errlen) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- errors ----------------------------------------------------------------------------- */

/* The error object, its code one of the error table's, each listed with its status. */
static json_t *error_schema(void) {
    json_t *codes = json_array();
    char text[8192];
    size_t used = (size_t)snprintf(text, sizeof text, "Every error answer. The codes: ");
    for (size_t i = 0; codes && i < kd_error_kind_count; i++) {
        const kd_error_kind *k = &kd_error_kinds[i];
        json_array_append_new(codes, json_string(k->code));
        if (used < sizeof text)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s`%s` (%d): %s",
                                     i ? "; " : "", k->code, k->status, k->meaning);
    }
    return json_pack("{s:s,s:s,s:[s],s:b,s:{s:{s:s,s:[s,s],s:b,s:{s:{s:s,s:o},s:{s:s}}}}}",
                     "description", text, "type", "object", "required", "error",
                     "additionalProperties", 0, "properties", "error", "type", "object", "required",
                     "code", "message", "additionalProperties", 0, "properties", "code", "type",
                     "string", "enum", codes, "message", "type", "string");
}

/* Statuses no operation lists: 405 is the path's (a method it does not take), 499 is
 * logged for a client that left and never received. */
static bool operation_status(int status) {
    return status != 405 && status != 499;
}

/* The answer of an error status: its codes and what they mean, the error object. */
static json_t *error_response(int status) {
    char text[4096];
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < kd_error_kind_count && used < sizeof text; i++)
        if (kd_error_kinds[i].status == status)
            used +=
                (size_t)snprintf(text + used, sizeof text - used, "%s`%s`: %s", used ? "; " : "",
                                 kd_error_kinds[i].code, kd_error_kinds[i].meaning);
    return json_pack("{s:s,s:{s:{s:{s:s}}}}", "description", text, "content", "application/json",
                     "schema", "$ref", "#/components/schemas/Error");
}

/* components.responses: "400" ... one per status of the error table. */
static json_t *error_responses(void) {
    json_t *all = json_object();
    for (size_t i = 0; all && i < kd_error_kind_count; i++) {
        char key[8];
        snprintf(key, sizeof key, "%d", kd_error_kinds[i].status);
        if (operation_status(kd_error_kinds[i].status) && !json_object_get(all, key))
            json_object_set_new(all, key, error_response(kd_error_kinds[i].status));
    }
    return all;
}

/* Adds the answer of error status to responses (a written one stays), as a reference to
 * components.responses. */
static int add_error(json_t *responses, int status, char *err, size_t errlen) {
    char key[8], ref[64];
    snprintf(key, sizeof key, "%d", status);
    if (json_object_get(responses, key)) return 0;
    for (size_t i = 0; operation_status(status) && i < kd_error_kind_count; i++)
        if (kd_error_kinds[i].status == status) {
            snprintf(ref, sizeof ref, "#/components/responses/%d", status);
            return json_object_set_new(responses, key, json_pack("{s:s}", "$ref", ref));
        }
    snprintf(err, errlen, "openapi: no error code has status %d", status);
    return -1;
}

/* ---- operations ------------------------------------------------------------------------- */

/* The path parameter a route's segment is: a model's id under /models/, a job's under
 * /finetune/, else a session's. */
static const char *path_param(const char *route) {
    if (strncmp(route, "/finetune/", 10) == 0) return "job";
    return strncmp(route, "/models/", 8) == 0 ? "model" : "session";
}

/* "/sessions/" (a prefix and one segment) and "/sessions/x/generate" as OpenAPI paths. */
static void openapi_path(const char *route, char *out, size_t n) {
    const char *star = strchr(route, '*');
    const size_t len = strlen(route);
    if (star)
        snprintf(out, n, "%.*s{%s}%s", (int)(star - route), route, path_param(route), star + 1);
    else if (len > 1 && route[len - 1] == '/')
        snprintf(out, n, "%s{%s}", route, path_param(route));
    else
        snprintf(out, n, "%s", route);
}

/* The operation of route rt: its written part, its id, its path parameter, its security
 * and its error answers. */
static json_t *operation(const kd_route_doc *rt, const json_t *part, bool with_param, char *err,
                         size_t errlen) {
    json_t *op = json_deep_copy(part);
    if (!op) return NULL;
    json_object_set_new(op, "operationId", json_string(rt->operation));
    if (rt->is_public) json_object_set_new(op, "security", json_array());
    if (with_param) {
        json_t *params = json_object_get(op, "parameters");
        if (!params) json_object_set_new(op, "parameters", params = json_array());
        char ref[64]; /* "model" is the query's (a text/csv body's model): the path's differs */
        snprintf(ref, sizeof ref, "#/components/parameters/%s%s", path_param(rt->path),
                 strcmp(path_param(rt->path), "model") == 0 ? "_path" : "");
        json_array_insert_new(params, 0, json_pack("{s:s}", "$ref", ref));
    }
    json_t *responses = json_object_get(op, "responses");
    const json_t *statuses = json_object_get(op, "x-errors");
    if (!json_is_object(responses) || !json_is_array(statuses)) {
        snprintf(err, errlen, "openapi_parts.json: %s: needs responses and x-errors",
                 rt->operation);
        json_decref(op);
        return NULL;
    }
    /* every request can be badly framed; a key is asked off the public routes; the
     * model's routes are refused while it loads and while draining; a body can come in a
     * transfer coding kronosd does not take */
    int rc = add_error(responses, 400, err, errlen);
    if (!rt->is_public && rc == 0) rc = add_error(responses, 401, err, errlen);
    if (rt->needs_model && rc == 0) rc = add_error(responses, 503, err, errlen);
    if (json_object_get(op, "requestBody") && rc == 0) rc = add_error(responses, 501, err, errlen);
    for (size_t i = 0; rc == 0 && i < json_array_size(statuses); i++)
        rc =
            add_error(responses, (int)json_integer_value(json_array_get(statuses, i)), err, errlen);
    /* a public route answering 401 asks for an admin key, which no API key replaces */
    for (size_t i = 0; rc == 0 && rt->is_public && i < json_array_size(statuses); i++)
        if (json_integer_value(json_array_get(statuses, i)) == 401)
            rc = json_object_set_new(op, "x-admin-key", json_true());
    json_object_del(op, "x-errors");
    if (rc < 0) {
        json_decref(op);
        return NULL;
    }
    return op;
}

/* doc's paths from the route table; every route's part used once, every part by a route. */
static int add_paths(json_t *doc, const json_t *parts, const kd_route_doc *routes, size_t n,
                     char *err, size_t errlen) {
    json_t *paths = json_object_get(doc, "paths");
    for (size_t i = 0; i < n; i++) {
        const kd_route_doc rt = routes[i];
        const json_t *part = json_object_get(parts, rt.operation);
        if (!json_is_object(part)) {
            snprintf(err, errlen, "openapi_parts.json: no operation \"%s\" for %s %s", rt.operation,
                     rt.method, rt.path);
            return -1;
        }
        char path[128], method[16];
        openapi_path(rt.path, path, sizeof path);
        size_t k = 0;
        for (; rt.method[k] && k + 1 < sizeof method; k++)
            method[k] = (char)(rt.method[k] - 'A' + 'a');
        method[k] = '\0';
        json_t *item = json_object_get(paths, path);
        if (!item) json_object_set_new(paths, path, item = json_object());
        if (json_object_get(item, method)) {
            snprintf(err, errlen, "openapi: %s %s twice in the route table", rt.method, path);
            return -1;
        }
        json_t *op = operation(&rt, part, strcmp(path, rt.path) != 0, err, errlen);
        if (!op || json_object_set_new(item, method, op) < 0) return -1;
    }
    /* a part no route names is a route that went away */
    const char *name;
    const json_t *part;
    json_object_foreach((json_t *)parts, name, part) {
        bool used = false;
        for (size_t i = 0; !used && i < n; i++)
            used = strcmp(routes[i].operation, name) == 0;
        if (!used) {
            snprintf(err, errlen, "openapi_parts.json: operation \"%s\" has no route", name);
            return -1;
        }
    }
    return 0;
}

json_t *kd_openapi_document(const kd_openapi_figures *f, const kd_route_doc *routes, size_t n,
                            char *err, size_t errlen) {
    json_error_t je;
    json_t *parts = json_loads(kd_openapi_parts, 0, &je);
    if (!parts) {
        snprintf(err, errlen, "openapi_parts.json: line %d: %s", je.line, je.text);
        return NULL;
    }
    json_t *info = json_deep_copy(json_object_get(parts, "info"));
    json_t *components = json_deep_copy(json_object_get(parts, "components"));
    json_t *servers = json_deep_copy(json_object_get(parts, "servers"));
    json_t *doc = json_pack("{s:s,s:o*,s:o*,s:o,s:o*,s:[{s:[]}]}", "openapi", "3.1.0", "info", info,
                            "servers", servers, "paths", json_object(), "components", components,
                            "security", "apiKey");
    if (!doc || !info || !servers || !components) {
        snprintf(err, errlen,
                 "openapi: out of memory (or parts without info, servers, components)");
        json_decref(doc);
        json_decref(parts);
        return NULL;
    }
    json_object_set_new(info, "version", json_string(KR_VERSION));
    json_object_set_new(json_object_get(components, "schemas"), "Error", error_schema());
    json_t *schemes = json_pack(
        "{s:{s:s,s:s,s:s}}", "apiKey", "type", "http", "scheme", "bearer", "description",
        "Authorization: Bearer KEY, a key of api-key-file; asked only when the server has one");
    json_object_set_new(components, "securitySchemes", schemes);
    json_object_set_new(components, "responses", error_responses());
    int rc = add_paths(doc, json_object_get(parts, "operations"), routes, n, err, errlen);
    if (rc == 0) rc = put_figures(doc, f, err, errlen);
    json_decref(parts);
    if (rc < 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}
