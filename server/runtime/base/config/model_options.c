/* model_options.c — model-option lines parsed and applied (model_options.h). */
#include "model_options.h"
#include "fail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the daemon-wide key's range (config.c); the loader refuses what it cannot hold */
#define MAX_CONTEXT_MAX (1 << 20)
#define ID_CHARS        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
#define ID_MAX          64

typedef struct {
    char id[ID_MAX + 1];
    char key[16];
    const char *value;
} option;

/* "ID:KEY=VALUE" split (value points into line); -1 with err. */
static int split(const char *line, option *o, char *err, size_t errlen) {
    const char *colon = strchr(line, ':');
    const char *eq = colon ? strchr(colon, '=') : NULL;
    const size_t id_len = colon ? (size_t)(colon - line) : 0;
    const size_t key_len = eq ? (size_t)(eq - colon - 1) : 0;
    if (!colon || !eq || id_len == 0 || id_len > ID_MAX || strspn(line, ID_CHARS) != id_len ||
        key_len == 0 || key_len >= sizeof o->key)
        return kd_fail(err, errlen,
                       "model-option '%.200s': expected ID:KEY=VALUE (e.g. small:max-context=2048)",
                       line);
    snprintf(o->id, sizeof o->id, "%.*s", (int)id_len, line);
    snprintf(o->key, sizeof o->key, "%.*s", (int)key_len, colon + 1);
    o->value = eq + 1;
    return 0;
}

/* One option applied to s; -1 with err naming the line. */
static int apply(const char *line, const option *o, kd_model_settings *s, char *err,
                 size_t errlen) {
    kr_error ke = {0};
    if (strcmp(o->key, "max-context") == 0) {
        char *end;
        errno = 0;
        const long v = strtol(o->value, &end, 10);
        if (errno || end == o->value || *end || v < 1 || v > MAX_CONTEXT_MAX)
            return kd_fail(err, errlen,
                           "model-option '%.200s': max-context must be an integer in 1..%d", line,
                           MAX_CONTEXT_MAX);
        s->max_context = (int)v;
        return 0;
    }
    if (strcmp(o->key, "weights") == 0) {
        if (kr_precision_parse(o->value, "weights", &s->weights, &ke) != 0)
            return kd_fail(err, errlen, "model-option '%.200s': %s", line, ke.msg);
        return 0;
    }
    if (strcmp(o->key, "kv") == 0) {
        if (kr_kv_precision_parse(o->value, "kv", &s->kv, &ke) != 0)
            return kd_fail(err, errlen, "model-option '%.200s': %s", line, ke.msg);
        return 0;
    }
    return kd_fail(err, errlen, "model-option '%.200s': unknown key '%s' (expected %s)", line,
                   o->key, KD_MODEL_OPTION_KEYS);
}

/* The line at *p (lines are separated by '\n') as a malloc'd string, NULL when out of
 * memory; *p moves past it. */
static char *take_line(const char **p) {
    const size_t len = strcspn(*p, "\n");
    char *line = strndup(*p, len);
    *p += len + ((*p)[len] == '\n');
    return line;
}

/* Every line checked; those of model id (NULL: every line) applied to s (NULL: a scratch). */
static int run(const char *lines, const char *id, kd_model_settings *s, char *err, size_t errlen) {
    kd_model_settings scratch;
    for (const char *p = lines; p && *p;) {
        char *line = take_line(&p);
        option o;
        int rc = line ? split(line, &o, err, errlen)
                      : kd_fail(err, errlen, "model-option: out of memory");
        if (rc == 0 && (!id || strcmp(id, o.id) == 0))
            rc = apply(line, &o, s ? s : &scratch, err, errlen);
        free(line);
        if (rc < 0) return -1;
    }
    return 0;
}

int kd_model_options_check(const char *lines, char *err, size_t errlen) {
    return run(lines, NULL, NULL, err, errlen);
}

int kd_model_settings_of(const char *lines, const char *id, const kd_model_overrides *o,
                         kd_model_settings *s, char *err, size_t errlen) {
    if (run(lines, id, s, err, errlen) < 0) return -1;
    if (o && o->has_max_context) s->max_context = o->v.max_context;
    if (o && o->has_weights) s->weights = o->v.weights;
    if (o && o->has_kv) s->kv = o->v.kv;
    return 0;
}

bool kd_model_options_unknown(const char *lines, bool (*known)(const void *ctx, const char *id),
                              const void *ctx, char *line, size_t n) {
    for (const char *p = lines; p && *p;) {
        char *own = take_line(&p), err[8];
        option o;
        if (!own) return false;
        const bool unknown = split(own, &o, err, sizeof err) == 0 && !known(ctx, o.id);
        if (unknown) snprintf(line, n, "%s", own);
        free(own);
        if (unknown) return true;
    }
    return false;
}
