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
    KD_SESSION_BYTES_LIMIT, /* the creator's sessions would outgrow max-session-bytes-per-key: 429
                             */
    KD_SESSION_NO_ROOM,     /* the memory is held by sessions used within min-idle: 503 */
    KD_SESSION_NOT_KEPT,    /* its end could not be written to the journal: it goes on, 500 */
    KD_SESSION_ERROR,       /* out of memory, no randomness: 500 */
} kd_session_status;

/* A session of another kind holds state that its own module owns (a candle series,
 * candle_sessions.c) instead of a token cache. describe is called when the session is idle
 * (at creation and each release), so that info never reads state a request is changing. */
typedef struct {
    int length;
    size_t bytes;           /* all it holds, its pool bytes included */
    size_t heap_bytes;      /* of which outside the KV pool (candles, tokens, encoder caches) */
    int64_t last_timestamp; /* wall-clock seconds */
    char last_timestamp_text[48]; /* as the client wrote such timestamps, "" for Unix seconds */
    float mean[KR_D_IN], std[KR_D_IN];
    /* a candle session that calibrates itself: its running statistics */
    bool calibrated, calib_from_object;
    kr_calib_online_stats calib;
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
    int min_idle_seconds;       /* a session used more recently is never evicted for a new one */
    int max_per_owner;          /* sessions one owner may hold (<= 0: max_sessions) */
    size_t heap_budget;         /* sessions' bytes outside the pool, over all (0: no limit) */
    int pool_percent;           /* of the pool that sessions' caches may hold (<= 0: 100) */
    size_t max_bytes_per_owner; /* bytes (pool and outside) one owner's sessions hold (0: none) */
    const char *node_id;        /* this node's name (config.h's rules), the prefix of every id */
    /* called (the table's lock held) for every session that ends: deleted, expired or
     * evicted; -1 with msg when its end could not be written, which refuses a delete (the
     * session goes on); NULL: nothing to tell (the journal's hook) */
    int (*on_gone)(void *ctx, const char *id, char *msg, size_t msglen);
    void *gone_ctx;
    /* with gone_ctx, the table's lock held: a bound session's model is no longer its (the
     * session ended), and a model kd_sessions_info hands out (a reference the caller
     * drops); NULL: nothing to tell */
    void (*model_unbound)(void *ctx, const void *model);
    void (*model_held)(void *ctx, const void *model);
} kd_sessions_limits;

kd_sessions *kd_sessions_create(kr_pool *pool, const kd_sessions_limits *lim);
/* Frees every session; none may be busy. */
void kd_sessions_free(kd_sessions *t);

/* A new session of `owner` (an API key's owner or a client address); its id in
 * id[KD_SESSION_ID_LEN + 1]. At max_sessions the least recently used session makes room if
 * it has been idle for min-idle; otherwise, or when the owner holds its limit already, the
 * creator is refused (msg says why, *retry_after when to try again). With held, the
 * session starts busy for the caller (*held), who releases it (after journaling it, so that
 * nothing can end it before its creation is written); else it starts idle. */
kd_session_status kd_sessions_new(kd_sessions *t, const char *owner, char *id, kd_session **held,
                                  char *msg, size_t msglen, int *retry_after);

/* kd_sessions_new for a session of `kind` holding `state`, which it then owns (freed with
 * kind->free when the session goes, or at once on failure). */
kd_session_status kd_sessions_new_with(kd_sessions *t, const kd_session_kind *kind, void *state,
                                       const char *owner, char *id, kd_session **held, char *msg,
                                       size_t msglen, int *retry_after);

/* A session named id (one this node made, replayed from the journal) back in the table,
 * busy for the caller (*held): of `kind` with `state` (owned, as kd_sessions_new_with), or a
 * token session with an empty cache. Refused when the id is not this node's, is held
 * already, or the table is full. */
kd_session_status kd_sessions_restore(kd_sessions *t, const kd_session_kind *kind, void *state,
                                      const char *owner, const char *id, kd_session **held,
                                      char *msg, size_t msglen);
/* Whether id has the form of the ids the table makes (a node-id, '-', 32 hex digits), of
 * whichever node. */
bool kd_session_id_well_formed(const char *id);
/* The model a session is bound to (the server's, opaque here), NULL: the default one; and
 * the binding of a session the caller holds and just created, to model and its pool: a
 * token session's empty cache moves to that pool (-1 when out of memory). The table's pool
 * budgets are the default model's pool's. */
const void *kd_session_model(const kd_session *s);
int kd_session_bind(kd_session *s, const void *model, kr_pool *pool);
/* A journaled session that was not restored (its model is gone or changed): its id's 404
 * says so. */
void kd_sessions_refused(kd_sessions *t, const char *id, const char *owner);
/* NULL for a token session. */
const kd_session_kind *kd_session_kind_of(const kd_session *s);
void *kd_session_state(kd_session *s);

/* acquire, info and delete find the session `id` of `owner` (the requester's, http.h's
 * kd_request_session_owner; NULL: of any owner, as when the journal is replayed). Another
 * owner's session is KD_SESSION_NOT_FOUND with the message of an unknown id. */

/* Marks a session busy for the caller, who then has its cache to itself. */
kd_session_status kd_sessions_acquire(kd_sessions *t, const char *owner, const char *id,
                                      kd_session **out, char *msg, size_t msglen);
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
    const void *model;           /* kd_session_model's, held (model_held) for the caller */
} kd_session_info;

/* Ends a session the caller holds (its change could not be journaled: a restart would not
 * bring back what it holds now), as deleted. -1 when its end could not be written either (a
 * restart brings it back as the journal holds it). */
int kd_sessions_discard(kd_sessions *t, kd_session *s);
/* The id of a session. */
const char *kd_session_id(const kd_session *s);

kd_session_status kd_sessions_info(kd_sessions *t, const char *owner, const char *id,
                                   kd_session_info *info, char *msg, size_t msglen);
kd_session_status kd_sessions_delete(kd_sessions *t, const char *owner, const char *id, char *msg,
                                     size_t msglen);
/* Sessions owner holds. */
int kd_sessions_count_of(kd_sessions *t, const char *owner);

/* Room, planned before the work, for `heap` bytes outside the pool and `pool` bytes of KV
 * pool that owner's new session (or an append to one it holds) will take: the owner's own
 * sessions idle past min-idle are evicted first (least recently used first), then others'
 * idle past min-idle, never one used more recently. `creating`: a new session, so the
 * owner's count limit and the table's slots are checked (a slot freed) now too, before the
 * work rather than after it. The heap bytes stay reserved until
 * kd_sessions_unreserve. KD_SESSION_OK, or the refusal with msg and *retry_after. */
kd_session_status kd_sessions_make_room(kd_sessions *t, const char *owner, size_t heap, size_t pool,
                                        bool creating, char *msg, size_t msglen, int *retry_after);
void kd_sessions_unreserve(kd_sessions *t, size_t heap);

/* Removes idle sessions past the TTL; returns how many. */
int kd_sessions_expire(kd_sessions *t);
/* Evicts the least recently used session idle past min-idle (the pool ran dry under the
 * scheduler); false when there is none. */
bool kd_sessions_evict_lru(kd_sessions *t);
/* The same among the sessions whose caches are on pool (one model's): what frees memory
 * there, without ending other models' sessions for nothing. */
bool kd_sessions_evict_lru_in(kd_sessions *t, const kr_pool *pool);

typedef struct {
    int count, busy;
    unsigned long long created, expired, evicted, deleted;
    unsigned long long refused_room, refused_bytes; /* KD_SESSION_NO_ROOM, _BYTES_LIMIT */
    size_t heap_bytes, heap_budget;                 /* outside the pool: held, budget */
    size_t pool_bytes, pool_budget;                 /* in the pool: held, their share */
} kd_sessions_stats;

void kd_sessions_stats_get(kd_sessions *t, kd_sessions_stats *st);

#endif
