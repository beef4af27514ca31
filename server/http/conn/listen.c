/* listen.c — the daemon's listening socket (listen.h). */
#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int kd_listen(const char *host, int port_number, bool *v6, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", port_number);
    const int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "cannot listen on %s port %d: %s", host, port_number,
                 gai_strerror(gai));
        return -1;
    }
    const char *what = "socket";
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
            what = "bind";
        else if (listen(fd, 1024) < 0)
            what = "listen";
        else
            what = NULL;
    }
    const bool ipv6 = strchr(host, ':') != NULL;
    if (what) {
        snprintf(err, errlen, "cannot listen on %s%s%s:%d: %s: %s%s", ipv6 ? "[" : "", host,
                 ipv6 ? "]" : "", port_number, what, strerror(errno),
                 errno == EADDRINUSE      ? " (another process has this port; see ss -ltnp)"
                 : errno == EADDRNOTAVAIL ? " (not an address of this host)"
                                          : "");
        if (fd >= 0) close(fd);
        fd = -1;
    }
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return fd;
}
