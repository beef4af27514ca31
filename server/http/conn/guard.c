/* guard.c — per-connection absolute deadlines, enforced on a timer thread. */
#include "guard.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "fail.h"
#include "log.h"
#include "thread.h"

#define TICK_NS    200000000L /* 0.2 s: how late a deadline may be enforced */
#define LOG_EVERY  5.0        /* seconds between summary lines while shutting down */
#define BODY_STALL 1.0        /* seconds a chunked body may pause (guard.h) */
#define FIRST_LINE 1.0        /* seconds from accept to the first request line (guard.h) */

struct kd_guarded {
    kd_guarded *prev, *next;
    int fd;
    double deadline;   /* 0: none */
    double stall_from; /* a chunked body's last progress; 0: not in one */
    double idle_since; /* kept alive between requests since then; 0: not idle */
    bool first;        /* no request line yet */
    bool shut;
};

struct kd_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool stop;
    kd_guarded head; /* a circular list through head */
    double read_timeout, connection_timeout;
    int open, evict_at; /* connections open; above how many idle ones are closed */
    int shut_open;      /* of them, shut down and not yet closed */
    unsigned long long timed_out, logged_timed_out, evicted, logged_evicted;
    double last_log;
};

static void shut(kd_guarded *c) {
    shutdown(c->fd, SHUT_RDWR);
    c->shut = true;
}

static void make_room(kd_guard *g);

static void tick(kd_guard *g) {
    const double now = kd_now_s();
    for (kd_guarded *c = g->head.next; c != &g->head; c = c->next) {
        if (c->shut) continue;
        if ((c->deadline > 0 && now >= c->deadline) ||
            (c->stall_from > 0 && now - c->stall_from >= BODY_STALL)) {
            shut(c);
            g->shut_open++;
            g->timed_out++;
        }
    }
    make_room(g);
    /* one summary line now and then, not one per connection: an attack must not flood
     * the log */
    if (g->timed_out != g->logged_timed_out && now - g->last_log >= LOG_EVERY) {
        kd_log("closed %llu connection%s past their deadline (read-timeout, "
               "connection-timeout)",
               g->timed_out - g->logged_timed_out,
               g->timed_out - g->logged_timed_out == 1 ? "" : "s");
        g->logged_timed_out = g->timed_out;
        g->last_log = now;
    }
    if (g->evicted != g->logged_evicted && now - g->last_log >= LOG_EVERY) {
        kd_log("closed %llu idle keep-alive connection%s to make room for new ones "
               "(max-connections nearly reached)",
               g->evicted - g->logged_evicted, g->evicted - g->logged_evicted == 1 ? "" : "s");
        g->logged_evicted = g->evicted;
        g->last_log = now;
    }
}

static void *run(void *arg) {
    kd_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        kd_thread_wait(&g->wake, &g->lock, TICK_NS);
        if (!g->stop) tick(g);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

kd_guard *kd_guard_start(int read_timeout, int connection_timeout, int max_connections, char *err,
                         size_t errlen) {
    kd_guard *g = calloc(1, sizeof *g);
    if (!g) {
        kd_fail(err, errlen, "connection guard: out of memory");
        return NULL;
    }
    /* a tenth of the table (at least one place) is kept for newcomers */
    const int reserve = max_connections / 10 > 0 ? max_connections / 10 : 1;
    g->evict_at = max_connections - reserve > 0 ? max_connections - reserve : 1;
    g->head.next = g->head.prev = &g->head;
    g->read_timeout = read_timeout;
    g->connection_timeout = connection_timeout;
    pthread_mutex_init(&g->lock, NULL);
    kd_thread_cond_init(&g->wake);
    if (kd_thread_start(&g->thread, run, g, "connection guard", err, errlen) < 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void kd_guard_set_timeouts(kd_guard *g, int read_timeout, int connection_timeout) {
    pthread_mutex_lock(&g->lock);
    g->read_timeout = read_timeout;
    g->connection_timeout = connection_timeout;
    pthread_mutex_unlock(&g->lock);
}

void kd_guard_stop(kd_guard *g) {
    if (!g) return;
    kd_thread_ask_stop(&g->lock, &g->wake, &g->stop);
    pthread_join(g->thread, NULL);
    while (g->head.next != &g->head) /* none should be left; free them anyway */
        kd_guard_close(g, g->head.next);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* The connection kept alive longest without a request, or NULL. */
static kd_guarded *longest_idle(kd_guard *g) {
    kd_guarded *oldest = NULL;
    for (kd_guarded *c = g->head.next; c != &g->head; c = c->next)
        if (!c->shut && c->idle_since > 0 && (!oldest || c->idle_since < oldest->idle_since))
            oldest = c;
    return oldest;
}

/* While more than evict_at connections are open and not shut, the idle keep-alive ones
 * give way, longest idle first: the table keeps room for newcomers, which it could not
 * make once full (a full table accepts nothing, and so never hears of them). */
static void make_room(kd_guard *g) {
    int live = g->open - g->shut_open;
    while (live > g->evict_at) {
        kd_guarded *idle = longest_idle(g);
        if (!idle) break;
        shut(idle);
        g->shut_open++;
        g->evicted++;
        live--;
    }
}

kd_guarded *kd_guard_open(kd_guard *g, int fd) {
    kd_guarded *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->first = true;
    pthread_mutex_lock(&g->lock);
    g->open++;
    make_room(g);
    c->deadline = kd_now_s() + (g->read_timeout < FIRST_LINE ? g->read_timeout : FIRST_LINE);
    c->next = &g->head;
    c->prev = g->head.prev;
    c->prev->next = c;
    g->head.prev = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void kd_guard_close(kd_guard *g, kd_guarded *c) {
    if (!c) return;
    pthread_mutex_lock(&g->lock); /* after this, the timer cannot touch the socket */
    g->open--;
    g->shut_open -= c->shut;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

void kd_guard_on(kd_guard *g, kd_guarded *c, kd_guard_event ev) {
    if (!c) return;
    pthread_mutex_lock(&g->lock);
    const double now = kd_now_s();
    switch (ev) {
    case KD_GUARD_REQUEST_LINE: {
        const double d = now + g->read_timeout;
        if (c->first || c->deadline == 0 || d < c->deadline) c->deadline = d;
        c->first = false;
        c->idle_since = 0;
        break;
    }
    case KD_GUARD_CHUNKED:
        c->stall_from = now;
        break;
    case KD_GUARD_PROGRESS:
        if (c->stall_from > 0) c->stall_from = now;
        break;
    case KD_GUARD_RECEIVED:
        c->deadline = 0;
        c->stall_from = 0;
        break;
    case KD_GUARD_COMPLETED:
        c->idle_since = now;
        c->deadline = now + g->connection_timeout;
        make_room(g);
        break;
    }
    pthread_mutex_unlock(&g->lock);
}

unsigned long long kd_guard_evicted(kd_guard *g) {
    pthread_mutex_lock(&g->lock);
    const unsigned long long n = g->evicted;
    pthread_mutex_unlock(&g->lock);
    return n;
}

unsigned long long kd_guard_timed_out(kd_guard *g) {
    pthread_mutex_lock(&g->lock);
    const unsigned long long n = g->timed_out;
    pthread_mutex_unlock(&g->lock);
    return n;
}
