/* http_log.h — the HTTP layer's log lines (http_log.c). */
#ifndef KD_HTTP_LOG_H
#define KD_HTTP_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* s as one log line can show it (control characters as '?'), cut to n. */
void kd_http_loggable(const char *s, char *out, size_t n);
/* libmicrohttpd's external logger: its messages, at most a burst a second. */
void kd_http_mhd_log(void *cls, const char *fmt, va_list ap);

#endif
