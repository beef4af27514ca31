/* sessions.c — a hash table of sessions and an LRU list of the idle ones.
 *
 * Busy sessions are off the LRU list, so eviction and expiry only ever see idle sessions
 * and never free a cache a worker is using. The ids of recently removed sessions are kept
 * in a ring so that a 404 can say what happened to them. */
#include "sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define GONE_MAX 1024 /* removed ids remembered for their 404 message */

struct kd_session {
    char id[KD_SESSION_ID_LEN + 1];
    kr_cache *cache;
    bool busy;
    double created, last_used;
    char owner[KD_OWNER_MAX + 1]; /* who created it: an API key's digest or an address */
    int length;              /* as of the last release: readable while a worker holds the cache */
    size_t bytes;            /* likewise */
    kd_session *chain;       /* next in the hash bucket */
    kd_session *prev, *next; /* the idle LRU list, oldest first */

    const kd_session_kind *kind; /* NULL: a token session (cache) */
    void *state;                 /* a session of another kind: its state */
    kd_session_extra extra;      /* its description as of the last release */
};

typedef enum { GONE_EXPIRED, GONE_EVICTED, GONE_EVICTED_SLOT, GONE_DELETED } gone_reason;

struct kd_sessions {
    pthread_mutex_t mu;
    char prefix[KD_NODE_ID_MAX + 2]; /* "node-" */
    kr_pool *pool;
    int max, ttl, min_idle, max_per_owner;
    kd_session **buckets;
    size_t n_buckets; /* a power of two */
    kd_session *lru_head, *lru_tail;
    int count, busy;
    unsigned long long created, expired, evicted, deleted;
    struct {
        char id[KD_SESSION_ID_LEN + 1];
        gone_reason why;
    } gone[GONE_MAX];
    int gone_next;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* FNV-1a; ids are random, so any mixing will do. */
static size_t bucket_of(const kd_sessions *t, const char *id) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (size_t)h & (t->n_buckets - 1);
}

static bool all_hex(const char *s, size_t n) {
    return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* An id this node could have made. */
static bool valid_id(const kd_sessions *t, const char *id) {
    const size_t p = strlen(t->prefix);
    return strncmp(id, t->prefix, p) == 0 && all_hex(id + p, KD_SESSION_RANDOM_LEN);
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

static void free_session(kd_session *s) {
    kr_cache_free(s->cache);
    if (s->kind) s->kind->free(s->state);
    free(s);
}

/* Removes an idle session and frees its cache (its blocks go back to the pool). */
static void retire(kd_sessions *t, kd_session *s, gone_reason why) {
    lru_remove(t, s);
    unlink_bucket(t, s);
    memcpy(t->gone[t->gone_next].id, s->id, sizeof s->id);
    t->gone[t->gone_next].why = why;
    t->gone_next = (t->gone_next + 1) % GONE_MAX;
    t->count--;
    free_session(s);
}

static kd_session_status not_found(kd_sessions *t, const char *id, char *msg, size_t msglen) {
    static const char *const reasons[] = {
        [GONE_EXPIRED] = "expired after being idle longer than the session TTL",
        [GONE_EVICTED] = "was evicted while idle to free KV cache memory for other requests "
                         "(pool-bytes)",
        [GONE_EVICTED_SLOT] = "was evicted while idle past session-min-idle to make room for a "
                              "new session (max-sessions)",
        [GONE_DELETED] = "was deleted",
    };
    char node[KD_NODE_ID_MAX + 8];
    if (valid_id(t, id))
        for (int i = 0; i < GONE_MAX; i++)
            if (strcmp(t->gone[i].id, id) == 0) {
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

kd_session_status kd_sessions_new(kd_sessions *t, const char *owner, char *id, char *msg,
                                  size_t msglen, int *retry_after) {
    return kd_sessions_new_with(t, NULL, NULL, owner, id, msg, msglen, retry_after);
}

const kd_session_kind *kd_session_kind_of(const kd_session *s) {
    return s->kind;
}

void *kd_session_state(kd_session *s) {
    return s->state;
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
    const kd_session *lru = t->lru_head;
    const double idle = lru ? now - lru->last_used : 0;
    if (lru && idle >= t->min_idle) {
        retire(t, t->lru_head, GONE_EVICTED_SLOT);
        t->evicted++;
        return KD_SESSION_OK;
    }
    *retry_after = lru ? (int)(t->min_idle - idle) + 1 : t->min_idle;
    snprintf(msg, msglen,
             "all %d sessions are held and none has been idle for session-min-idle (%d s); "
             "retry after %d s",
             t->max, t->min_idle, *retry_after);
    return KD_SESSION_FULL;
}

kd_session_status kd_sessions_new_with(kd_sessions *t, const kd_session_kind *kind, void *state,
                                       const char *owner, char *id, char *msg, size_t msglen,
                                       int *retry_after) {
    *retry_after = 1;
    unsigned char raw[KD_SESSION_RANDOM_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        snprintf(msg, msglen, "sessions: getrandom failed: %s", strerror(errno));
        if (kind) kind->free(state);
        return KD_SESSION_ERROR;
    }
    kd_session *s = calloc(1, sizeof *s);
    kr_error err = {0};
    if (!s || (!kind && !(s->cache = kr_cache_create(t->pool, 0, &err)))) {
        snprintf(msg, msglen, "sessions: %s", s ? err.msg : "out of memory");
        free(s);
        if (kind) kind->free(state);
        return KD_SESSION_ERROR;
    }
    s->kind = kind;
    s->state = state;
    if (kind) {
        kind->describe(state, &s->extra);
        s->length = s->extra.length;
        s->bytes = s->extra.bytes;
    }
    const size_t p = strlen(t->prefix);
    memcpy(s->id, t->prefix, p);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(s->id + p + 2 * i, 3, "%02x", raw[i]);
    snprintf(s->owner, sizeof s->owner, "%s", owner);
    pthread_mutex_lock(&t->mu);
    const double now = now_s();
    kd_session_status st = room_for(t, owner, now, msg, msglen, retry_after);
    if (st != KD_SESSION_OK) {
        pthread_mutex_unlock(&t->mu);
        free_session(s);
        return st;
    }
    s->created = s->last_used = now;
    s->chain = t->buckets[bucket_of(t, s->id)];
    t->buckets[bucket_of(t, s->id)] = s;
    lru_push(t, s);
    t->count++;
    t->created++;
    memcpy(id, s->id, sizeof s->id);
    pthread_mutex_unlock(&t->mu);
    return KD_SESSION_OK;
}

/* The session named id, with *st KD_SESSION_OK; or NULL with *st and msg saying why. Under
 * the table's lock. */
static kd_session *lookup(kd_sessions *t, const char *id, kd_session_status *st, char *msg,
                          size_t msglen) {
    kd_session *s = valid_id(t, id) ? find(t, id) : NULL;
    *st = s ? KD_SESSION_OK : not_found(t, id, msg, msglen);
    return s;
}

kd_session_status kd_sessions_acquire(kd_sessions *t, const char *id, kd_session **out, char *msg,
                                      size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, id, &st, msg, msglen);
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
    s->extra = extra;
    s->length = length;
    s->bytes = bytes;
    s->busy = false;
    s->last_used = now_s();
    t->busy--;
    lru_push(t, s);
    pthread_mutex_unlock(&t->mu);
}

kd_session_status kd_sessions_info(kd_sessions *t, const char *id, kd_session_info *info, char *msg,
                                   size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, id, &st, msg, msglen);
    if (s) {
        const double now = now_s();
        info->length = s->length;
        info->capacity = s->cache ? kr_cache_capacity(s->cache) : 0;
        info->kind = s->kind;
        info->extra = s->extra;
        info->bytes = s->bytes;
        info->busy = s->busy;
        info->idle_seconds = s->busy ? 0 : now - s->last_used;
        info->age_seconds = now - s->created;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

kd_session_status kd_sessions_delete(kd_sessions *t, const char *id, char *msg, size_t msglen) {
    kd_session_status st;
    pthread_mutex_lock(&t->mu);
    kd_session *s = lookup(t, id, &st, msg, msglen);
    if (s && s->busy) {
        snprintf(msg, msglen, "session %s is in use by another request; delete it when it is done",
                 id);
        st = KD_SESSION_BUSY;
    } else if (s) {
        retire(t, s, GONE_DELETED);
        t->deleted++;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

int kd_sessions_expire(kd_sessions *t) {
    int n = 0;
    pthread_mutex_lock(&t->mu);
    const double cutoff = now_s() - t->ttl;
    while (t->lru_head && t->lru_head->last_used <= cutoff) {
        retire(t, t->lru_head, GONE_EXPIRED);
        t->expired++;
        n++;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

bool kd_sessions_evict_lru(kd_sessions *t) {
    pthread_mutex_lock(&t->mu);
    const bool any = t->lru_head != NULL;
    if (any) {
        retire(t, t->lru_head, GONE_EVICTED);
        t->evicted++;
    }
    pthread_mutex_unlock(&t->mu);
    return any;
}

void kd_sessions_stats_get(kd_sessions *t, kd_sessions_stats *st) {
    pthread_mutex_lock(&t->mu);
    st->count = t->count;
    st->busy = t->busy;
    st->created = t->created;
    st->expired = t->expired;
    st->evicted = t->evicted;
    st->deleted = t->deleted;
    pthread_mutex_unlock(&t->mu);
}

void kd_sessions_free(kd_sessions *t) {
    if (!t) return;
    for (size_t b = 0; b < t->n_buckets; b++)
        for (kd_session *s = t->buckets[b], *next; s; s = next) {
            next = s->chain;
            free_session(s);
        }
    pthread_mutex_destroy(&t->mu);
    free(t->buckets);
    free(t);
}
