/* framing.h — a request's framing headers: whether two parties (this server and a proxy
 * before it) could read where its body ends differently. */
#ifndef KD_FRAMING_H
#define KD_FRAMING_H

#include <microhttpd.h>
#include <stddef.h>

/* 0 when the headers frame the body one way only; else the status to refuse with (400 for
 * repeated or malformed Content-Length, Content-Length with Transfer-Encoding, a field name
 * that is not a token or an obs-fold; 501 for a coding other than chunked), *code the
 * error's code and msg what is wrong (cut to n). */
int kd_framing_check(struct MHD_Connection *conn, const char **code, char *msg, size_t n);

#endif
