/* reload.c — SIGHUP: log reopening, config re-reading, the key files read again, the
 * configured model set synced (models.h's kd_models_sync). */
#include "reload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Keys whose new value the running daemon picks up; the rest need a restart. */
static const char *const live_keys[] = {
    "api-key-file", "admin-key-file",   "max-body-bytes",  "max-candles",      "max-horizon",
    "max-samples",  "read-timeout",     "request-timeout", "shutdown-timeout", "access-log",
    "log-file",     "max-request-cost", "upload-budget",
};

static const char *const key_files[] = {
    [KD_API_KEYS] = "api-key-file", [KD_ADMIN_KEYS] = "admin-key-file"};

kd_keys *kd_read_keys(kd_app *app, kd_key_role role, const char *path, char *err, size_t errlen) {
    kd_keys *k = kd_keys_read(key_files[role], path, err, errlen);
    if (k && role == KD_API_KEYS)
        for (int i = 0; i < k->n; i++)
            k->keys[i].slot = kd_metrics_key_slot(app->metrics, k->keys[i].name);
    return k;
}

static _Atomic(kd_keys *) *keys_of(kd_app *app, kd_key_role role) {
    return role == KD_API_KEYS ? &app->api_keys : &app->admin_keys;
}

static const char *path_of(const kd_config *c, kd_key_role role) {
    return role == KD_API_KEYS ? c->api_key_file : c->admin_key_file;
}

int kd_reopen_log(const kd_app *app) {
    const char *path = app->cfg.log_file;
    if (!path) return 0;
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        kd_log("log-file %s: %s (still logging where the log went before)", path, strerror(errno));
        return -1;
    }
    const int rc = dup2(fd, STDERR_FILENO) < 0 ? -1 : 0;
    if (rc < 0) kd_log("log-file %s: dup2: %s", path, strerror(errno));
    close(fd);
    return rc;
}

static bool is_live(const char *key) {
    for (size_t i = 0; i < sizeof live_keys / sizeof live_keys[0]; i++)
        if (strcmp(live_keys[i], key) == 0) return true;
    return false;
}

typedef struct {
    kd_app *app;
    const kd_config *fresh;
    int applied, restart;
} reload_ctx;

/* The configured model set: kd_models_sync's, after the diff. */
static bool is_model_key(const char *key) {
    return strcmp(key, "model") == 0 || strcmp(key, "models-dir") == 0;
}

static void on_change(void *ctx, const char *key, const char *was, const char *now) {
    reload_ctx *x = ctx;
    if (is_model_key(key)) return;
    if (!is_live(key)) {
        kd_log("reload: %s: %s -> %s takes effect at the next restart", key, was, now);
        x->restart++;
        return;
    }
    if (strcmp(key, key_files[KD_API_KEYS]) == 0 || strcmp(key, key_files[KD_ADMIN_KEYS]) == 0)
        return; /* below, changed or not */
    if (kd_config_copy_key(&x->app->cfg, x->fresh, key) < 0) {
        kd_log("reload: %s: out of memory; keeping %s", key, was);
        return;
    }
    kd_log("reload: %s: %s -> %s", key, was, now);
    x->applied++;
}

static bool same_key(const kd_key *a, const kd_key *b) {
    return strcmp(a->name, b->name) == 0 && a->len == b->len &&
           memcmp(a->secret, b->secret, a->len) == 0;
}

static bool same_keys(const kd_keys *a, const kd_keys *b) {
    if (!a || !b) return a == b;
    if (a->n != b->n || a->bare != b->bare) return false;
    for (int i = 0; i < a->n; i++)
        if (!same_key(&a->keys[i], &b->keys[i])) return false;
    return true;
}

/* Appends to out the names of `from` that `to` lacks (lacks == true) or holds with another
 * key (lacks == false), after label. */
static void names(const kd_keys *from, const kd_keys *to, bool lacks, const char *label, char *out,
                  size_t n) {
    size_t len = strlen(out);
    bool first = true;
    for (int i = 0; from && i < from->n && len + 1 < n; i++) {
        const kd_key *other = to ? kd_keys_find(to, from->keys[i].name) : NULL;
        if (lacks ? other != NULL : !other || same_key(other, &from->keys[i])) continue;
        snprintf(out + len, n - len, "%s%s%s", first ? (len ? "; " : "") : ", ", first ? label : "",
                 from->keys[i].name);
        len += strlen(out + len);
        first = false;
    }
}

/* Reads a key file again (the file may be the same with other keys in it); a file that
 * no longer reads keeps the keys in use. */
static void reload_keys(kd_app *app, const kd_config *fresh, kd_key_role role, reload_ctx *x) {
    const char *what = key_files[role], *path = path_of(fresh, role);
    char err[512];
    kd_keys *keys = NULL;
    if (path && !(keys = kd_read_keys(app, role, path, err, sizeof err))) {
        kd_log("reload: %s; keeping the current keys", err);
        return;
    }
    _Atomic(kd_keys *) *in_use = keys_of(app, role);
    kd_keys *old = atomic_load(in_use);
    if (same_keys(old, keys)) {
        kd_keys_free(keys);
        return;
    }
    kd_keys **grown = realloc(app->retired_keys, (size_t)(app->n_retired_keys + 1) * sizeof *grown);
    if (!grown) {
        kd_log("reload: %s: out of memory; keeping the current keys", what);
        kd_keys_free(keys);
        return;
    }
    app->retired_keys = grown;
    if (old) app->retired_keys[app->n_retired_keys++] = old; /* a request may be reading it */
    atomic_store(in_use, keys);
    kd_config_copy_key(&app->cfg, fresh, what);
    char change[1024] = "";
    names(keys, old, true, "added ", change, sizeof change);
    names(old, keys, true, "removed ", change, sizeof change);
    names(keys, old, false, "new key for ", change, sizeof change);
    if (!keys)
        kd_log("reload: %s: off (no key asked any more)", what);
    else
        kd_log("reload: %s: %d key%s (%s)", what, keys->n, keys->n == 1 ? "" : "s",
               !old        ? "asked from now on"
               : change[0] ? change
                           : "the same names and keys, reordered or reformatted");
    x->applied++;
}

void kd_reload(kd_app *app, int argc, char **argv) {
    kd_config fresh;
    char err[1024];
    kd_reopen_log(app); /* first, so that what follows lands in the new file */
    const int rc = kd_config_load(&fresh, argc, argv, err, sizeof err);
    if (rc != 0) {
        kd_log("reload: %s; nothing changed", rc < 0 ? err : "--help given");
        kd_config_free(&fresh);
        return;
    }
    reload_ctx x = {app, &fresh, 0, 0};
    const bool new_log = (app->cfg.log_file == NULL) != (fresh.log_file == NULL) ||
                         (fresh.log_file && strcmp(app->cfg.log_file, fresh.log_file) != 0);
    kd_config_diff(&app->cfg, &fresh, on_change, &x);
    const int models = kd_models_sync(&app->models, &fresh);
    if (models > 0) x.applied += models;
    if (models >= 0 && (kd_config_copy_key(&app->cfg, &fresh, "model") < 0 ||
                        kd_config_copy_key(&app->cfg, &fresh, "models-dir") < 0))
        kd_log("reload: model: out of memory (the next reload compares with the old set)");
    reload_keys(app, &fresh, KD_API_KEYS, &x);
    reload_keys(app, &fresh, KD_ADMIN_KEYS, &x);
    if (new_log) kd_reopen_log(app);
    kd_log("reload: %d change%s applied, %d waiting for a restart (config %s)", x.applied,
           x.applied == 1 ? "" : "s", x.restart,
           app->cfg.config_file ? app->cfg.config_file : "none");
    kd_config_free(&fresh);
}
