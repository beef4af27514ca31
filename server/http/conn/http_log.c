/* http_log.c — the HTTP layer's log lines (http_log.h): a path made fit for one line, and
 * libmicrohttpd's own messages, rate-limited. */
#include "http_log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* The path as one log line can show it: MHD has decoded %0A and friends. */
void kd_http_loggable(const char *s, char *out, size_t n) {
    size_t j = 0;
    for (; *s && j + 1 < n; s++)
        out[j++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    out[j] = '\0';
}

/* libmicrohttpd's own messages, at most MHD_LOG_BURST a second: a flood of bad clients
 * must not become a flood of log lines. */
#define MHD_LOG_BURST 10
void kd_http_mhd_log(void *cls, const char *fmt, va_list ap) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static time_t second;
    static unsigned in_second, dropped;
    char msg[512];
    (void)cls;
    const time_t now = time(NULL);
    pthread_mutex_lock(&lock);
    const unsigned was_dropped = now != second ? dropped : 0;
    if (now != second) second = now, in_second = 0, dropped = 0;
    const bool quiet = ++in_second > MHD_LOG_BURST;
    dropped += quiet;
    pthread_mutex_unlock(&lock);
    if (was_dropped) kd_log("http: %u more messages like these were not logged", was_dropped);
    if (quiet) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    kd_log("http: %s", msg);
}
