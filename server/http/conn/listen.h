/* listen.h — the daemon's listening socket: bound and listening before libmicrohttpd takes
 * it, so that a port that cannot be had is refused with its reason at start. */
#ifndef KD_LISTEN_H
#define KD_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

/* A socket listening on host:port (port 0: any free port); *v6 says whether it is IPv6. -1
 * with err naming the address, the step that failed and its likely cause. */
int kd_listen(const char *host, int port, bool *v6, char *err, size_t errlen);

#endif
