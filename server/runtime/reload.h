/* reload.h — what SIGHUP does: reopen the log file, re-read the config and apply what can
 * change while running.
 *
 * Applied at once: api-key-file and admin-key-file (the key files are read again, so that
 * keys can be added, removed and rotated without a restart), max-body-bytes, max-candles,
 * max-horizon, max-samples, max-request-cost, read-timeout, request-timeout, shutdown-timeout,
 * access-log, log-file. Every change is logged as `reload: KEY: OLD -> NEW`; a changed key outside
 * that list is logged as needing a restart. A config file that no longer parses is logged and
 * ignored.
 */
#ifndef KD_RELOAD_H
#define KD_RELOAD_H

#include <stddef.h>

#include "app.h"

/* Re-reads cfg (argv as at start, with --config) and applies it; never fails the process. */
void kd_reload(kd_app *app, int argc, char **argv);

/* Points stderr at cfg.log_file (append, created 0640), reopening it; nothing to do
 * without one. -1 after printing why on the old stderr. */
int kd_reopen_log(const kd_app *app);

typedef enum { KD_API_KEYS, KD_ADMIN_KEYS } kd_key_role;

/* The key file of role (api-key-file, admin-key-file: keys.h's rules) at path; an API
 * key's name gets its slot in app's metrics. NULL after a message in err. */
kd_keys *kd_read_keys(kd_app *app, kd_key_role role, const char *path, char *err, size_t errlen);

#endif
