/* sessions.h — the session table: one KV cache per session, in the shared pool.
 *
 * A session id is the node's name (node-id), a '-' and 128 bits from getrandom() written as
 * 32 hex digits: `kronos-1-3f2a...`. The prefix lets a proxy route /sessions/{id}/... to
 * the node that holds the session by the path alone (config/nginx/kronosd.conf). A session is used
 * by one request at a time: acquiring marks it busy until released, and a second acquire
 * meanwhile is refused (409). Idle sessions expire after the TTL; when the pool runs dry,
 * the least recently used idle session is evicted. A request on a session that expired,
 * was evicted or deleted is told which (404). Thread-safe.
 */
#ifndef KD_SESSIONS_H
#define KD_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "kronos.h"

#define KD_SESSION_RANDOM_LEN 32 /* hex digits after the node's name */
#define KD_SESSION_ID_LEN     (KD_NODE_ID_MAX + 1 + KD_SESSION_RANDOM_LEN) /* at most */

typedef struct kd_sessions kd_sessions;
typedef struct kd_session kd_session;

typedef enum {
    KD_SESSION_OK,
    KD_SESSION_NOT_FOUND,   /* unknown, expired, evicted or deleted: 404 */
    KD_SESSION_BUSY,        /* in use by another request: 409 */
    KD_SESSION_FULL,        /* max_sessions held, none idle past min-idle to evict: 429 */
    KD_SESSION_OWNER_LIMIT, /* the creator holds max-sessions-per-key already: 429 */
    KD_SESSION_ERROR,       /* out of memory, no randomness: 500 */
} kd_session_status;

/* A session of another kind holds state that its own module owns (a candle series,
 * candle_sessions.c) instead of a token cache. describe is called when the session is idle
 * (at creation and each release), so that info never reads state a request is changing. */
typedef struct {
    int length;
    size_t bytes;
    int64_t last_timestamp;       /* wall-clock seconds */
    char last_timestamp_text[48]; /* as the client wrote such timestamps, "" for Unix seconds */
    float mean[KR_D_IN], std[KR_D_IN];
} kd_session_extra;

typedef struct {
    const char *name; /* "candles" */
    void (*free)(void *state);
    void (*describe)(const void *state, kd_session_extra *out);
} kd_session_kind;

#define KD_OWNER_MAX 64 /* bytes of an owner's name */

typedef struct {
    int max_sessions;
    int ttl_seconds;
    int min_idle_seconds; /* a session used more recently is never evicted for a new one */
    int max_per_owner;    /* sessions one owner may hold (<= 0: max_sessions) */
    const char *node_id;  /* this node's name (config.h's rules), the prefix of every id */
} kd_sessions_limits;

kd_sessions *kd_sessions_create(kr_pool *pool, const kd_sessions_limits *lim);
/* Frees every session; none may be busy. */
void kd_sessions_free(kd_sessions *t);

/* A new idle session of `owner` (an API key's digest or a client address); its id in
 * id[KD_SESSION_ID_LEN + 1]. At max_sessions the least recently used session makes room if
 * it has been idle for min-idle; otherwise, or when the owner holds its limit already, the
 * creator is refused (msg says why, *retry_after when to try again). */
kd_session_status kd_sessions_new(kd_sessions *t, const char *owner, char *id, char *msg,
                                  size_t msglen, int *retry_after);

/* kd_sessions_new for a session of `kind` holding `state`, which it then owns (freed with
 * kind->free when the session goes, or at once on failure). */
kd_session_status kd_sessions_new_with(kd_sessions *t, const kd_session_kind *kind, void *state,
                                       const char *owner, char *id, char *msg, size_t msglen,
                                       int *retry_after);
/* NULL for a token session. */
const kd_session_kind *kd_session_kind_of(const kd_session *s);
void *kd_session_state(kd_session *s);

/* Marks a session busy for the caller, who then has its cache to itself. */
kd_session_status kd_sessions_acquire(kd_sessions *t, const char *id, kd_session **out, char *msg,
                                      size_t msglen);
kr_cache *kd_session_cache(kd_session *s); /* NULL for a session of another kind */
/* Back to idle, its last use now. */
void kd_sessions_release(kd_sessions *t, kd_session *s);

typedef struct {
    int length, capacity;
    size_t bytes;
    double idle_seconds; /* 0 while busy */
    double age_seconds;
    bool busy;
    const kd_session_kind *kind; /* NULL: a token session */
    kd_session_extra extra;      /* a session of another kind: as of its last release */
} kd_session_info;

kd_session_status kd_sessions_info(kd_sessions *t, const char *id, kd_session_info *info, char *msg,
                                   size_t msglen);
kd_session_status kd_sessions_delete(kd_sessions *t, const char *id, char *msg, size_t msglen);

/* Removes idle sessions past the TTL; returns how many. */
int kd_sessions_expire(kd_sessions *t);
/* Evicts the least recently used idle session; false when none is idle. */
bool kd_sessions_evict_lru(kd_sessions *t);

typedef struct {
    int count, busy;
    unsigned long long created, expired, evicted, deleted;
} kd_sessions_stats;

void kd_sessions_stats_get(kd_sessions *t, kd_sessions_stats *st);

#endif
