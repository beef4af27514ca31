/* reload.h — what SIGHUP does: reopen the log file, re-read the config and apply what can
 * change while running.
 *
 * Applied at once: api-key-file (the key file is read again, so that a key can be rotated
 * without a restart), max-body-bytes, max-candles, max-horizon, max-samples,
 * max-request-cost, read-timeout, request-timeout, shutdown-timeout, access-log, log-file. Every
 * change is logged as `reload: KEY: OLD -> NEW`; a changed key outside that list is logged as
 * needing a restart. A config file that no longer parses is logged and ignored.
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

/* The API key: the file's first line without surrounding whitespace. A malloc'd string, or
 * NULL after a message in err. */
char *kd_read_api_key(const char *path, char *err, size_t errlen);

#endif
