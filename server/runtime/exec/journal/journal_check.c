/* journal_check.c — the journal checked and repaired offline (journal_check.h). */
#include "journal_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"
#include "journal_scan.h"

/* The header's fixed part: magic, fingerprint, description length (journal_format.h). */
#define HEADER_FIXED 20

typedef struct {
    const kd_journal_check_opts *o;
    char path[PATH_MAX];
    unsigned char *p;
    size_t size;
    kd_journal_header h;
    bool header_ok;
    char header_why[512];
    size_t records_from; /* where the records start */
    kd_jscan scan;
    int lock_fd;
} checker;

static int fail_errno(char *err, size_t errlen, const char *what, const char *path) {
    snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
    return -1;
}

/* The file mapped and its header read; where the records start even when it is damaged
 * (the first whole record past the header's fixed part). */
static int read_journal(checker *c, char *err, size_t errlen) {
    const int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail_errno(err, errlen, "cannot open", c->path);
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        close(fd);
        return fail_errno(err, errlen, "cannot read", c->path);
    }
    c->size = (size_t)sb.st_size;
    c->p = c->size ? mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (c->p == MAP_FAILED) {
        c->p = NULL;
        return fail_errno(err, errlen, "cannot map", c->path);
    }
    kd_jbuf expected = {0};
    if (c->o->m && kd_journal_encode_header(&expected, c->o->fingerprint, c->o->model) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const kd_header_status hs =
        kd_journal_read_header(c->p ? c->p : (const unsigned char *)"", c->size, &expected, &c->h,
                               c->header_why, sizeof c->header_why);
    kd_jbuf_free(&expected);
    c->header_ok = hs == KD_HEADER_OK;
    if (hs == KD_HEADER_UNFINISHED)
        snprintf(c->header_why, sizeof c->header_why,
                 "the file is the start of a header (a crash while it "
                 "was created): it holds no session");
    c->records_from = c->header_ok ? c->h.end : kd_journal_next_frame(c->p, HEADER_FIXED, c->size);
    return kd_journal_scan(c->p, c->records_from, c->size, c->o->m, &c->scan, err, errlen);
}

typedef struct {
    FILE *out;
    int live, touched;
} tally;

static void count(void *ctx, const kd_jentry *e) {
    tally *t = ctx;
    t->live += e->live;
    if (e->touched && e->rules.kind != KD_RULES_GONE) {
        t->touched++;
        fprintf(t->out, "  session %s: dropped by a repair\n", e->id);
    }
}

/* The report; the number of problems (the header, a wrong model, the scan's). */
static int report(checker *c) {
    FILE *out = c->o->out;
    int problems = c->scan.n_problems;
    fprintf(out, "journal %s: %zu bytes\n", c->path, c->size);
    if (!c->header_ok) {
        problems++;
        fprintf(out, "problem: the header: %s\n", c->header_why);
    } else {
        fprintf(out, "header: %s, fingerprint %016llx\n", c->h.model,
                (unsigned long long)c->h.fingerprint);
        /* not a problem: kronosd serve judges each session by the model its record names */
        if (c->o->m && c->h.fingerprint != c->o->fingerprint)
            fprintf(out,
                    "note: started with another default model than --model's (%s, fingerprint "
                    "%016llx); each session is restored on the model its record names\n",
                    c->o->model, (unsigned long long)c->o->fingerprint);
    }
    for (int i = 0; i < c->scan.n_problems; i++) {
        const kd_jproblem *pr = &c->scan.problems[i];
        fprintf(out, "problem: %s; %s%s\n", pr->what,
                pr->id[0] ? "it concerns session "
                          : "its session cannot be read: it concerns "
                            "every session live there",
                pr->id);
    }
    if (c->scan.torn)
        fprintf(out, "a last write cut short (%s): %zu bytes at offset %zu, cut at start-up\n",
                c->scan.torn_why, c->size - c->scan.end, c->scan.end);
    tally t = {out, 0, 0};
    kd_jindex_each(&c->scan.index, false, count, &t);
    fprintf(out, "%d live session%s, %d touched by %d problem%s; %llu whole records\n", t.live,
            t.live == 1 ? "" : "s", t.touched, problems, problems == 1 ? "" : "s", c->scan.records);
    if (!c->o->m) fprintf(out, "(without --model the tokens' ranges were not checked)\n");
    return problems;
}

/* The new journal: the header (this one, or --model's when it is damaged), then every whole
 * record of the sessions no problem touches, in order; written beside the old one, which is
 * kept under another name, then renamed over it. */
static int repair(checker *c, char *err, size_t errlen) {
    const kd_journal_check_opts *o = c->o;
    if (!c->header_ok && !o->m) {
        snprintf(err, errlen,
                 "%s: the header is damaged (%s): repair needs --model DIR to write "
                 "a new one",
                 c->path, c->header_why);
        return -1;
    }
    char tmp[PATH_MAX + 16], kept[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.repair", c->path);
    snprintf(kept, sizeof kept, "%s.damaged-%lld", c->path, (long long)time(NULL));
    const int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return fail_errno(err, errlen, "cannot create", tmp);
    kd_jbuf header = {0};
    int rc = 0;
    size_t out = 0;
    if (c->header_ok) {
        rc = kd_journal_write_all(fd, c->p, c->h.end, 0);
        out = c->h.end;
    } else if ((rc = kd_journal_encode_header(&header, o->fingerprint, o->model)) == 0) {
        rc = kd_journal_write_all(fd, header.p, header.len, 0);
        out = header.len;
    }
    kd_jbuf_free(&header);
    unsigned long long kept_records = 0;
    /* whole records only: a damaged region is passed over to the next one */
    for (size_t off = kd_journal_next_frame(c->p, c->records_from, c->size);
         rc == 0 && off < c->scan.end;) {
        const uint32_t len = kd_journal_frame_at(c->p, off, c->size);
        char type, id[KD_SESSION_ID_LEN + 1];
        kd_journal_peek(c->p + off + KD_JOURNAL_FRAME, len, &type, id);
        const kd_jentry *e = kd_jindex_find(&c->scan.index, id);
        if (e && !e->touched) {
            rc = kd_journal_write_all(fd, c->p + off, KD_JOURNAL_FRAME + len, (off_t)out);
            out += KD_JOURNAL_FRAME + len;
            kept_records++;
        }
        off = kd_journal_next_frame(c->p, off + KD_JOURNAL_FRAME + len, c->size);
    }
    if (rc == 0) rc = fdatasync(fd);
    int saved = rc < 0 ? errno : 0;
    close(fd);
    /* a name of its own, however many repairs this second */
    for (int k = 1; rc == 0 && link(c->path, kept) < 0; k++) {
        if (errno != EEXIST || k > 99) {
            saved = errno;
            rc = -1;
            break;
        }
        snprintf(kept, sizeof kept, "%s.damaged-%lld-%d", c->path, (long long)time(NULL), k);
    }
    if (rc == 0 && rename(tmp, c->path) < 0) {
        saved = errno;
        rc = -1;
    }
    if (rc < 0) {
        errno = saved;
        fail_errno(err, errlen, "cannot write the repaired journal beside", c->path);
        unlink(tmp);
        return -1;
    }
    kd_journal_sync_dir(o->dir);
    fprintf(o->out, "repaired: %s now holds %llu records (%zu bytes); the original is %s\n",
            c->path, kept_records, out, kept);
    return 0;
}

int kd_journal_check(const kd_journal_check_opts *o, char *err, size_t errlen) {
    checker c = {.o = o, .lock_fd = -1};
    if (snprintf(c.path, sizeof c.path, "%s/journal", o->dir) >= (int)sizeof c.path) {
        snprintf(err, errlen, "state-dir %.200s...: the path is too long", o->dir);
        return -1;
    }
    int rc =
        (c.lock_fd = kd_journal_lock(o->dir, err, errlen)) < 0 ? -1 : read_journal(&c, err, errlen);
    if (rc == 0) {
        const int problems = report(&c);
        rc = !problems ? 0 : !o->repair ? 1 : repair(&c, err, errlen);
        if (problems && !o->repair)
            fprintf(o->out,
                    "kronosd journal repair %s drops the touched sessions and keeps the "
                    "original file beside the new one\n",
                    o->dir);
    }
    if (c.p) munmap(c.p, c.size);
    kd_jscan_free(&c.scan);
    if (c.lock_fd >= 0) close(c.lock_fd);
    return rc;
}
