/* journal.c — the session journal (journal.h): its file format, the replay at open, the
 * writes and their syncs, the flusher thread (everysec syncs, rewrites).
 *
 * File: "KRONOSJ1", u64 fingerprint, u32 length + the model's description, u32 CRC-32 of
 * those three; then records: u32 payload length, u32 CRC-32 of the payload, the payload.
 * Numbers are in the host's byte order (a journal stays on its machine). Payload: u8 type,
 * u16 length + id, then by type —
 *   C: u16 + owner, form, f32 mean[6], f32 std[6], u8 column mask, u32 n, i64 ts[n],
 *      f64 column[n] for each column in the mask
 *   A: form, u8 column mask, u32 n, i64 ts[n], f64 columns
 *   T: u16 + owner
 *   G: u32 n, i32 s1[n], i32 s2[n], i32 stamp[n][5] (minute, hour, weekday, day, month)
 *   D: nothing
 * where form is u8 unix_seconds, u8 has_tz, i32 tz_offset_min. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define MAGIC          "KRONOSJ1"
#define MAGIC_LEN      8
#define FRAME          8 /* length + CRC */
#define LIVE_BUCKETS   (1 << 14)
#define MAX_RECORD     (1u << 30)
#define FINGER_CANDLES 16

/* ---- CRC-32 (IEEE, as zlib) ------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32_of(const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- the live sessions: id -> bytes of their records ------------------------------------- */

typedef struct live {
    struct live *next;
    size_t bytes;
    char id[KD_SESSION_ID_LEN + 1];
} live;

static size_t id_bucket(const char *id) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (size_t)h & (LIVE_BUCKETS - 1);
}

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
    bool dirty; /* written and not yet synced */
    live **buckets;
    int live_count;
    size_t live_bytes;
    unsigned char *buf; /* the record being encoded */
    size_t buf_len, buf_cap;
    kd_journal_stats st;
};

static live *live_find(kd_journal *j, const char *id) {
    for (live *l = j->buckets[id_bucket(id)]; l; l = l->next)
        if (strcmp(l->id, id) == 0) return l;
    return NULL;
}

static int live_add(kd_journal *j, const char *id, size_t bytes) {
    if (live_find(j, id)) return 0; /* ids are random: a repeat is a replayed duplicate */
    live *l = calloc(1, sizeof *l);
    if (!l) return -1;
    snprintf(l->id, sizeof l->id, "%s", id);
    l->bytes = bytes;
    l->next = j->buckets[id_bucket(id)];
    j->buckets[id_bucket(id)] = l;
    j->live_count++;
    j->live_bytes += bytes;
    return 0;
}

static void live_remove(kd_journal *j, const char *id) {
    for (live **p = &j->buckets[id_bucket(id)]; *p; p = &(*p)->next)
        if (strcmp((*p)->id, id) == 0) {
            live *l = *p;
            *p = l->next;
            j->live_count--;
            j->live_bytes -= l->bytes;
            free(l);
            return;
        }
}

/* Counts a record of `bytes` (frame included) for the sessions it concerns. */
static int live_note(kd_journal *j, char type, const char *id, size_t bytes) {
    live *l;
    switch (type) {
    case KD_REC_CANDLES:
    case KD_REC_TOKENS:
        return live_add(j, id, bytes);
    case KD_REC_APPEND:
    case KD_REC_GENERATED:
        if ((l = live_find(j, id))) {
            l->bytes += bytes;
            j->live_bytes += bytes;
        }
        return 0;
    case KD_REC_GONE:
        live_remove(j, id);
        return 0;
    }
    return 0;
}

/* ---- encoding ------------------------------------------------------------------------- */

static int put(kd_journal *j, const void *p, size_t n) {
    if (j->buf_len + n > j->buf_cap) {
        size_t cap = j->buf_cap ? j->buf_cap : 4096;
        while (cap < j->buf_len + n)
            cap *= 2;
        unsigned char *b = realloc(j->buf, cap);
        if (!b) return -1;
        j->buf = b;
        j->buf_cap = cap;
    }
    memcpy(j->buf + j->buf_len, p, n);
    j->buf_len += n;
    return 0;
}

#define PUT(j, type, v)                                                                            \
    do {                                                                                           \
        type v_ = (type)(v);                                                                       \
        if (put((j), &v_, sizeof v_) < 0) return -1;                                               \
    } while (0)

static int put_str(kd_journal *j, const char *s) {
    const size_t n = strlen(s);
    PUT(j, uint16_t, n);
    return put(j, s, n);
}

static int put_form(kd_journal *j, const kd_journal_record *r) {
    PUT(j, uint8_t, r->unix_seconds);
    PUT(j, uint8_t, r->has_tz);
    PUT(j, int32_t, r->tz_offset_min);
    return 0;
}

static int put_candles(kd_journal *j, const kd_journal_record *r) {
    uint8_t mask = 0;
    for (int c = 0; c < KR_D_IN; c++)
        if (r->columns[c]) mask |= (uint8_t)(1u << c);
    PUT(j, uint8_t, mask);
    PUT(j, uint32_t, r->n);
    if (put(j, r->timestamps, (size_t)r->n * sizeof(int64_t)) < 0) return -1;
    for (int c = 0; c < KR_D_IN; c++)
        if (r->columns[c] && put(j, r->columns[c], (size_t)r->n * sizeof(double)) < 0) return -1;
    return 0;
}

/* The framed record in j->buf. */
static int encode(kd_journal *j, const kd_journal_record *r) {
    j->buf_len = 0;
    uint32_t frame[2] = {0, 0};
    if (put(j, frame, sizeof frame) < 0) return -1;
    PUT(j, uint8_t, r->type);
    if (put_str(j, r->id) < 0) return -1;
    switch (r->type) {
    case KD_REC_CANDLES:
        if (put_str(j, r->owner) < 0 || put_form(j, r) < 0 || put(j, r->mean, sizeof r->mean) < 0 ||
            put(j, r->std, sizeof r->std) < 0 || put_candles(j, r) < 0)
            return -1;
        break;
    case KD_REC_APPEND:
        if (put_form(j, r) < 0 || put_candles(j, r) < 0) return -1;
        break;
    case KD_REC_TOKENS:
        if (put_str(j, r->owner) < 0) return -1;
        break;
    case KD_REC_GENERATED:
        PUT(j, uint32_t, r->n);
        if (put(j, r->s1, (size_t)r->n * sizeof(int32_t)) < 0 ||
            put(j, r->s2, (size_t)r->n * sizeof(int32_t)) < 0)
            return -1;
        for (int i = 0; i < r->n; i++) {
            const int32_t s[5] = {r->stamps[i].minute, r->stamps[i].hour, r->stamps[i].weekday,
                                  r->stamps[i].day, r->stamps[i].month};
            if (put(j, s, sizeof s) < 0) return -1;
        }
        break;
    case KD_REC_GONE:
        break;
    }
    const size_t payload = j->buf_len - FRAME;
    if (payload > MAX_RECORD) return -1;
    frame[0] = (uint32_t)payload;
    frame[1] = crc32_of(j->buf + FRAME, payload);
    memcpy(j->buf, frame, sizeof frame);
    return 0;
}

/* ---- decoding --------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    bool bad;
} cursor;

static void take(cursor *c, void *out, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        memset(out, 0, n);
        return;
    }
    memcpy(out, c->p, n);
    c->p += n;
}

static void take_str(cursor *c, char *out, size_t cap) {
    uint16_t n = 0;
    take(c, &n, sizeof n);
    if (c->bad || n >= cap || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, c->p, n);
    out[n] = '\0';
    c->p += n;
}

/* An array of n items of size `each`, copied out of the file (which need not be aligned)
 * into mem, which the caller frees. */
static void *take_array(cursor *c, size_t n, size_t each, void **mem) {
    if (c->bad || n > MAX_RECORD / each || (size_t)(c->end - c->p) < n * each) {
        c->bad = true;
        return NULL;
    }
    void *a = malloc(n > 0 ? n * each : 1);
    if (!a) {
        c->bad = true;
        return NULL;
    }
    memcpy(a, c->p, n * each);
    c->p += n * each;
    *mem = a;
    return a;
}

typedef struct {
    void *mem[KR_D_IN + 4];
} decoded;

static void decoded_free(decoded *d) {
    for (size_t i = 0; i < sizeof d->mem / sizeof d->mem[0]; i++)
        free(d->mem[i]);
}

static void take_form(cursor *c, kd_journal_record *r) {
    uint8_t u = 0, tz = 0;
    int32_t off = 0;
    take(c, &u, 1);
    take(c, &tz, 1);
    take(c, &off, sizeof off);
    r->unix_seconds = u;
    r->has_tz = tz;
    r->tz_offset_min = off;
}

static void take_candles(cursor *c, kd_journal_record *r, decoded *d) {
    uint8_t mask = 0;
    uint32_t n = 0;
    take(c, &mask, 1);
    take(c, &n, sizeof n);
    if (n > INT_MAX || (mask & 0xF) != 0xF) c->bad = true; /* open..close always */
    r->n = (int)n;
    r->timestamps = take_array(c, n, sizeof(int64_t), &d->mem[0]);
    for (int k = 0; k < KR_D_IN; k++)
        r->columns[k] = mask & (1u << k) ? take_array(c, n, sizeof(double), &d->mem[1 + k]) : NULL;
}

/* The type and id of a payload; false if it has none. */
static bool peek(const unsigned char *p, size_t n, char *type, char *id) {
    cursor c = {p, p + n, false};
    uint8_t t = 0;
    take(&c, &t, 1);
    take_str(&c, id, KD_SESSION_ID_LEN + 1);
    *type = (char)t;
    return !c.bad && strchr("CATGD", t) && t != 0;
}

/* The whole record; -1 if it is malformed (d frees its arrays either way). */
static int decode(const unsigned char *p, size_t n, kd_journal_record *r, decoded *d) {
    cursor c = {p, p + n, false};
    uint8_t t = 0;
    memset(r, 0, sizeof *r);
    take(&c, &t, 1);
    r->type = (kd_record_type)t;
    take_str(&c, r->id, sizeof r->id);
    switch (t) {
    case KD_REC_CANDLES:
        take_str(&c, r->owner, sizeof r->owner);
        take_form(&c, r);
        take(&c, r->mean, sizeof r->mean);
        take(&c, r->std, sizeof r->std);
        take_candles(&c, r, d);
        break;
    case KD_REC_APPEND:
        take_form(&c, r);
        take_candles(&c, r, d);
        break;
    case KD_REC_TOKENS:
        take_str(&c, r->owner, sizeof r->owner);
        break;
    case KD_REC_GENERATED: {
        uint32_t k = 0;
        take(&c, &k, sizeof k);
        if (k > INT_MAX) c.bad = true;
        r->n = (int)k;
        r->s1 = take_array(&c, k, sizeof(int32_t), &d->mem[0]);
        r->s2 = take_array(&c, k, sizeof(int32_t), &d->mem[1]);
        const int32_t *s = take_array(&c, k, 5 * sizeof(int32_t), &d->mem[2]);
        kr_stamp *stamps = c.bad ? NULL : malloc((k ? k : 1) * sizeof *stamps);
        if (!c.bad && !stamps) c.bad = true;
        for (uint32_t i = 0; stamps && i < k; i++)
            stamps[i] = (kr_stamp){.minute = s[5 * i],
                                   .hour = s[5 * i + 1],
                                   .weekday = s[5 * i + 2],
                                   .day = s[5 * i + 3],
                                   .month = s[5 * i + 4]};
        d->mem[3] = stamps;
        r->stamps = stamps;
        break;
    }
    case KD_REC_GONE:
        break;
    default:
        c.bad = true;
    }
    return c.bad || c.p != c.end ? -1 : 0;
}

/* ---- file helpers ---------------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n, off_t at) {
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

static int sync_dir(const char *dir) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int rc = fsync(fd);
    close(fd);
    return rc;
}

/* The header for this model, in j->buf. */
static int encode_header(kd_journal *j, uint64_t fp, const char *model) {
    j->buf_len = 0;
    const uint32_t n = (uint32_t)strlen(model);
    if (put(j, MAGIC, MAGIC_LEN) < 0 || put(j, &fp, sizeof fp) < 0 || put(j, &n, sizeof n) < 0 ||
        put(j, model, n) < 0)
        return -1;
    const uint32_t crc = crc32_of(j->buf + MAGIC_LEN, j->buf_len - MAGIC_LEN);
    return put(j, &crc, sizeof crc);
}

/* Checks the header at the start of the file: 0 with *end after it, 1 when the file is too
 * short to hold one (a crash while it was created), -1 with err. */
static int check_header(const unsigned char *p, size_t size, const kd_journal_config *cfg,
                        size_t *end, char *err, size_t errlen) {
    const size_t fixed = MAGIC_LEN + 8 + 4;
    if (size >= MAGIC_LEN && memcmp(p, MAGIC, MAGIC_LEN) != 0) {
        snprintf(err, errlen, "%s/journal is not a kronosd session journal (no KRONOSJ1 header)",
                 cfg->dir);
        return -1;
    }
    if (size < fixed) return 1;
    uint64_t fp;
    uint32_t n, crc;
    memcpy(&fp, p + MAGIC_LEN, 8);
    memcpy(&n, p + MAGIC_LEN + 8, 4);
    if (n > 4096 || size < fixed + n + 4) return size < fixed + 4096 + 4 ? 1 : -1;
    memcpy(&crc, p + fixed + n, 4);
    if (crc != crc32_of(p + MAGIC_LEN, fixed - MAGIC_LEN + n)) {
        snprintf(err, errlen, "%s/journal: its header fails its checksum; move the file away",
                 cfg->dir);
        return -1;
    }
    if (fp != cfg->fingerprint) {
        snprintf(err, errlen,
                 "%s/journal was written for another model (%.*s, fingerprint %016llx), not "
                 "this one (%s, fingerprint %016llx): its sessions cannot be restored. Start "
                 "with the model it was written for, or move the file away to start empty",
                 cfg->dir, (int)n, (const char *)p + fixed, (unsigned long long)fp, cfg->model,
                 (unsigned long long)cfg->fingerprint);
        return -1;
    }
    *end = fixed + n + 4;
    return 0;
}

/* The end of the last whole record from `from`, counting records; *why says why it stopped
 * short of size (NULL: it did not). */
static size_t scan(const unsigned char *p, size_t from, size_t size, unsigned long long *records,
                   const char **why, kd_journal *j) {
    size_t off = from;
    *why = NULL;
    while (off < size) {
        uint32_t len, crc;
        char type, id[KD_SESSION_ID_LEN + 1];
        if (size - off < FRAME) {
            *why = "a record's frame cut short";
            break;
        }
        memcpy(&len, p + off, 4);
        memcpy(&crc, p + off + 4, 4);
        if (len == 0 || len > size - off - FRAME) {
            *why = "a record cut short";
            break;
        }
        if (crc32_of(p + off + FRAME, len) != crc) {
            *why = "a record failing its checksum";
            break;
        }
        if (!peek(p + off + FRAME, len, &type, id)) {
            *why = "a record of no known type";
            break;
        }
        if (j && live_note(j, type, id, FRAME + len) < 0) {
            *why = "out of memory";
            break;
        }
        (*records)++;
        off += FRAME + len;
    }
    return off;
}

/* ---- open: check, cut, replay ------------------------------------------------------------ */

static void *flusher_main(void *arg);

static int open_paths(kd_journal *j, const char *dir, char *err, size_t errlen) {
    if (snprintf(j->dir, sizeof j->dir, "%s", dir) >= (int)sizeof j->dir ||
        snprintf(j->path, sizeof j->path, "%s/journal", dir) >= (int)sizeof j->path ||
        snprintf(j->tmp_path, sizeof j->tmp_path, "%s/journal.rewrite", dir) >=
            (int)sizeof j->tmp_path) {
        snprintf(err, errlen, "state-dir %s: path too long", dir);
        return -1;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "state-dir %s: cannot create it: %s", dir, strerror(errno));
        return -1;
    }
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    j->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lock_fd < 0) {
        snprintf(err, errlen, "state-dir %s: cannot open %s: %s", dir, lock, strerror(errno));
        return -1;
    }
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errlen,
                 "state-dir %s is in use by another kronosd process (%s is locked); give each "
                 "process its own state-dir",
                 dir, lock);
        return -1;
    }
    j->fd = open(j->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd < 0) {
        snprintf(err, errlen, "state-dir %s: cannot open %s: %s", dir, j->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A new file: the header alone, on the disk. */
static int start_file(kd_journal *j, const kd_journal_config *cfg, char *err, size_t errlen) {
    if (encode_header(j, cfg->fingerprint, cfg->model) < 0 || ftruncate(j->fd, 0) < 0 ||
        write_all(j->fd, j->buf, j->buf_len, 0) < 0 || fdatasync(j->fd) < 0 ||
        sync_dir(j->dir) < 0) {
        snprintf(err, errlen, "%s: cannot write the header: %s", j->path, strerror(errno));
        return -1;
    }
    j->header_bytes = j->size = j->buf_len;
    return 0;
}

typedef struct {
    char id[KD_SESSION_ID_LEN + 1];
} failed_id;

/* Replays the records of live sessions up to end; the sessions whose replay failed are in
 * *failed (malloc'd, *n_failed). */
static int replay_all(kd_journal *j, const unsigned char *p, size_t end,
                      int (*replay)(void *ctx, const kd_journal_record *rec), void *ctx,
                      failed_id **failed, int *n_failed) {
    int cap = 0;
    for (size_t off = j->header_bytes; off < end;) {
        uint32_t len;
        memcpy(&len, p + off, 4);
        const unsigned char *payload = p + off + FRAME;
        off += FRAME + len;
        char type, id[KD_SESSION_ID_LEN + 1];
        peek(payload, len, &type, id);
        if (type == KD_REC_GONE || !live_find(j, id)) continue;
        kd_journal_record r;
        decoded d = {{0}};
        const int bad = decode(payload, len, &r, &d);
        const int rc = bad ? -1 : replay(ctx, &r);
        decoded_free(&d);
        if (bad) kd_log("journal: a record of session %s is malformed; the session is dropped", id);
        if (rc == 0) continue;
        if (*n_failed == cap) {
            cap = cap ? 2 * cap : 16;
            failed_id *f = realloc(*failed, (size_t)cap * sizeof *f);
            if (!f) return -1;
            *failed = f;
        }
        snprintf((*failed)[(*n_failed)++].id, KD_SESSION_ID_LEN + 1, "%s", id);
        live_remove(j, id);
    }
    return 0;
}

static int load_file(kd_journal *j, const kd_journal_config *cfg,
                     int (*replay)(void *ctx, const kd_journal_record *rec), void *ctx, char *err,
                     size_t errlen) {
    struct stat sb;
    if (fstat(j->fd, &sb) < 0) {
        snprintf(err, errlen, "%s: %s", j->path, strerror(errno));
        return -1;
    }
    const size_t size = (size_t)sb.st_size;
    if (size == 0) return start_file(j, cfg, err, errlen);
    unsigned char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, j->fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map %zu bytes: %s", j->path, size, strerror(errno));
        return -1;
    }
    size_t hdr = 0;
    const int h = check_header(p, size, cfg, &hdr, err, errlen);
    if (h != 0) {
        munmap(p, size);
        if (h < 0) return -1;
        kd_log("journal: %s holds %zu bytes, less than a header (a crash while it was "
               "created): starting it afresh",
               j->path, size);
        return start_file(j, cfg, err, errlen);
    }
    j->header_bytes = hdr;
    const char *why;
    const size_t end = scan(p, hdr, size, &j->st.records, &why, j);
    failed_id *failed = NULL;
    int n_failed = 0;
    const int live_at_end = j->live_count;
    const int rc = replay_all(j, p, end, replay, ctx, &failed, &n_failed);
    munmap(p, size);
    if (rc < 0) {
        free(failed);
        snprintf(err, errlen, "%s: out of memory while replaying", j->path);
        return -1;
    }
    if (end < size) {
        kd_log("journal: %s: cut %zu bytes at offset %zu (%s; a crash mid-write): what they "
               "held is lost, %llu whole records before them are kept",
               j->path, size - end, end, why, j->st.records);
        if (ftruncate(j->fd, (off_t)end) < 0 || fdatasync(j->fd) < 0) {
            free(failed);
            snprintf(err, errlen, "%s: cannot cut the tail: %s", j->path, strerror(errno));
            return -1;
        }
    }
    j->size = end;
    j->st.restored = (unsigned long long)(live_at_end - n_failed);
    j->st.dropped = (unsigned long long)n_failed;
    for (int i = 0; i < n_failed; i++) {
        const kd_journal_record gone = {.type = KD_REC_GONE};
        kd_journal_record g = gone;
        snprintf(g.id, sizeof g.id, "%s", failed[i].id);
        char e[256];
        if (kd_journal_write(j, &g, e, sizeof e) < 0) kd_log("journal: %s", e);
    }
    free(failed);
    return 0;
}

int kd_fsync_policy_parse(const char *s) {
    if (strcmp(s, "always") == 0) return KD_FSYNC_ALWAYS;
    if (strcmp(s, "everysec") == 0) return KD_FSYNC_EVERYSEC;
    if (strcmp(s, "no") == 0) return KD_FSYNC_NO;
    return -1;
}

kd_journal *kd_journal_open(const kd_journal_config *cfg,
                            int (*replay)(void *ctx, const kd_journal_record *rec), void *ctx,
                            char *err, size_t errlen) {
    kd_journal *j = calloc(1, sizeof *j);
    if (j) j->buckets = calloc(LIVE_BUCKETS, sizeof *j->buckets);
    if (!j || !j->buckets) {
        free(j);
        snprintf(err, errlen, "journal: out of memory");
        return NULL;
    }
    j->fd = j->lock_fd = -1;
    j->policy = cfg->fsync;
    j->rewrite_min = cfg->rewrite_min;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (open_paths(j, cfg->dir, err, errlen) < 0 ||
        load_file(j, cfg, replay, ctx, err, errlen) < 0) {
        kd_journal_close(j);
        return NULL;
    }
    if (pthread_create(&j->flusher, NULL, flusher_main, j) != 0) {
        snprintf(err, errlen, "journal: cannot start its thread");
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
    if (encode(j, rec) < 0) {
        j->st.errors++;
        snprintf(err, errlen, "journal: out of memory for a record of session %s", rec->id);
        return -1;
    }
    if (write_all(j->fd, j->buf, j->buf_len, (off_t)j->size) < 0) {
        const int e = errno;
        if (ftruncate(j->fd, (off_t)j->size) < 0) { /* the file keeps whole records only */
        }
        j->st.errors++;
        snprintf(err, errlen, "journal: cannot write %s: %s", j->path, strerror(e));
        return -1;
    }
    j->size += j->buf_len;
    j->dirty = true;
    j->st.records++;
    if (live_note(j, (char)rec->type, rec->id, j->buf_len) < 0) {
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

void kd_journal_gone(kd_journal *j, const char *id) {
    kd_journal_record r = {.type = KD_REC_GONE};
    char err[512];
    snprintf(r.id, sizeof r.id, "%s", id);
    pthread_mutex_lock(&j->mu);
    const int rc = append_record(j, &r, err, sizeof err);
    pthread_mutex_unlock(&j->mu);
    if (rc < 0) kd_log("%s (session %s will come back after a restart)", err, id);
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
    int rc = fd < 0 ? -1 : write_all(fd, p, j->header_bytes, 0);
    size_t out = j->header_bytes;
    for (size_t off = j->header_bytes; rc == 0 && off < j->size;) {
        uint32_t len;
        memcpy(&len, p + off, 4);
        char type, id[KD_SESSION_ID_LEN + 1];
        peek(p + off + FRAME, len, &type, id);
        if (type != KD_REC_GONE && live_find(j, id)) {
            rc = write_all(fd, p + off, FRAME + len, (off_t)out);
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
    if (sync_dir(j->dir) < 0) kd_log("journal: sync of %s: %s", j->dir, strerror(errno));
    close(j->fd);
    j->fd = fd;
    kd_log("journal: rewritten with the records of %d live sessions: %zu bytes, was %zu",
           j->live_count, out, j->size);
    j->size = out;
    j->dirty = false;
    j->st.rewrites++;
    return 0;
}

static bool needs_rewrite(const kd_journal *j) {
    const size_t live = j->header_bytes + j->live_bytes;
    return j->size > j->rewrite_min && j->size > 2 * live;
}

static void *flusher_main(void *arg) {
    kd_journal *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&j->wake, &j->mu, &ts);
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
    st->live_bytes = j->header_bytes + j->live_bytes;
    st->live_sessions = j->live_count;
    pthread_mutex_unlock(&j->mu);
}

void kd_journal_close(kd_journal *j) {
    if (!j) return;
    if (j->flusher_started) {
        pthread_mutex_lock(&j->mu);
        j->stopping = true;
        pthread_cond_signal(&j->wake);
        pthread_mutex_unlock(&j->mu);
        pthread_join(j->flusher, NULL);
    }
    if (j->fd >= 0) {
        if (j->policy != KD_FSYNC_NO && j->dirty && fdatasync(j->fd) < 0)
            kd_log("journal: cannot sync %s: %s", j->path, strerror(errno));
        close(j->fd);
    }
    if (j->lock_fd >= 0) close(j->lock_fd);
    for (size_t b = 0; j->buckets && b < LIVE_BUCKETS; b++)
        for (live *l = j->buckets[b], *next; l; l = next) {
            next = l->next;
            free(l);
        }
    free(j->buckets);
    free(j->buf);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->wake);
    free(j);
}

/* ---- the model's fingerprint ------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

int kd_model_fingerprint(const kr_model *m, const char *name, uint64_t *fp, char *desc,
                         size_t desclen, kr_error *err) {
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
    const kr_predictor_config *pc = kr_model_predictor_config(m);
    const int shape[] = {tc->d_in,
                         tc->d_model,
                         tc->n_heads,
                         tc->ff_dim,
                         tc->n_enc_layers,
                         tc->n_dec_layers,
                         tc->s1_bits,
                         tc->s2_bits,
                         pc->d_model,
                         pc->n_layers,
                         pc->n_heads,
                         pc->ff_dim,
                         pc->s1_bits,
                         pc->s2_bits,
                         pc->learn_te,
                         pc->kv_shift,
                         kr_model_max_context(m)};
    uint64_t h = fnv(1469598103934665603ULL, shape, sizeof shape);
    /* what the weights compute on a fixed input: any changed weight shows */
    enum { N = FINGER_CANDLES };
    float x[N * KR_D_IN];
    int32_t s1[N], s2[N];
    kr_stamp stamps[N];
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < KR_D_IN; c++)
            x[i * KR_D_IN + c] = (float)(2.0 * sin(0.7 * i + c));
        stamps[i] = kr_stamp_from_wall(1700000000LL + 300LL * i);
    }
    const size_t n1 = (size_t)1 << pc->s1_bits, n2 = (size_t)1 << pc->s2_bits;
    float *logits = malloc(n1 * sizeof *logits), *l2 = malloc(n2 * sizeof *l2);
    float *context = malloc((size_t)N * (size_t)pc->d_model * sizeof *context);
    float *back = malloc(sizeof x);
    int rc = -1;
    if (!logits || !l2 || !context || !back)
        kr_fail_code(err, KR_E_NO_MEMORY, "fingerprint: out of memory");
    else
        rc = kr_tokenizer_encode(m, x, N, s1, s2, err) ||
             kr_tokenizer_decode(m, s1, s2, N, back, err) ||
             kr_predictor_window(m, s1, s2, stamps, N, logits, context, err) ||
             kr_predictor_s2_logits(m, context, N, s1[N - 1], l2, err);
    if (rc == 0) {
        h = fnv(h, s1, sizeof s1);
        h = fnv(h, s2, sizeof s2);
        h = fnv(h, back, sizeof x);
        h = fnv(h, logits, n1 * sizeof *logits);
        h = fnv(h, l2, n2 * sizeof *l2);
    }
    free(logits);
    free(l2);
    free(context);
    free(back);
    if (rc) return -1;
    *fp = h;
    snprintf(desc, desclen, "%s: predictor d_model %d, %d layers, max_context %d", name,
             pc->d_model, pc->n_layers, kr_model_max_context(m));
    return 0;
}
