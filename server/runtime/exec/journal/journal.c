/* journal.c — the session journal (journal.h): the file and its lock, the open (header,
 * scan, the checks that the configuration fits, replay), the writes and their syncs, the
 * flusher thread (everysec syncs, rewrites). */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "journal_scan.h"
#include "log.h"
#include "thread.h"

#define FRAME KD_JOURNAL_FRAME

struct kd_journal {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t flusher;
    bool flusher_started, stopping;
    int fd, lock_fd;
    char path[PATH_MAX], tmp_path[PATH_MAX], dir[PATH_MAX];
    kd_fsync_policy policy;
    size_t rewrite_min;
    size_t header_bytes, size;
    uint64_t header_fingerprint; /* the default model's when the file was started */
    bool dirty;                  /* written and not yet synced */
    kd_jindex live;              /* the live sessions and the bytes of their records */
    kd_jbuf buf;                 /* the record being encoded */
    kd_journal_stats st;
};

/* ---- file helpers ---------------------------------------------------------------------- */

int kd_journal_write_all(int fd, const void *p, size_t n, off_t at) {
    const unsigned char *b = p;
    while (n > 0) {
        const ssize_t w = pwrite(fd, b, n, at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

int kd_journal_sync_dir(const char *dir) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int rc = fsync(fd);
    close(fd);
    return rc;
}

/* ---- open: header, scan, fit, replay ------------------------------------------------------ */

static void *flusher_main(void *arg);

int kd_journal_lock(const char *dir, char *err, size_t errlen) {
    char lock[PATH_MAX];
    if (snprintf(lock, sizeof lock, "%s/lock", dir) >= (int)sizeof lock) {
        snprintf(err, errlen, "state-dir %.200s...: the path is too long (at most %d bytes)", dir,
                 PATH_MAX - 16);
        return -1;
    }
    const int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "state-dir %s: cannot open %s: %s", dir, lock, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errlen,
                 "state-dir %s is in use by another kronosd process (%s is locked); give each "
                 "process its own state-dir",
                 dir, lock);
        close(fd);
        return -1;
    }
    return fd;
}

static int open_paths(kd_journal *j, const char *dir, char *err, size_t errlen) {
    if (snprintf(j->dir, sizeof j->dir, "%s", dir) >= (int)sizeof j->dir ||
        snprintf(j->path, sizeof j->path, "%s/journal", dir) >= (int)sizeof j->path ||
        snprintf(j->tmp_path, sizeof j->tmp_path, "%s/journal.rewrite", dir) >=
            (int)sizeof j->tmp_path) {
        snprintf(err, errlen, "state-dir %.200s...: the path is too long (at most %d bytes)", dir,
                 PATH_MAX - 24);
        return -1;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "state-dir %s: cannot create it: %s", dir, strerror(errno));
        return -1;
    }
    if ((j->lock_fd = kd_journal_lock(dir, err, errlen)) < 0) return -1;
    j->fd = open(j->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd < 0) {
        snprintf(err, errlen, "state-dir %s: cannot open %s: %s", dir, j->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A new file: the header alone (in j->buf), on the disk. */
static int start_file(kd_journal *j, char *err, size_t errlen) {
    if (ftruncate(j->fd, 0) < 0 || kd_journal_write_all(j->fd, j->buf.p, j->buf.len, 0) < 0 ||
        fdatasync(j->fd) < 0 || kd_journal_sync_dir(j->dir) < 0) {
        snprintf(err, errlen, "%s: cannot write the header: %s", j->path, strerror(errno));
        return -1;
    }
    j->header_bytes = j->size = j->buf.len;
    return 0;
}

/* The advice every refusal of a damaged journal ends with. */
static void damage_advice(const kd_journal *j, char *out, size_t n) {
    snprintf(
        out, n,
        "Nothing was changed and no session was restored. `kronosd journal check %.200s` lists "
        "every problem; `kronosd journal repair %.200s` drops the sessions they touch and keeps "
        "the original file beside it",
        j->dir, j->dir);
}

/* The header: 0 with j->header_bytes set, 1 when the file was only being created, -1 with
 * err. */
static int open_header(kd_journal *j, const unsigned char *p, size_t size,
                       const kd_journal_config *cfg, char *err, size_t errlen) {
    kd_journal_header h;
    char why[512], advice[768];
    switch (kd_journal_read_header(p, size, &j->buf, &h, why, sizeof why)) {
    case KD_HEADER_UNFINISHED:
        return 1;
    case KD_HEADER_BAD:
        damage_advice(j, advice, sizeof advice);
        snprintf(err, errlen, "%s: %s. %s", j->path, why, advice);
        return -1;
    case KD_HEADER_OK:
        break;
    }
    /* each session is judged by its own model at replay: the header's model only stands for
     * the sessions whose records name none */
    if (h.fingerprint != cfg->fingerprint)
        kd_log("journal: %s was started with another default model (%s, fingerprint %016llx) "
               "than this one (%s, fingerprint %016llx): each session is restored on the model "
               "it names, if that is loaded with the same files",
               j->path, h.model, (unsigned long long)h.fingerprint, cfg->model,
               (unsigned long long)cfg->fingerprint);
    j->header_fingerprint = h.fingerprint;
    j->header_bytes = h.end;
    return 0;
}

typedef struct {
    const char *prefix;
    size_t prefix_len;
    const char *other; /* a live session of another node, if any */
} node_check;

static void check_node(void *ctx, const kd_jentry *e) {
    node_check *c = ctx;
    if (!c->other && strncmp(e->id, c->prefix, c->prefix_len) != 0) c->other = e->id;
}

/* What the configuration must hold for the live sessions: their node, their number. */
static int check_fit(kd_journal *j, const kd_journal_config *cfg, char *err, size_t errlen) {
    char prefix[KD_NODE_ID_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s-", cfg->node_id ? cfg->node_id : "kronosd");
    node_check nc = {prefix, strlen(prefix), NULL};
    kd_jindex_each(&j->live, true, check_node, &nc);
    if (nc.other) {
        const char *dash = strrchr(nc.other, '-');
        snprintf(err, errlen,
                 "%s holds sessions of node-id %.*s (%s among them), and this daemon's node-id "
                 "is %s: a session id names its node, so they cannot be restored here. Start "
                 "with node-id %.*s (set node-id in the config: the default, the host's name, "
                 "changes when a container is recreated). Nothing was changed",
                 j->path, (int)(dash - nc.other), nc.other, nc.other, cfg->node_id,
                 (int)(dash - nc.other), nc.other);
        return -1;
    }
    if (cfg->max_sessions > 0 && j->live.live_count > cfg->max_sessions) {
        snprintf(err, errlen,
                 "%s holds %d live sessions and max-sessions is %d: raise max-sessions to at "
                 "least %d (or start with the old setting and delete sessions). Nothing was "
                 "changed",
                 j->path, j->live.live_count, cfg->max_sessions, j->live.live_count);
        return -1;
    }
    return 0;
}

/* Replays the records of live sessions up to end, in order. */
static int replay_all(kd_journal *j, const unsigned char *p, size_t end, kd_replay_fn replay,
                      void *ctx, char *err, size_t errlen) {
    for (size_t off = j->header_bytes; off < end;) {
        uint32_t len;
        memcpy(&len, p + off, 4);
        const size_t at = off;
        const unsigned char *payload = p + off + FRAME;
        off += FRAME + len;
        char type, id[KD_SESSION_ID_LEN + 1];
        kd_journal_peek(payload, len, &type, id);
        kd_jentry *e = kd_jindex_find(&j->live, id);
        if (type == KD_REC_GONE || !e || !e->live || e->refused) continue;
        kd_journal_record r;
        kd_journal_decoded d = {{0}};
        char msg[512] = "its payload is malformed", advice[768];
        const bool decoded = kd_journal_decode(payload, len, &r, &d) == 0;
        r.header_fingerprint = j->header_fingerprint;
        kd_replay_status rc = decoded ? replay(ctx, &r, msg, sizeof msg) : KD_REPLAY_INVALID;
        kd_journal_decoded_free(&d);
        if (rc == KD_REPLAY_OK) continue;
        if (rc == KD_REPLAY_REFUSED) {
            kd_log("journal: session %s is not restored: %s", id, msg);
            e->refused = true;
            j->st.refused++;
            continue;
        }
        damage_advice(j, advice, sizeof advice);
        snprintf(err, errlen,
                 "%s: session %s (the record at offset %zu) cannot be restored: %s%s%s", j->path,
                 id, at, msg, rc == KD_REPLAY_INVALID ? ". " : "",
                 rc == KD_REPLAY_INVALID ? advice : "");
        return -1;
    }
    return 0;
}

/* The scan's verdict: 0 when nothing but a torn last write is wrong, else -1 with err. */
static int refuse_problems(kd_journal *j, const kd_jscan *s, char *err, size_t errlen) {
    if (s->n_problems == 0) return 0;
    char advice[768];
    damage_advice(j, advice, sizeof advice);
    snprintf(err, errlen,
             "%s is damaged: %d problem%s before its end, the first: %s. A crash "
             "leaves nothing but its last write cut short. %s",
             j->path, s->n_problems, s->n_problems == 1 ? "" : "s", s->problems[0].what, advice);
    return -1;
}

static int load_file(kd_journal *j, const kd_journal_config *cfg, kd_replay_fn replay, void *ctx,
                     char *err, size_t errlen) {
    struct stat sb;
    if (fstat(j->fd, &sb) < 0) {
        snprintf(err, errlen, "%s: %s", j->path, strerror(errno));
        return -1;
    }
    const size_t size = (size_t)sb.st_size;
    if (kd_journal_encode_header(&j->buf, cfg->fingerprint, cfg->model) < 0) {
        snprintf(err, errlen, "journal: out of memory");
        return -1;
    }
    if (size == 0) return start_file(j, err, errlen);
    unsigned char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, j->fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map %zu bytes: %s", j->path, size, strerror(errno));
        return -1;
    }
    const int h = open_header(j, p, size, cfg, err, errlen);
    if (h != 0) {
        munmap(p, size);
        if (h < 0) return -1;
        kd_log("journal: %s holds %zu bytes, the start of its header (a crash while it was "
               "created, before any session): starting it afresh",
               j->path, size);
        return start_file(j, err, errlen);
    }
    kd_jscan s;
    int rc = kd_journal_scan(p, j->header_bytes, size, cfg->m, &s, err, errlen);
    if (rc == 0) {
        kd_jindex_prune(&s.index);
        kd_jindex_free(&j->live);
        j->live = s.index; /* the index is the journal's now */
        s.index = (kd_jindex){0};
        j->st.records = s.records;
        rc = refuse_problems(j, &s, err, errlen);
        if (rc == 0) rc = check_fit(j, cfg, err, errlen);
        if (rc == 0) rc = replay_all(j, p, s.end, replay, ctx, err, errlen);
    }
    munmap(p, size);
    const size_t end = s.end;
    const bool torn = s.torn;
    const char *why = s.torn_why;
    kd_jscan_free(&s);
    if (rc < 0) return -1;
    if (torn) {
        kd_log("journal: %s: cut %zu bytes at offset %zu (%s, with no whole record after it: a "
               "write a crash cut short): what they held is lost, %llu whole records before "
               "them are kept",
               j->path, size - end, end, why, j->st.records);
        if (ftruncate(j->fd, (off_t)end) < 0 || fdatasync(j->fd) < 0) {
            snprintf(err, errlen, "%s: cannot cut the tail: %s", j->path, strerror(errno));
            return -1;
        }
        j->st.cut = size - end;
    }
    j->size = end;
    j->st.restored = (unsigned long long)j->live.live_count - j->st.refused;
    return 0;
}

int kd_fsync_policy_parse(const char *s) {
    if (strcmp(s, "always") == 0) return KD_FSYNC_ALWAYS;
    if (strcmp(s, "everysec") == 0) return KD_FSYNC_EVERYSEC;
    if (strcmp(s, "no") == 0) return KD_FSYNC_NO;
    return -1;
}

kd_journal *kd_journal_open(const kd_journal_config *cfg, kd_replay_fn replay, void *ctx, char *err,
                            size_t errlen) {
    kd_journal *j = calloc(1, sizeof *j);
    if (!j || kd_jindex_init(&j->live) < 0) {
        free(j);
        snprintf(err, errlen, "journal: out of memory");
        return NULL;
    }
    j->fd = j->lock_fd = -1;
    j->policy = cfg->fsync;
    j->rewrite_min = cfg->rewrite_min;
    pthread_mutex_init(&j->mu, NULL);
    kd_thread_cond_init(&j->wake);
    if (open_paths(j, cfg->dir, err, errlen) < 0 ||
        load_file(j, cfg, replay, ctx, err, errlen) < 0) {
        kd_journal_close(j);
        return NULL;
    }
    if (kd_thread_start(&j->flusher, flusher_main, j, "journal", err, errlen) < 0) {
        kd_journal_close(j);
        return NULL;
    }
    j->flusher_started = true;
    return j;
}

/* ---- writes ------------------------------------------------------------------------------ */

static int sync_now(kd_journal *j) {
    if (!j->dirty) return 0;
    if (fdatasync(j->fd) < 0) return -1;
    j->dirty = false;
    j->st.syncs++;
    return 0;
}

/* Encodes and appends rec (j->mu held); the file is as before on failure. */
static int append_record(kd_journal *j, const kd_journal_record *rec, char *err, size_t errlen) {
    if (kd_journal_encode(&j->buf, rec) < 0) {
        j->st.errors++;
        snprintf(err, errlen, "journal: out of memory for a record of session %s", rec->id);
        return -1;
    }
    if (kd_journal_write_all(j->fd, j->buf.p, j->buf.len, (off_t)j->size) < 0) {
        const int e = errno;
        if (ftruncate(j->fd, (off_t)j->size) < 0) { /* the file keeps whole records only */
        }
        j->st.errors++;
        snprintf(err, errlen, "journal: cannot write %s: %s", j->path, strerror(e));
        return -1;
    }
    j->size += j->buf.len;
    j->dirty = true;
    j->st.records++;
    if (kd_jindex_note(&j->live, (char)rec->type, rec->id, j->buf.len, false) < 0) {
        j->st.errors++;
        snprintf(err, errlen, "journal: out of memory");
        return -1;
    }
    return 0;
}

int kd_journal_write(kd_journal *j, const kd_journal_record *rec, char *err, size_t errlen) {
    pthread_mutex_lock(&j->mu);
    int rc = append_record(j, rec, err, errlen);
    if (rc == 0 && j->policy == KD_FSYNC_ALWAYS && sync_now(j) < 0) {
        j->st.errors++;
        snprintf(err, errlen, "journal: cannot sync %s: %s", j->path, strerror(errno));
        rc = -1;
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int kd_journal_gone(kd_journal *j, const char *id, char *err, size_t errlen) {
    kd_journal_record r = {.type = KD_REC_GONE};
    snprintf(r.id, sizeof r.id, "%s", id);
    pthread_mutex_lock(&j->mu);
    const int rc = append_record(j, &r, err, errlen);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int kd_journal_commit(kd_journal *j, char *err, size_t errlen) {
    if (j->policy != KD_FSYNC_ALWAYS) return 0;
    pthread_mutex_lock(&j->mu);
    const int rc = sync_now(j);
    if (rc < 0) {
        j->st.errors++;
        snprintf(err, errlen, "journal: cannot sync %s: %s", j->path, strerror(errno));
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* ---- rewrite: the live sessions' records alone ---------------------------------------------- */

/* j->mu held. The records of live sessions are copied, in order, to a new file that then
 * replaces the journal. On failure the journal stays as it was. */
static int rewrite(kd_journal *j) {
    unsigned char *p = mmap(NULL, j->size, PROT_READ, MAP_SHARED, j->fd, 0);
    if (p == MAP_FAILED) return -1;
    const int fd = open(j->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -1 : kd_journal_write_all(fd, p, j->header_bytes, 0);
    size_t out = j->header_bytes;
    for (size_t off = j->header_bytes; rc == 0 && off < j->size;) {
        uint32_t len;
        memcpy(&len, p + off, 4);
        char type, id[KD_SESSION_ID_LEN + 1];
        kd_journal_peek(p + off + FRAME, len, &type, id);
        if (type != KD_REC_GONE && kd_jindex_find(&j->live, id)) {
            rc = kd_journal_write_all(fd, p + off, FRAME + len, (off_t)out);
            out += FRAME + len;
        }
        off += FRAME + len;
    }
    munmap(p, j->size);
    if (rc == 0) rc = fdatasync(fd);
    if (rc == 0) rc = rename(j->tmp_path, j->path);
    if (rc < 0) {
        const int e = errno;
        if (fd >= 0) close(fd);
        unlink(j->tmp_path);
        errno = e;
        return -1;
    }
    if (kd_journal_sync_dir(j->dir) < 0) kd_log("journal: sync of %s: %s", j->dir, strerror(errno));
    close(j->fd);
    j->fd = fd;
    kd_log("journal: rewritten with the records of %d live sessions: %zu bytes, was %zu",
           j->live.live_count, out, j->size);
    j->size = out;
    j->dirty = false;
    j->st.rewrites++;
    return 0;
}

static bool needs_rewrite(const kd_journal *j) {
    const size_t live = j->header_bytes + j->live.live_bytes;
    return j->size > j->rewrite_min && j->size > 2 * live;
}

static void *flusher_main(void *arg) {
    kd_journal *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->stopping) {
        kd_thread_wait(&j->wake, &j->mu, 1000000000L);
        if (j->policy == KD_FSYNC_EVERYSEC && sync_now(j) < 0) {
            j->st.errors++;
            kd_log("journal: cannot sync %s: %s", j->path, strerror(errno));
        }
        if (needs_rewrite(j) && rewrite(j) < 0) {
            j->st.errors++;
            kd_log("journal: cannot rewrite %s: %s (it keeps growing; retried in 1 s)", j->path,
                   strerror(errno));
        }
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

void kd_journal_stats_get(kd_journal *j, kd_journal_stats *st) {
    pthread_mutex_lock(&j->mu);
    *st = j->st;
    st->bytes = j->size;
    st->live_bytes = j->header_bytes + j->live.live_bytes;
    st->live_sessions = j->live.live_count;
    pthread_mutex_unlock(&j->mu);
}

void kd_journal_close(kd_journal *j) {
    if (!j) return;
    if (j->flusher_started) {
        kd_thread_ask_stop(&j->mu, &j->wake, &j->stopping);
        pthread_join(j->flusher, NULL);
    }
    if (j->fd >= 0) {
        if (j->policy != KD_FSYNC_NO && j->dirty && fdatasync(j->fd) < 0)
            kd_log("journal: cannot sync %s: %s", j->path, strerror(errno));
        close(j->fd);
    }
    if (j->lock_fd >= 0) close(j->lock_fd);
    kd_jindex_free(&j->live);
    kd_jbuf_free(&j->buf);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->wake);
    free(j);
}
