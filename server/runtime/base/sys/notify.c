/* notify.c — sd_notify by hand: one datagram to $NOTIFY_SOCKET. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int kd_notify(const char *state) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path) return 0;

    struct sockaddr_un sa;
    const size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof sa.sun_path) {
        errno = EINVAL;
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') sa.sun_path[0] = '\0'; /* Linux abstract namespace */
    const socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);

    const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const ssize_t sent =
        sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen);
    const int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)strlen(state) ? 0 : -1;
}
