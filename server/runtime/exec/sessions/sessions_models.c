/* sessions_models.c — the model a session is bound to (sessions.h): set when it is created
 * or restored, and the ids of journaled sessions that were not restored for want of it. */
#include <stdio.h>

#include "sessions_impl.h"

void kd_sessions_refused(kd_sessions *t, const char *id, const char *owner) {
    pthread_mutex_lock(&t->mu);
    snprintf(t->gone[t->gone_next].id, sizeof t->gone[t->gone_next].id, "%s", id);
    snprintf(t->gone[t->gone_next].owner, sizeof t->gone[t->gone_next].owner, "%s", owner);
    t->gone[t->gone_next].why = GONE_REFUSED;
    t->gone_next = (t->gone_next + 1) % GONE_MAX;
    pthread_mutex_unlock(&t->mu);
}

const void *kd_session_model(const kd_session *s) {
    return s->model;
}

int kd_session_bind(kd_session *s, const void *model, kr_pool *pool) {
    s->model = model;
    s->pool = pool;
    if (s->kind || !pool || !s->cache || kr_cache_length(s->cache) > 0) return 0;
    kr_error err;
    kr_cache *c = kr_cache_create(pool, 0, &err); /* empty: nothing counted moves */
    if (!c) return -1;
    kr_cache_free(s->cache);
    s->cache = c;
    return 0;
}
