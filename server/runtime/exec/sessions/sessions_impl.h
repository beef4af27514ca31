/* sessions_impl.h — the session table's records, shared by sessions.c (the table, its LRU
 * list, limits and ring of removed ids) and sessions_models.c (each session's model).
 * Internal to runtime/exec/sessions. */
#ifndef KD_SESSIONS_IMPL_H
#define KD_SESSIONS_IMPL_H

#include <pthread.h>

#include "sessions.h"

#define GONE_MAX 1024 /* removed ids remembered for their 404 message */

struct kd_session {
    char id[KD_SESSION_ID_LEN + 1];
    kr_cache *cache;
    bool busy;
    double created, last_used;
    char owner[KD_OWNER_MAX + 1]; /* who created it: an API key's owner or an address */
    int length;              /* as of the last release: readable while a worker holds the cache */
    size_t bytes;            /* likewise */
    size_t heap;             /* of which outside the pool: counted in the table's heap_used */
    kd_session *chain;       /* next in the hash bucket */
    kd_session *prev, *next; /* the idle LRU list, oldest first */

    const void *model;           /* the model it is bound to (kd_session_bind); NULL: default */
    kr_pool *pool;               /* that model's pool, NULL: the table's (the default model's) */
    const kd_session_kind *kind; /* NULL: a token session (cache) */
    void *state;                 /* a session of another kind: its state */
    kd_session_extra extra;      /* its description as of the last release */
};

typedef enum {
    GONE_EXPIRED,
    GONE_EVICTED,
    GONE_EVICTED_SLOT,
    GONE_DELETED,
    GONE_REFUSED
} gone_reason;

struct kd_sessions {
    pthread_mutex_t mu;
    char prefix[KD_NODE_ID_MAX + 2]; /* "node-" */
    kr_pool *pool;
    int max, ttl, min_idle, max_per_owner;
    size_t heap_budget, max_bytes_owner;
    size_t heap_used, heap_reserved; /* sessions' bytes outside the pool; planned for work */
    int pool_percent;
    size_t pool_used; /* sessions' bytes in the pool (shared blocks counted by each) */
    unsigned long long refused_room, refused_bytes;
    int (*on_gone)(void *ctx, const char *id, char *msg, size_t msglen);
    void *gone_ctx;
    void (*model_unbound)(void *ctx, const void *model);
    void (*model_held)(void *ctx, const void *model);
    kd_session **buckets;
    size_t n_buckets; /* a power of two */
    kd_session *lru_head, *lru_tail;
    int count, busy;
    unsigned long long created, expired, evicted, deleted;
    struct {
        char id[KD_SESSION_ID_LEN + 1];
        char owner[KD_OWNER_MAX + 1]; /* what happened is told to it alone */
        gone_reason why;
    } gone[GONE_MAX];
    int gone_next;
};

#endif
