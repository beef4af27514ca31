/* reload.c — SIGHUP: log reopening, config re-reading, API key rotation. */
#include "reload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define KEY_MAX 4096

/* Keys whose new value the running daemon picks up; the rest need a restart. */
static const char *const live_keys[] = {
    "api-key-file", "max-body-bytes", "max-candles",      "max-horizon",
    "max-samples",  "read-timeout",   "request-timeout",  "shutdown-timeout",
    "access-log",   "log-file",       "max-request-cost", "upload-budget",
};

char *kd_read_api_key(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "api-key-file %s: %s", path, strerror(errno));
        return NULL;
    }
    char line[KEY_MAX];
    const bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *s = line, *e;
    while (got && (*s == ' ' || *s == '\t'))
        s++;
    e = got ? s + strlen(s) : s;
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    if (!got || *s == '\0') {
        snprintf(err, errlen, "api-key-file %s: empty; the key is its first line", path);
        return NULL;
    }
    char *key = strdup(s);
    if (!key) snprintf(err, errlen, "api-key-file %s: out of memory", path);
    return key;
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

static void on_change(void *ctx, const char *key, const char *was, const char *now) {
    reload_ctx *x = ctx;
    if (!is_live(key)) {
        kd_log("reload: %s: %s -> %s takes effect at the next restart", key, was, now);
        x->restart++;
        return;
    }
    if (strcmp(key, "api-key-file") == 0) return; /* below, changed or not */
    if (kd_config_copy_key(&x->app->cfg, x->fresh, key) < 0) {
        kd_log("reload: %s: out of memory; keeping %s", key, was);
        return;
    }
    kd_log("reload: %s: %s -> %s", key, was, now);
    x->applied++;
}

/* Reads the key file again (the file may be the same with a new key in it). */
static void reload_api_key(kd_app *app, const kd_config *fresh, reload_ctx *x) {
    char err[512];
    char *key = NULL;
    if (fresh->api_key_file && !(key = kd_read_api_key(fresh->api_key_file, err, sizeof err))) {
        kd_log("reload: %s; keeping the current key", err);
        return;
    }
    char *old = atomic_load(&app->api_key);
    if ((!old && !key) || (old && key && strcmp(old, key) == 0)) {
        free(key);
        return;
    }
    char **grown = realloc(app->retired_keys, (size_t)(app->n_retired_keys + 1) * sizeof *grown);
    if (!grown) {
        kd_log("reload: out of memory; keeping the current key");
        free(key);
        return;
    }
    app->retired_keys = grown;
    if (old) app->retired_keys[app->n_retired_keys++] = old;
    atomic_store(&app->api_key, key);
    kd_config_copy_key(&app->cfg, fresh, "api-key-file");
    kd_log("reload: api key %s", !key ? "off" : !old ? "required" : "replaced");
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
    reload_api_key(app, &fresh, &x);
    if (new_log) kd_reopen_log(app);
    kd_log("reload: %d change%s applied, %d waiting for a restart (config %s)", x.applied,
           x.applied == 1 ? "" : "s", x.restart,
           app->cfg.config_file ? app->cfg.config_file : "none");
    kd_config_free(&fresh);
}
