/* journal_scan.c — the index of a journal's sessions and the scan of its records
 * (journal_scan.h). */
#include "journal_scan.h"

#include "hash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS (1 << 14)

/* ---- the index -------------------------------------------------------------------------- */

static size_t bucket_of(const char *id) {
    return (size_t)kd_hash(KD_HASH_SEED, id, strlen(id)) & (BUCKETS - 1);
}

int kd_jindex_init(kd_jindex *x) {
    *x = (kd_jindex){0};
    x->buckets = calloc(BUCKETS, sizeof *x->buckets);
    return x->buckets ? 0 : -1;
}

void kd_jindex_free(kd_jindex *x) {
    for (size_t b = 0; x->buckets && b < BUCKETS; b++)
        for (kd_jentry *e = x->buckets[b], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(x->buckets);
    *x = (kd_jindex){0};
}

kd_jentry *kd_jindex_find(const kd_jindex *x, const char *id) {
    for (kd_jentry *e = x->buckets[bucket_of(id)]; e; e = e->next)
        if (strcmp(e->id, id) == 0) return e;
    return NULL;
}

kd_jentry *kd_jindex_get(kd_jindex *x, const char *id) {
    kd_jentry *e = kd_jindex_find(x, id);
    if (e) return e;
    if (!(e = calloc(1, sizeof *e))) return NULL;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->next = x->buckets[bucket_of(id)];
    x->buckets[bucket_of(id)] = e;
    return e;
}

static void unlink_entry(kd_jindex *x, kd_jentry *gone) {
    for (kd_jentry **p = &x->buckets[bucket_of(gone->id)]; *p; p = &(*p)->next)
        if (*p == gone) {
            *p = gone->next;
            free(gone);
            return;
        }
}

int kd_jindex_note(kd_jindex *x, char type, const char *id, size_t bytes, bool keep_gone) {
    kd_jentry *e = type == KD_REC_CANDLES || type == KD_REC_TOKENS ? kd_jindex_get(x, id)
                                                                   : kd_jindex_find(x, id);
    if (!e) return type == KD_REC_CANDLES || type == KD_REC_TOKENS ? -1 : 0;
    switch (type) {
    case KD_REC_CANDLES:
    case KD_REC_TOKENS:
        if (e->live) break; /* a second creation: the rules tell */
        e->live = true;
        e->bytes = bytes;
        x->live_count++;
        x->live_bytes += bytes;
        break;
    case KD_REC_APPEND:
    case KD_REC_GENERATED:
    case KD_REC_CALIB:
        if (!e->live) break;
        e->bytes += bytes;
        x->live_bytes += bytes;
        break;
    case KD_REC_GONE:
        if (e->live) {
            e->live = false;
            x->live_count--;
            x->live_bytes -= e->bytes;
        }
        if (!keep_gone) unlink_entry(x, e);
        break;
    }
    return 0;
}

void kd_jindex_prune(kd_jindex *x) {
    for (size_t b = 0; b < BUCKETS; b++)
        for (kd_jentry **p = &x->buckets[b]; *p;) {
            kd_jentry *e = *p;
            if (e->live) {
                p = &e->next;
                continue;
            }
            *p = e->next;
            free(e);
        }
}

void kd_jindex_each(const kd_jindex *x, bool live_only, void (*fn)(void *ctx, const kd_jentry *e),
                    void *ctx) {
    for (size_t b = 0; b < BUCKETS; b++)
        for (const kd_jentry *e = x->buckets[b]; e; e = e->next)
            if (e->live || !live_only) fn(ctx, e);
}

/* ---- the scan ------------------------------------------------------------------------- */

static kd_jproblem *add_problem(kd_jscan *s, kd_jproblem_kind kind, size_t off, size_t bytes,
                                char type, const char *id) {
    kd_jproblem *grown = realloc(s->problems, (size_t)(s->n_problems + 1) * sizeof *grown);
    if (!grown) return NULL;
    s->problems = grown;
    kd_jproblem *p = &grown[s->n_problems++];
    *p = (kd_jproblem){.kind = kind, .offset = off, .bytes = bytes, .type = type};
    snprintf(p->id, sizeof p->id, "%s", id);
    return p;
}

/* Marks every live session as touched (damage whose session cannot be read). */
static void touch_all(kd_jindex *x) {
    for (size_t b = 0; b < BUCKETS; b++)
        for (kd_jentry *e = x->buckets[b]; e; e = e->next)
            if (e->live) e->touched = true;
}

/* The id a damaged payload seems to name (its type byte and id read as they are, whatever
 * the checksum says); false when even its length is out of bounds. */
static bool raw_id(const unsigned char *payload, size_t n, char *type, char *id) {
    uint16_t len;
    if (n < 3) return false;
    memcpy(&len, payload + 1, 2);
    if (len == 0 || len > KD_SESSION_ID_LEN || n - 3 < len) return false;
    *type = (char)payload[0];
    memcpy(id, payload + 3, len);
    id[len] = '\0';
    return strlen(id) == len;
}

typedef struct {
    const char *id;
    const kd_jentry *match;
    int matches;
} near_ids;

/* A live session whose id differs from the damaged one's in one or two bytes: ids are
 * random, so that is the record's own session, as long as only one is that near. */
static void near_id(void *ctx, const kd_jentry *e) {
    near_ids *n = ctx;
    if (strlen(e->id) != strlen(n->id)) return;
    int diff = 0;
    for (const char *a = e->id, *b = n->id; *a; a++, b++)
        diff += *a != *b;
    if (diff <= 2) {
        n->match = e;
        n->matches++;
    }
}

/* Whether a whole record from q on names id: then a damaged record naming it was its
 * session's (its creation, most likely, with its type byte hit). */
static bool named_later(const unsigned char *p, size_t q, size_t size, const char *id) {
    for (size_t off = kd_journal_next_frame(p, q, size); off < size;) {
        const uint32_t len = kd_journal_frame_at(p, off, size);
        char type, other[KD_SESSION_ID_LEN + 1];
        if (kd_journal_peek(p + off + KD_JOURNAL_FRAME, len, &type, other) &&
            strcmp(other, id) == 0)
            return true;
        off = kd_journal_next_frame(p, off + KD_JOURNAL_FRAME + len, size);
    }
    return false;
}

/* Damage in [off, q): attributed to the live session its id names (or nearly names), or to
 * the session a damaged creation names or later records name (they then break the rules
 * too), else to every live session. */
static int damaged(kd_jscan *s, const unsigned char *p, size_t off, size_t q, size_t size) {
    char type = 0, id[KD_SESSION_ID_LEN + 1] = "";
    const size_t at = off + KD_JOURNAL_FRAME;
    if (at >= size || !raw_id(p + at, (q > at ? q : size) - at, &type, id)) {
        type = 0;
        id[0] = '\0';
    }
    const kd_jentry *known = id[0] ? kd_jindex_find(&s->index, id) : NULL;
    if (id[0] && !(known && known->live)) {
        near_ids n = {id, NULL, 0};
        kd_jindex_each(&s->index, true, near_id, &n);
        if (n.matches == 1)
            snprintf(id, sizeof id, "%s", n.match->id);
        else if (type != KD_REC_CANDLES && type != KD_REC_TOKENS && !named_later(p, q, size, id))
            id[0] = '\0';
    }
    kd_jproblem *pr = add_problem(s, KD_JPROBLEM_DAMAGED, off, q - off, type, id);
    if (!pr) return -1;
    uint32_t len = 0, crc = 0;
    if (size - off >= KD_JOURNAL_FRAME) {
        memcpy(&len, p + off, 4);
        memcpy(&crc, p + off + 4, 4);
    }
    snprintf(pr->what, sizeof pr->what,
             "%zu damaged bytes at offset %zu (%s), and a whole record after them: damage, not a "
             "write cut short by a crash",
             q - off, off,
             len == 0 || len > size - off - KD_JOURNAL_FRAME ? "a record's length that does not fit"
                                                             : "a record failing its checksum");
    if (id[0]) {
        kd_jentry *e = kd_jindex_get(&s->index, id);
        if (!e) return -1;
        e->touched = true;
    } else {
        touch_all(&s->index);
    }
    return 0;
}

/* A whole record: decoded, checked against its session's rules, counted. */
static int whole(kd_jscan *s, const unsigned char *p, size_t off, uint32_t len, const kr_model *m) {
    kd_journal_record r;
    kd_journal_decoded d = {{0}};
    kr_error e = {0};
    char type, id[KD_SESSION_ID_LEN + 1];
    kd_journal_peek(p + off + KD_JOURNAL_FRAME, len, &type, id);
    kd_jentry *entry = kd_jindex_get(&s->index, id);
    if (!entry) return -1;
    int bad = kd_journal_decode(p + off + KD_JOURNAL_FRAME, len, &r, &d);
    if (bad)
        snprintf(e.msg, sizeof e.msg, "its payload is malformed");
    else
        bad = kd_journal_rules_apply(&entry->rules, &r, m, &e);
    kd_journal_decoded_free(&d);
    if (bad) {
        kd_jproblem *pr =
            add_problem(s, KD_JPROBLEM_RULE, off, KD_JOURNAL_FRAME + (size_t)len, type, id);
        if (!pr) return -1;
        snprintf(pr->what, sizeof pr->what, "the record at offset %zu ('%c', session %s): %.200s",
                 off, type, id, e.msg);
        entry->touched = true;
        return 0;
    }
    s->records++;
    return kd_jindex_note(&s->index, type, id, KD_JOURNAL_FRAME + (size_t)len, true);
}

int kd_journal_scan(const unsigned char *p, size_t from, size_t size, const kr_model *m,
                    kd_jscan *out, char *err, size_t errlen) {
    *out = (kd_jscan){0};
    if (kd_jindex_init(&out->index) < 0) goto no_memory;
    size_t off = from;
    while (off < size) {
        const uint32_t len = kd_journal_frame_at(p, off, size);
        if (len) {
            if (whole(out, p, off, len, m) < 0) goto no_memory;
            off += KD_JOURNAL_FRAME + len;
            continue;
        }
        const size_t q = kd_journal_next_frame(p, off + 1, size);
        if (q == size) { /* nothing whole after it: the last write, cut short */
            out->torn = true;
            uint32_t n = 0;
            if (size - off >= 4) memcpy(&n, p + off, 4);
            out->torn_why = size - off < KD_JOURNAL_FRAME ? "a record's frame cut short"
                            : n == 0 || n > size - off - KD_JOURNAL_FRAME
                                ? "a record cut short"
                                : "a record failing its checksum";
            break;
        }
        if (damaged(out, p, off, q, size) < 0) goto no_memory;
        off = q;
    }
    out->end = out->torn ? off : size;
    return 0;
no_memory:
    kd_jscan_free(out);
    snprintf(err, errlen, "journal: out of memory while reading it");
    return -1;
}

void kd_jscan_free(kd_jscan *s) {
    kd_jindex_free(&s->index);
    free(s->problems);
    *s = (kd_jscan){0};
}
