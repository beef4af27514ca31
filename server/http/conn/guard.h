/* guard.h — deadlines that slow senders cannot extend, enforced from a timer thread.
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte resets it, so a client
 * trickling one header byte every few seconds holds a connection forever. The guard gives
 * each connection an absolute deadline instead: one second after the connection opens for
 * its first request line (clients send it at once; a line that never ends, such as a TLS
 * handshake on the plain port, is cut there), connection-timeout seconds after a request
 * completes for the next one (its request line included), and read-timeout seconds
 * after a request line for the rest of that request's headers and body. Once a request is
 * wholly received there is no deadline: answering it may take as long as the model needs.
 *
 * Idle keep-alive connections give way: once more than nine tenths of max-connections
 * are open, each new connection closes the one kept alive longest without a request
 * (closing an idle keep-alive connection is always allowed, RFC 9112 §9.6), so a client
 * holding many idle connections cannot fill the table and keep new clients out.
 *
 * A connection past its deadline is shut down (shutdown(2), which libmicrohttpd sees as
 * the client leaving and cleans up on its own thread) within 0.2 s of the deadline.
 * Thread-safe; the timeouts may change while running (SIGHUP).
 */
#ifndef KD_GUARD_H
#define KD_GUARD_H

#include <stddef.h>

typedef struct kd_guard kd_guard;
typedef struct kd_guarded kd_guarded; /* one connection */

/* NULL with a message in err when out of memory or the thread cannot start.
 * max_connections: the table's size. */
kd_guard *kd_guard_start(int read_timeout, int connection_timeout, int max_connections, char *err,
                         size_t errlen);
void kd_guard_set_timeouts(kd_guard *g, int read_timeout, int connection_timeout);
/* Stops the thread and frees g; every connection must be closed. */
void kd_guard_stop(kd_guard *g);

/* A connection opened on socket fd; NULL when out of memory (then it is not guarded). */
kd_guarded *kd_guard_open(kd_guard *g, int fd);
/* Called before libmicrohttpd closes the socket; c may be NULL. */
void kd_guard_close(kd_guard *g, kd_guarded *c);
/* What happened on a connection; each moves its deadlines. */
typedef enum {
    /* The request line is in: the rest of the request has read-timeout seconds at most. */
    KD_GUARD_REQUEST_LINE,
    /* A chunked body began: until it is received, a pause of BODY_STALL seconds between two
     * pieces of it closes the connection. A chunked body has no length to judge it by (a
     * chunk size of ffffffffffffffff is legal syntax); clients and proxies send bodies
     * without pausing, so a pause means a client that will not finish. */
    KD_GUARD_CHUNKED,
    /* A piece of the body arrived. */
    KD_GUARD_PROGRESS,
    /* The request is wholly received: no deadline while it is answered. */
    KD_GUARD_RECEIVED,
    /* The request completed and the connection stays open for the next one. */
    KD_GUARD_COMPLETED,
} kd_guard_event;

/* Event ev on connection c; c may be NULL (not guarded). */
void kd_guard_on(kd_guard *g, kd_guarded *c, kd_guard_event ev);

/* Idle keep-alive connections closed so far to make room for new ones. */
unsigned long long kd_guard_evicted(kd_guard *g);
/* Connections shut down so far, past their deadline. */
unsigned long long kd_guard_timed_out(kd_guard *g);

#endif
