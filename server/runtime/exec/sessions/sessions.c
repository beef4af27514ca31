/* sessions.c — a hash table of sessions and an LRU list of the idle ones.
 *
 * Busy sessions are off the LRU list, so eviction and expiry only ever see idle sessions
 * and never free a cache a worker is using. The ids of recently removed sessions are kept
 * in a ring so that a 404 can say what happened to them. */
#include "sessions.h"

#include "clock.h"
#include "hash.h"
#include "log.h"
#include "sessions_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ids are random, so any mixing will do */
static size_t bucket_of(const kd_sessions *t, const char *id) {
    return (size_t)kd_hash(KD_HASH_SEED, id, strlen(id)) & (t->n_buckets - 1);
}

static bool all_hex(const char *s, size_t n) {
    return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* An id this node could have made. */
static bool valid_id(const kd_sessions *t, const char *id) {
    const size_t p = strlen(t->prefix);
    return strncmp(id, t->prefix, p) == 0 && all_hex(id + p, KD_SESSION_RANDOM_LEN);
}

bool kd_session_id_well_formed(const char *id) {
    const char *dash = strrchr(id, '-');
    if (!dash || dash == id || dash - id > KD_NODE_ID_MAX) return false;
    return all_hex(dash + 1, KD_SESSION_RANDOM_LEN) &&
           strspn(id, KD_NODE_ID_CHARS) >= (size_t)(dash - id);
}

/* The node named in an id of another node's form, or false. */
static bool other_node(const kd_sessions *t, const char *id, char *node, size_t n) {
    const char *dash = strrchr(id, '-');
    if (!dash || dash == id || !all_hex(dash + 1, KD_SESSION_RANDOM_LEN)) return false;
    snprintf(node, n, "%.*s", (int)(dash - id), id);
    return strncmp(id, t->prefix, strlen(t->prefix)) != 0;
}

kd_sessions *kd_sessions_create(kr_pool *pool, const kd_sessions_limits *lim) {
    const int max_sessions = lim->max_sessions, ttl_seconds = lim->ttl_seconds;
    const char *node_id = lim->node_id ? lim->node_id : "kronosd";
    kd_sessions *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->prefix, sizeof t->prefix, "%.*s-", KD_NODE_ID_MAX, node_id);
    t->n_buckets = 16;
    while (t->n_buckets < (size_t)max_sessions * 2)
        t->n_buckets *= 2;
    t->buckets = calloc(t->n_buckets, sizeof *t->buckets);
    if (!t->buckets) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    t->pool = pool;
    t->max = max_sessions;
    t->ttl = ttl_seconds;
    t->min_idle = lim->min_idle_seconds;
    t->max_per_owner = lim->max_per_owner > 0 ? lim->max_per_owner : max_sessions;
    t->heap_budget = lim->heap_budget;
    t->max_bytes_owner = lim->max_bytes_per_owner;
    t->pool_percent = lim->pool_percent > 0 && lim->pool_percent < 100 ? lim->pool_percent : 100;
    t->on_gone = lim->on_gone;
    t->gone_ctx = lim->gone_ctx;
    t->model_unbound = lim->model_unbound;
    t->model_held = lim->model_held;
    return t;
}

/* ---- lists (t->mu held) ------------------------------------------------------------- */

static void lru_remove(kd_sessions *t, kd_session *s) {
    if (s->prev)
        s->prev->next = s->next;
    else
        t->lru_head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        t->lru_tail = s->prev;
    s->prev = s->next = NULL;
}

static void lru_push(kd_sessions *t, kd_session *s) {
    s->prev = t->lru_tail;
    s->next = NULL;
    if (t->lru_tail)
        t->lru_tail->next = s;
    else
        t->lru_head = s;
    t->lru_tail = s;
}

static kd_session *find(kd_sessions *t, const char *id) {
    for (kd_session *s = t->buckets[bucket_of(t, id)]; s; s = s->chain)
        if (strcmp(s->id, id) == 0) return s;
    return NULL;
}

static void unlink_bucket(kd_sessions *t, kd_session *s) {
    kd_session **p = &t->buckets[bucket_of(t, s->id)];
    while (*p != s)
        p = &(*p)->chain;
    *p = s->chain;
}

static void free_session(kd_sessions *t, kd_session *s) {
    kr_cache_free(s->cache);
    if (s->kind) s->kind->free(s->state);
    /* last: the cache and the state are on the model's pool */
    if (s->model && t->model_unbound) t->model_unbound(t->gone_ctx, s->model);
    free(s);
}

/* Tells on_gone that s ends (before it does: a delete that cannot be written is refused);
 * an expiry or eviction whose end cannot be written still frees the memory, and the
 * session comes back after a restart, as it was. */
static int tell_gone(kd_sessions *t, const kd_session *s, bool must, char *msg, size_t msglen) {
    char why[512];
    if (!t->on_gone || t->on_gone(t->gone_ctx, s->id, why, sizeof why) == 0) return 0;
    if (must) {
        snprintf(msg, msglen, "%s", why);
        return -1;
    }
    kd_log("%s (session %s ended here, and will come back after a restart)", why, s->id);
    return 0;
}

/* Removes an idle session and frees its cache (its blocks go back to the pool); told: its
 * end was told already (tell_gone). */
static void retire_told(kd_sessions *t, kd_session *s, gone_reason why, bool told) {
    if (!told) tell_gone(t, s, false, NULL, 0);
    lru_remove(t, s);
    unlink_bucket(t, s);
    memcpy(t->gone[t->gone_next].id, s->id, sizeof s->id);
    memcpy(t->gone[t->gone_next].owner, s->owner, sizeof s->owner);
    t->gone[t->gone_next].why = why;
    t->gone_next = (t->gone_next + 1) % GONE_MAX;
    t->count--;
    t->heap_used -= s->heap;
    t->pool_used -= s->bytes - s->heap;
    free_session(t, s);
}

static void retire(kd_sessions *t, kd_session *s, gone_reason why) {
    retire_told(t, s, why, false);
}

static kd_session_status not_found(kd_sessions *t, const char *owner, const char *id, char *msg,
                                   size_t msglen) {
    static const char *const reasons[] = {
        [GONE_EXPIRED] = "expired after being idle longer than the session TTL",
        [GONE_EVICTED] = "was evicted while idle to free KV cache memory for other requests "
                         "(pool-bytes)",
        [GONE_EVICTED_SLOT] = "was evicted while idle past session-min-idle to make room for a "
                              "new session (max-sessions)",
        [GONE_DELETED] = "was deleted",
        [GONE_REFUSED] = "was not restored at the last start: the model it was created with is "
                         "no longer loaded, or its files changed (the log says which)",
    };
    char node[KD_NODE_ID_MAX + 8];
    if (valid_id(t, id))
        for (int i = 0; i < GONE_MAX; i++)
            if (strcmp(t->gone[i].id, id) == 0 &&
                (!owner || strcmp(t->gone[i].owner, owner) == 0)) {
                snprintf(msg, msglen, "session %s %s", id, reasons[t->gone[i].why]);
                return KD_SESSION_NOT_FOUND;
            }
    if (other_node(t, id, node, sizeof node)) {
        snprintf(msg, msglen,
                 "session %s belongs to node %s, not this one (%.*s): send "
                 "/sessions/{id}/... through a proxy that routes by the id's node",
                 id, node, (int)strlen(t->prefix) - 1, t->prefix);
        return KD_SESSION_NOT_FOUND;
    }
    if (valid_id(t, id)) /* this node's form: made here, maybe before a restart */
        snprintf(msg, msglen,
                 "unknown session %s: this node does not hold it (a session outlives a restart "
                 "of its node only with state-dir)",
                 id);
    else
        snprintf(msg, msglen, "unknown session '%.*s'", KD_SESSION_ID_LEN + 8, id);
    return KD_SESSION_NOT_FOUND;
}

/* ---- operations --------------------------------------------------------------------- */

/* The sessions of one owner, and the one of them idle longest (NULL if all are busy). */
static int owned(kd_sessions *t, const char *owner, kd_session **idlest) {
    int n = 0;
    *idlest = NULL;
    for (size_t b = 0; b < t->n_buckets; b++)
        for (kd_session *s = t->buckets[b]; s; s = s->chain) {
            if (strcmp(s->owner, owner) != 0) continue;
            n++;
            if (!s->busy && (!*idlest || s->last_used < (*idlest)->last_used)) *idlest = s;
        }
    return n;
}

kd_session_status kd_sessions_new(kd_sessions *t, const char *owner, char *id, kd_session **held,
                                  char *msg, size_t msglen, int *retry_after) {
    return kd_sessions_new_with(t, NULL, NULL, owner, id, held, msg, msglen, retry_after);
}

const kd_session_kind *kd_session_kind_of(const kd_session *s) {
    return s->kind;
}

void *kd_session_state(kd_session *s) {
    return s->state;
}

/* The session to evict for owner's sake (t->mu held): its own least recently used one idle
 * past min-idle, else anyone's; NULL when every idle session was used within min-idle. The
 * idle list is in the order of last use, so the walk stops at the first one too recent. */
static kd_session *victim(kd_sessions *t, const char *owner, double now, bool own_only) {
    for (kd_session *s = t->lru_head; s && now - s->last_used >= t->min_idle; s = s->next)
        if (strcmp(s->owner, owner) == 0) return s;
    if (own_only) return NULL;
    kd_session *h = t->lru_head;
    return h && now - h->last_used >= t->min_idle ? h : NULL;
}

/* Seconds until some idle session (of owner, if given) is past min-idle; 1 when none is
 * idle (the busy ones' requests end, and with them the forecasts' memory). */
static int seconds_to_room(kd_sessions *t, const char *owner, double now) {
    for (kd_session *s = t->lru_head; s; s = s->next)
        if (!owner || strcmp(s->owner, owner) == 0) {
            const double wait = t->min_idle - (now - s->last_used);
            return wait > 0 ? (int)wait + 1 : 1;
        }
    return 1;
}

static size_t owner_bytes(kd_sessions *t, const char *owner) {
    size_t n = 0;
    for (size_t b = 0; b < t->n_buckets; b++)
        for (kd_session *s = t->buckets[b]; s; s = s->chain)
            if (strcmp(s->owner, owner) == 0) n += s->bytes;
    return n;
}

static size_t pool_free(kd_sessions *t) {
    kr_pool_stats ps;
    kr_pool_stats_get(t->pool, &ps);
    return ps.bytes_total - ps.bytes_used;
}

/* The pool bytes sessions may hold: session-pool-percent of it. */
static size_t pool_share(kd_sessions *t) {
    kr_pool_stats ps;
    kr_pool_stats_get(t->pool, &ps);
    return ps.bytes_total / 100 * (size_t)t->pool_percent;
}

static void evict(kd_sessions *t, kd_session *s) {
    retire(t, s, GONE_EVICTED);
    t->evicted++;
}

static kd_session_status room_for(kd_sessions *t, const char *owner, double now, char *msg,
                                  size_t msglen, int *retry_after);

kd_session_status kd_sessions_make_room(kd_sessions *t, const char *owner, size_t heap, size_t pool,
                                        bool creating, char *msg, size_t msglen, int *retry_after) {
    kd_session_status st = KD_SESSION_OK;
    kd_session *v;
    pthread_mutex_lock(&t->mu);
    const double now = kd_now_s();
    kr_pool_stats ps;
    kr_pool_stats_get(t->pool, &ps);
    *retry_after = 1;
    if (creating && (st = room_for(t, owner, now, msg, msglen, retry_after)) != KD_SESSION_OK)
        goto out;
    if (t->max_bytes_owner && heap + pool > t->max_bytes_owner) {
        snprintf(msg, msglen,
                 "this session would hold %zu bytes, more than one key's sessions may "
                 "(max-session-bytes-per-key %zu)",
                 heap + pool, t->max_bytes_owner);
        st = KD_SESSION_BYTES_LIMIT;
        goto out;
    }
    if ((t->heap_budget && heap > t->heap_budget) || pool > pool_share(t)) {
        snprintf(msg, msglen,
                 "this session would hold %zu bytes outside the pool and %zu in it: more than "
                 "session-memory-bytes (%zu) or session-pool-percent (%d) of pool-bytes (%zu) "
                 "hold",
                 heap, pool, t->heap_budget, t->pool_percent, ps.bytes_total);
        st = KD_SESSION_BYTES_LIMIT;
        goto out;
    }
    /* the owner's own bytes: only its own sessions make room for them */
    while (t->max_bytes_owner && owner_bytes(t, owner) + heap + pool > t->max_bytes_owner) {
        if (!(v = victim(t, owner, now, true))) {
            *retry_after = seconds_to_room(t, owner, now);
            snprintf(msg, msglen,
                     "%s's sessions hold %zu bytes; %zu more would pass "
                     "max-session-bytes-per-key (%zu), and none of them has been idle for "
                     "session-min-idle (%d s): delete one or retry after %d s",
                     owner, owner_bytes(t, owner), heap + pool, t->max_bytes_owner, t->min_idle,
                     *retry_after);
            st = KD_SESSION_BYTES_LIMIT;
            goto out;
        }
        evict(t, v);
    }
    for (;;) {
        const bool heap_short =
            t->heap_budget && t->heap_used + t->heap_reserved + heap > t->heap_budget;
        const bool pool_short = pool_free(t) < pool || t->pool_used + pool > pool_share(t);
        if (!heap_short && !pool_short) break;
        if (!(v = victim(t, owner, now, false))) {
            *retry_after = seconds_to_room(t, NULL, now);
            snprintf(msg, msglen,
                     "no room for %zu bytes of %s: the memory is held by sessions used within "
                     "session-min-idle (%d s) and by requests in flight; retry after %d s",
                     heap_short ? heap : pool,
                     heap_short ? "session memory (session-memory-bytes)"
                                : "KV pool (pool-bytes, session-pool-percent)",
                     t->min_idle, *retry_after);
            st = KD_SESSION_NO_ROOM;
            goto out;
        }
        evict(t, v);
    }
    t->heap_reserved += heap;
out:
    if (st == KD_SESSION_NO_ROOM) t->refused_room++;
    if (st == KD_SESSION_BYTES_LIMIT) t->refused_bytes++;
    pthread_mutex_unlock(&t->mu);
    return st;
}

void kd_sessions_unreserve(kd_sessions *t, size_t heap) {
    pthread_mutex_lock(&t->mu);
    t->heap_reserved -= heap < t->heap_reserved ? heap : t->heap_reserved;
    pthread_mutex_unlock(&t->mu);
}

/* Whether a new session of owner may be added now (t->mu held); if the table is full, the
 * least recently used session idle past min-idle makes room. Else the refusal's status, with
 * msg and *retry_after set. */
static kd_session_status room_for(kd_sessions *t, const char *owner, double now, char *msg,
                                  size_t msglen, int *retry_after) {
    kd_session *idlest;
    if (owned(t, owner, &idlest) >= t->max_per_owner) {
        /* a client's own sessions are its limit: the oldest idle one ends at its TTL */
        *retry_after = idlest ? (int)(t->ttl - (now - idlest->last_used)) + 1 : t->ttl;
        snprintf(msg, msglen,
                 "%s holds %d sessions, its limit (max-sessions-per-key); delete one or retry "
                 "after %d s",
                 owner, t->max_per_owner, *retry_after);
        return KD_SESSION_OWNER_LIMIT;
    }
    if (t->count < t->max) return KD_SESSION_OK;
    /* never a session created or used within session-min-idle: others' work is safe */
    kd_session *v = victim(t, owner, now, false);
    if (v) {
        retire(t, v, GONE_EVICTED_SLOT);
        t->evicted++;
        return KD_SESSION_OK;
    }
    const kd_session *lru = t->lru_head;
    const double idle = lru ? now - lru->last_used : 0;
    *retry_after = lru ? (int)(t->min_idle - idle) + 1 : t->min_idle;
    snprintf(msg, msglen,
             "all %d sessions are held and none has been idle for session-min-idle (%d s); "
             "retry after %d s",
             t->max, t->min_idle, *retry_after);
    return KD_SESSION_FULL;
}

/* A session of kind with state (owning it), or a token session with an empty cache; NULL
 * with msg (state freed). */
static kd_session *session_alloc(kd_sessions *t, const kd_session_kind *kind, void *state,
                                 const char *owner, char *msg, size_t msglen) {
    kd_session *s = calloc(1, sizeof *s);
    kr_error err = {0};
    if (!s || (!kind && !(s->cache = kr_cache_create(t->pool, 0, &err)))) {
        snprintf(msg, msglen, "sessions: %s", s ? err.msg : "out of memory");
        free(s);
        if (kind) kind->free(state);
        return NULL;
    }
    s->kind = kind;
    s->state = state;
    if (kind) {
        kind->describe(state, &s->extra);
        s->length = s->extra.length;
        s->bytes = s->extra.bytes;
        s->heap = s->extra.heap_bytes;
    }
    snprintf(s->owner, sizeof s->owner, "%s", owner);
    return s;
}

/* Puts s in the table (t->mu held), idle or busy for the caller. */
static void insert(kd_sessions *t, kd_session *s, double now, kd_session **held) {
    s->created = s->last_used = now;
    t->heap_used += s->heap;
    t->pool_used += s->bytes - s->heap;
    s->chain = t->buckets[bucket_of(t, s->id)];
    t->buckets[bucket_of(t, s->id)] = s;
    if (held) {
        s->busy = true;
        t->busy++;
        *held = s;
    } else {
        lru_push(t, s);
    }
    t->count++;
}

kd_session_status kd_sessions_new_with(kd_sessions *t, const kd_session_kind *kind, void *state,
                                       const char *owner, char *id, kd_session **held, char *msg,
                                       size_t msglen, int *retry_after) {
    *retry_after = 1;
    unsigned char raw[KD_SESSION_RANDOM_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        snprintf(msg, msglen, "sessions: getrandom failed: %s", strerror(errno));
        if (kind) kind->free(state);
        return KD_SESSION_ERROR;
    }
    kd_session *s = session_alloc(t, kind, state, owner, msg, msglen);
    if (!s) return KD_SESSION_ERROR;
    const size_t p = strlen(t->prefix);
    memcpy(s->id, t->prefix, p);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(s->id + p + 2 * i, 3, "%02x", raw[i]);
    pthread_mutex_lock(&t->mu);
    const double now = kd_now_s();
    kd_session_status st = room_for(t, owner, now, msg, msglen, retry_after);
    if (st != KD_SESSION_OK) {
        pthread_mutex_unlock(&t->mu);
        free_session(t, s);
        return st;
    }
    insert(t, s, now, held);
    t->created++;
    memcpy(id, s->id, sizeof s->id);
    pthread_mutex_unlock(&t->mu);
    return KD_SESSION_OK;
}

kd_session_status kd_sessions_restore(kd_sessions *t, const kd_session_kind *kind, void *state,
                                      const char *owner, const char *id, kd_session **held,
                                      char *msg, size_t msglen) {
    if (strlen(id) > KD_SESSION_ID_LEN || !valid_id(t, id)) {
        snprintf(msg, msglen, "session %s is not of this node (node-id %.*s)", id,
                 (int)strlen(t->prefix) - 1, t->prefix);
        if (kind) kind->free(state);
        return KD_SESSION_ERROR;
    }
    kd_session *s = session_alloc(t, kind, state, owner, msg, msglen);
    if (!s) return KD_SESSION_ERROR;
    snprintf(s->id, sizeof s->id, "%s", id);
    kd_session_status st = KD_SESSION_OK;
    pthread_mutex_lock(&t->mu);
    if (find(t, id)) {
        snprintf(msg, msglen, "session %s is restored already", id);
        st = KD_SESSION_ERROR;
    } else if (t->count >= t->max) {
        snprintf(msg, msglen, "the table holds max-sessions (%d) already", t->max);
        st = KD_SESSION_FULL;
    } else {
        insert(t, s, kd_now_s(), held);
        t->created++;
    }
    pthread_mutex_unlock(&t->mu);
    if (st != KD_SESSION_OK) free_session(t, s);
    return st;
}

/* The session named id, with *st KD_SESSION_OK; or NULL with *st and msg saying why. A
 * session of another owner is answered as one that never was: nothing tells that it
 * exists. Under the table's lock. */
static kd_session *lookup(kd_sessions *t, const char *owner, const char *id, kd_session_status *st,
                          char *msg, size_t msglen) {
    kd_session *s = valid_id(t, id) ? find(t, id) : NULL;
    if (s && owner && strcmp(s->owner, owner) != 0) s = NULL;
    *st = s ? KD_SESSION_OK : not_found(t, owner, id, msg, msglen);
    return s;
}

kd_session_status kd_sessions_acquire(kd_sessions *t, const char *owner, const char *id,
                                      kd_session **out, char *msg, size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, owner, id, &st, msg, msglen);
    if (s && s->busy) {
        snprintf(msg, msglen, "session %s is in use by another request; retry when it is done", id);
        st = KD_SESSION_BUSY;
    } else if (s) {
        lru_remove(t, s);
        s->busy = true;
        t->busy++;
        *out = s;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

kr_cache *kd_session_cache(kd_session *s) {
    return s->cache;
}

void kd_sessions_release(kd_sessions *t, kd_session *s) {
    /* the caller is done with the cache: these reads race with nothing */
    kd_session_extra extra = {0};
    if (s->kind) s->kind->describe(s->state, &extra);
    const int length = s->kind ? extra.length : kr_cache_length(s->cache);
    const size_t bytes = s->kind ? extra.bytes : kr_cache_bytes(s->cache);
    pthread_mutex_lock(&t->mu);
    t->heap_used += extra.heap_bytes - s->heap; /* unsigned: wraps back right */
    t->pool_used += (bytes - extra.heap_bytes) - (s->bytes - s->heap);
    s->heap = extra.heap_bytes;
    s->extra = extra;
    s->length = length;
    s->bytes = bytes;
    s->busy = false;
    s->last_used = kd_now_s();
    t->busy--;
    lru_push(t, s);
    pthread_mutex_unlock(&t->mu);
}

int kd_sessions_discard(kd_sessions *t, kd_session *s) {
    pthread_mutex_lock(&t->mu);
    s->busy = false;
    t->busy--;
    lru_push(t, s); /* retire takes it off the list */
    const int told = tell_gone(t, s, true, NULL, 0);
    retire_told(t, s, GONE_DELETED, true);
    t->deleted++;
    pthread_mutex_unlock(&t->mu);
    return told;
}

const char *kd_session_id(const kd_session *s) {
    return s->id;
}

kd_session_status kd_sessions_info(kd_sessions *t, const char *owner, const char *id,
                                   kd_session_info *info, char *msg, size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, owner, id, &st, msg, msglen);
    if (s) {
        const double now = kd_now_s();
        info->length = s->length;
        info->capacity = s->cache ? kr_cache_capacity(s->cache) : 0;
        info->kind = s->kind;
        info->model = s->model;
        if (s->model && t->model_held) t->model_held(t->gone_ctx, s->model);
        info->extra = s->extra;
        info->bytes = s->bytes;
        info->busy = s->busy;
        info->idle_seconds = s->busy ? 0 : now - s->last_used;
        info->age_seconds = now - s->created;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

kd_session_status kd_sessions_delete(kd_sessions *t, const char *owner, const char *id, char *msg,
                                     size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, owner, id, &st, msg, msglen);
    if (s && s->busy) {
        snprintf(msg, msglen, "session %s is in use by another request; delete it when it is done",
                 id);
        st = KD_SESSION_BUSY;
    } else if (s && tell_gone(t, s, true, msg, msglen) < 0) {
        st = KD_SESSION_NOT_KEPT;
    } else if (s) {
        retire_told(t, s, GONE_DELETED, true);
        t->deleted++;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

int kd_sessions_expire(kd_sessions *t) {
    int n = 0;
    pthread_mutex_lock(&t->mu);
    const double cutoff = kd_now_s() - t->ttl;
    while (t->lru_head && t->lru_head->last_used <= cutoff) {
        retire(t, t->lru_head, GONE_EXPIRED);
        t->expired++;
        n++;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

bool kd_sessions_evict_lru_in(kd_sessions *t, const kr_pool *pool) {
    pthread_mutex_lock(&t->mu);
    const double now = kd_now_s();
    kd_session *v = t->lru_head;
    while (v && now - v->last_used >= t->min_idle && (v->pool ? v->pool : t->pool) != pool)
        v = v->next;
    if (v && now - v->last_used >= t->min_idle)
        evict(t, v);
    else
        v = NULL;
    pthread_mutex_unlock(&t->mu);
    return v != NULL;
}

bool kd_sessions_evict_lru(kd_sessions *t) {
    pthread_mutex_lock(&t->mu);
    kd_session *v = victim(t, "", kd_now_s(), false);
    if (v) evict(t, v);
    pthread_mutex_unlock(&t->mu);
    return v != NULL;
}

int kd_sessions_count_of(kd_sessions *t, const char *owner) {
    kd_session *idlest;
    pthread_mutex_lock(&t->mu);
    const int n = owned(t, owner, &idlest);
    pthread_mutex_unlock(&t->mu);
    return n;
}

void kd_sessions_stats_get(kd_sessions *t, kd_sessions_stats *st) {
    pthread_mutex_lock(&t->mu);
    st->count = t->count;
    st->busy = t->busy;
    st->created = t->created;
    st->expired = t->expired;
    st->evicted = t->evicted;
    st->deleted = t->deleted;
    st->refused_room = t->refused_room;
    st->refused_bytes = t->refused_bytes;
    st->heap_bytes = t->heap_used;
    st->heap_budget = t->heap_budget;
    st->pool_bytes = t->pool_used;
    st->pool_budget = pool_share(t);
    pthread_mutex_unlock(&t->mu);
}

void kd_sessions_free(kd_sessions *t) {
    if (!t) return;
    for (size_t b = 0; b < t->n_buckets; b++)
        for (kd_session *s = t->buckets[b], *next; s; s = next) {
            next = s->chain;
            free_session(t, s);
        }
    pthread_mutex_destroy(&t->mu);
    free(t->buckets);
    free(t);
}
