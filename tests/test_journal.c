/* test_journal.c — the session journal's promise (server/runtime/exec/journal/journal.h): only a
 * torn last write is cut at start; damage anywhere before the end, a header it never
 * writes, a record that breaks a live request's rules or a configuration that does not fit
 * refuses to start and changes nothing; `journal check` finds each of them and `journal
 * repair` drops exactly the sessions they touch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "journal_check.h"
#include "test_util.h"

#define NODE     "node"
#define MAX_RECS 32

static kr_model *model;
static char dir[256], path[300];

/* random ids, as sessions.c makes them: no two alike in a few bytes */
static const char *const ids[] = {
    NODE "-3f2a9c0d51e84b7aa06c2d9e1f4b8a37", NODE "-b81e07c2f9a34d6e8c15a0b7d2e9f641",
    NODE "-0c7d5e3a92b14f8e6a0d3c9b7e1f2a58", NODE "-e6a1f08b3c7d2e9a4b5c6d7e8f901a2b"};
enum { N_SESSIONS = 4 };

/* ---- what a replay saw ------------------------------------------------------------------- */

typedef struct {
    int candles[N_SESSIONS], tokens[N_SESSIONS], created[N_SESSIONS];
    kd_replay_status answer; /* what every replay answers */
} seen;

static int session_of(const char *id) {
    for (int i = 0; i < N_SESSIONS; i++)
        if (strcmp(ids[i], id) == 0) return i;
    return -1;
}

static kd_replay_status tally(void *ctx, const kd_journal_record *rec, char *msg, size_t msglen) {
    seen *s = ctx;
    const int k = session_of(rec->id);
    assert_true(k >= 0);
    if (rec->type == KD_REC_CANDLES || rec->type == KD_REC_TOKENS) s->created[k]++;
    if (rec->type == KD_REC_CANDLES || rec->type == KD_REC_APPEND) s->candles[k] += rec->n;
    if (rec->type == KD_REC_GENERATED) s->tokens[k] += rec->n;
    if (s->answer != KD_REPLAY_OK) snprintf(msg, msglen, "raise test-setting");
    return s->answer;
}

/* ---- the journal under test ---------------------------------------------------------------- */

static kd_journal_config config(void) {
    return (kd_journal_config){.dir = dir,
                               .fsync = KD_FSYNC_NO,
                               .rewrite_min = (size_t)1 << 30,
                               .fingerprint = 0x1234,
                               .model = "test model",
                               .m = model,
                               .node_id = NODE,
                               .max_sessions = 16};
}

static kd_journal *open_with(const kd_journal_config *c, seen *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    return kd_journal_open(c, tally, s, err, errlen);
}

static unsigned char *read_file(size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(*n ? *n : 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static void write_file(const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* The candles of a record: n five-minute candles from t0, or a value broken where asked. */
typedef struct {
    int64_t ts[16];
    double col[KR_D_IN][16];
} candles;

static void fill(candles *c, kd_journal_record *r, int n, int64_t t0) {
    for (int i = 0; i < n; i++) {
        c->ts[i] = t0 + 300 * i;
        for (int k = 0; k < KR_D_IN; k++)
            c->col[k][i] = 100.0 + i + k;
    }
    r->n = n;
    r->timestamps = c->ts;
    for (int k = 0; k < KR_D_IN; k++)
        r->columns[k] = c->col[k];
}

static void put(kd_journal *j, const kd_journal_record *r) {
    char err[512];
    if (kd_journal_write(j, r, err, sizeof err) < 0) fail_msg("%s", err);
}

static void create_candles(kd_journal *j, int k, int n, int64_t t0) {
    kd_journal_record r = {.type = KD_REC_CANDLES};
    candles c;
    snprintf(r.id, sizeof r.id, "%s", ids[k]);
    snprintf(r.owner, sizeof r.owner, "address 127.0.0.1");
    for (int i = 0; i < KR_D_IN; i++)
        r.mean[i] = 100.0f, r.std[i] = 2.0f;
    fill(&c, &r, n, t0);
    put(j, &r);
}

static void append_candles(kd_journal *j, int k, int n, int64_t t0) {
    kd_journal_record r = {.type = KD_REC_APPEND};
    candles c;
    snprintf(r.id, sizeof r.id, "%s", ids[k]);
    fill(&c, &r, n, t0);
    put(j, &r);
}

static void tokens(kd_journal *j, int k, int n, int32_t s1) {
    int32_t a[8], b[8];
    kr_stamp st[8];
    for (int i = 0; i < n; i++) {
        a[i] = s1;
        b[i] = i;
        st[i] = kr_stamp_from_wall(1700000000 + 300 * i);
    }
    kd_journal_record r = {.type = KD_REC_GENERATED, .n = n, .s1 = a, .s2 = b, .stamps = st};
    snprintf(r.id, sizeof r.id, "%s", ids[k]);
    put(j, &r);
}

static void simple(kd_journal *j, kd_record_type type, int k) {
    kd_journal_record r = {.type = type};
    snprintf(r.id, sizeof r.id, "%s", ids[k]);
    put(j, &r);
}

/* The sessions' totals when every record is replayed (session 2 is deleted). */
static const int want_candles[N_SESSIONS] = {13, 0, 0, 10};
static const int want_tokens[N_SESSIONS] = {0, 5, 0, 0};

/* The fixture: four sessions (candles, tokens, one deleted, candles), their records
 * interleaved. Returns the offsets of its records (and the file's end) in off[]. */
static int build(size_t *off) {
    char err[1024];
    seen s;
    unlink(path);
    kd_journal_config c = config();
    kd_journal *j = open_with(&c, &s, err, sizeof err);
    assert_non_null(j);
    create_candles(j, 0, 10, 1700000000);
    simple(j, KD_REC_TOKENS, 1);
    create_candles(j, 2, 5, 1700000000);
    append_candles(j, 0, 1, 1700003000);
    tokens(j, 1, 3, 7);
    create_candles(j, 3, 8, 1700000000);
    simple(j, KD_REC_GONE, 2);
    append_candles(j, 0, 2, 1700003300);
    tokens(j, 1, 2, 9);
    append_candles(j, 3, 2, 1700002400);
    kd_journal_close(j);
    size_t n;
    unsigned char *p = read_file(&n);
    int k = 0;
    size_t at = 8 + 8 + 4 + strlen("test model") + 4;
    while (at < n) {
        off[k++] = at;
        uint32_t len;
        memcpy(&len, p + at, 4);
        at += 8 + len;
    }
    off[k] = n;
    free(p);
    return k;
}

/* The fixture built, its bytes read (the caller frees them). */
static unsigned char *built(size_t *off, size_t *size) {
    build(off);
    return read_file(size);
}

/* How many records off[] holds for a file of size bytes. */
static int records_in(const size_t *off, size_t size) {
    int n = 0;
    while (off[n] < size)
        n++;
    return n;
}

/* The session a record of the fixture belongs to, by its place. */
static const int owner_of[] = {0, 1, 2, 0, 1, 3, 2, 0, 1, 3};

static void expect_all(const seen *s, int except) {
    for (int k = 0; k < N_SESSIONS; k++) {
        if (k == except || k == 2) continue;
        assert_int_equal(s->candles[k], want_candles[k]);
        assert_int_equal(s->tokens[k], want_tokens[k]);
    }
}

static int setup(void **state) {
    (void)state;
    model = tu_load_tiny(64);
    snprintf(dir, sizeof dir, "/tmp/kronosd-test-journal-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/journal", dir);
    return model ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return -1;
    kr_model_free(model);
    return 0;
}

static int check(bool repair) {
    char err[1024];
    FILE *out = fopen(getenv("JOURNAL_REPORT") ? "/dev/stderr" : "/dev/null", "w");
    kd_journal_check_opts o = {.dir = dir,
                               .repair = repair,
                               .m = model,
                               .fingerprint = 0x1234,
                               .model = "test model",
                               .out = out};
    const int rc = kd_journal_check(&o, err, sizeof err);
    fclose(out);
    return rc;
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void test_clean_journal_replays_everything(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    build(off);
    char err[1024];
    seen s;
    kd_journal_config c = config();
    kd_journal *j = open_with(&c, &s, err, sizeof err);
    assert_non_null(j);
    expect_all(&s, -1);
    assert_int_equal(s.created[2], 0); /* deleted: not replayed */
    kd_journal_close(j);
    assert_int_equal(check(false), 0);
}

/* One byte flipped at each of several places in every record: in the last record it is a
 * torn write (cut, the rest kept); anywhere before it is damage (refused, the file as it
 * was), which check reports and repair turns into a journal without that record's session. */
static void test_flipped_byte_in_every_record(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    size_t size;
    unsigned char *orig = built(off, &size);
    const int n = records_in(off, size);
    for (int r = 0; r < n; r++) {
        const size_t len = off[r + 1] - off[r];
        /* the length, the CRC, the type, the id, the payload's middle and its last byte
         * (all but the id's length, without which the id cannot be read) */
        const size_t places[] = {0, 1, 4, 7, 8, 12, 20, len / 2 + 4, len - 1};
        for (size_t q = 0; q < sizeof places / sizeof places[0]; q++) {
            unsigned char *p = malloc(size);
            memcpy(p, orig, size);
            p[off[r] + places[q]] ^= 0x5A;
            write_file(p, size);
            char err[2048] = "";
            seen s;
            kd_journal_config c = config();
            kd_journal *j = open_with(&c, &s, err, sizeof err);
            if (r == n - 1) { /* the last write, torn */
                assert_non_null(j);
                kd_journal_close(j);
                free(p);
                continue;
            }
            if (j)
                fail_msg("record %d, byte %zu: damage before the end was not refused", r,
                         places[q]);
            assert_non_null(strstr(err, "damaged"));
            assert_non_null(strstr(err, "journal repair"));
            size_t after;
            unsigned char *now = read_file(&after);
            assert_int_equal(after, size); /* nothing changed */
            assert_memory_equal(now, p, size);
            free(now);
            assert_int_equal(check(false), 1);
            assert_int_equal(check(true), 0);
            assert_int_equal(check(false), 0);
            j = open_with(&c, &s, err, sizeof err);
            if (!j) fail_msg("record %d, byte %zu: the repaired journal: %s", r, places[q], err);
            kd_journal_close(j);
            const int hit = owner_of[r];
            if (hit != 2) assert_int_equal(s.created[hit], 0); /* its session dropped */
            expect_all(&s, hit);                               /* the others whole */
            free(p);
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -f '%s'/journal.damaged-*", dir);
            assert_int_equal(system(cmd), 0);
        }
    }
    free(orig);
}

/* Cut at every byte: a crash mid-write; whole records before the cut are kept. */
static void test_cut_at_every_byte(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    size_t size;
    unsigned char *orig = built(off, &size);
    const int n = records_in(off, size);
    for (size_t cut = off[0] + 1; cut < size; cut++) {
        write_file(orig, cut);
        char err[2048];
        seen s;
        kd_journal_config c = config();
        kd_journal *j = open_with(&c, &s, err, sizeof err);
        if (!j) fail_msg("cut at %zu: %s", cut, err);
        kd_journal_stats st;
        kd_journal_stats_get(j, &st);
        int whole = 0;
        while (whole < n && off[whole + 1] <= cut)
            whole++;
        assert_int_equal(st.bytes, off[whole]);
        assert_int_equal(st.cut, cut - off[whole]);
        kd_journal_close(j);
    }
    free(orig);
}

static void test_headers_it_never_writes(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    size_t size;
    unsigned char *orig = built(off, &size);
    char err[2048];
    seen s;
    kd_journal_config c = config();
    /* a description length past any header's, in a file long enough to hold it or not */
    const uint32_t lengths[] = {5000, 100000, 300};
    for (size_t i = 0; i < 3; i++) {
        unsigned char *p = malloc(size + 8192);
        memcpy(p, orig, size);
        memset(p + size, 0, 8192);
        memcpy(p + 16, &lengths[i], 4);
        write_file(p, i == 2 ? size : size + 8192);
        err[0] = '\0';
        assert_null(open_with(&c, &s, err, sizeof err));
        assert_non_null(strstr(err, "header"));
        assert_int_equal(check(false), 1);
        free(p);
    }
    /* not a journal at all */
    write_file((const unsigned char *)"hello, world: not a journal", 27);
    assert_null(open_with(&c, &s, err, sizeof err));
    assert_non_null(strstr(err, "not a kronosd session journal"));
    /* the start of this daemon's own header: a crash while creating it, started afresh */
    for (size_t cut = 1; cut < off[0]; cut += 7) {
        write_file(orig, cut);
        kd_journal *j = open_with(&c, &s, err, sizeof err);
        if (!j) fail_msg("a header cut at %zu: %s", cut, err);
        kd_journal_close(j);
    }
    /* another model's header cut short is not this daemon's: refused */
    write_file(orig, off[0] - 3);
    kd_journal_config other = c;
    other.fingerprint = 0x9999;
    assert_null(open_with(&other, &s, err, sizeof err));
    free(orig);
}

/* A configuration that does not fit is refused, naming the setting, and writes nothing. */
static void test_configuration_that_does_not_fit(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    size_t size;
    unsigned char *orig = built(off, &size);
    char err[2048];
    seen s;
    kd_journal_config c = config();
    c.node_id = "renamed";
    assert_null(open_with(&c, &s, err, sizeof err));
    assert_non_null(strstr(err, "node-id node"));
    c = config();
    c.max_sessions = 2;
    assert_null(open_with(&c, &s, err, sizeof err));
    assert_non_null(strstr(err, "max-sessions"));
    c = config();
    memset(&s, 0, sizeof s);
    s.answer = KD_REPLAY_UNFIT;
    assert_null(kd_journal_open(&c, tally, &s, err, sizeof err));
    assert_non_null(strstr(err, "raise test-setting"));
    size_t after;
    unsigned char *now = read_file(&after);
    assert_int_equal(after, size);
    assert_memory_equal(now, orig, size);
    /* and the old configuration restores every session */
    kd_journal *j = open_with(&c, &s, err, sizeof err);
    assert_non_null(j);
    expect_all(&s, -1);
    kd_journal_close(j);
    free(now);
    free(orig);
}

/* Records with a valid checksum that a live request could never have made. */
static void test_records_that_break_the_rules(void **state) {
    (void)state;
    for (int hostile = 0; hostile < 7; hostile++) {
        size_t off[MAX_RECS];
        build(off);
        char err[2048];
        seen s;
        kd_journal_config c = config();
        kd_journal *j = open_with(&c, &s, err, sizeof err);
        assert_non_null(j);
        kd_journal_record r = {.type = KD_REC_APPEND};
        candles cd;
        snprintf(r.id, sizeof r.id, "%s", ids[0]);
        fill(&cd, &r, 2, 1700009000);
        switch (hostile) {
        case 0:
            cd.col[KR_CLOSE][1] = NAN;
            break;
        case 1:
            cd.col[KR_OPEN][0] = 1e300;
            break;
        case 2:
            fill(&cd, &r, 2, 1600000000); /* before the session's last candle */
            break;
        case 3:
            r.columns[KR_VOLUME] = NULL; /* the series has volume */
            r.columns[KR_AMOUNT] = NULL;
            break;
        case 4:
            r.type = KD_REC_CANDLES; /* a second creation */
            break;
        }
        if (hostile == 5)
            tokens(j, 1, 2, 1 << 20); /* s1 outside the model's range */
        else if (hostile == 6)
            tokens(j, 0, 2, 1); /* tokens for a candle session */
        else
            put(j, &r);
        append_candles(j, 3, 1, 1700090000); /* a good record after it */
        kd_journal_close(j);
        err[0] = '\0';
        assert_null(open_with(&c, &s, err, sizeof err));
        if (!strstr(err, "damaged")) fail_msg("hostile record %d: %s", hostile, err);
        assert_int_equal(check(false), 1);
        assert_int_equal(check(true), 0);
        j = open_with(&c, &s, err, sizeof err);
        if (!j) fail_msg("hostile record %d, repaired: %s", hostile, err);
        kd_journal_close(j);
        const int hit = hostile == 5 ? 1 : 0;
        assert_int_equal(s.created[hit], 0);
        assert_int_equal(s.candles[3], want_candles[3] + 1);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -f '%s'/journal.damaged-*", dir);
        assert_int_equal(system(cmd), 0);
    }
}

/* A write the file system refuses (a full disk: here the file size limit) fails and leaves
 * the file as it was. */
static void test_failed_write_changes_nothing(void **state) {
    (void)state;
    size_t off[MAX_RECS];
    build(off);
    char err[2048];
    seen s;
    kd_journal_config c = config();
    kd_journal *j = open_with(&c, &s, err, sizeof err);
    assert_non_null(j);
    kd_journal_stats st;
    kd_journal_stats_get(j, &st);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = st.bytes + 4;
    setrlimit(RLIMIT_FSIZE, &lim);
    assert_int_equal(kd_journal_gone(j, ids[0], err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot write"));
    setrlimit(RLIMIT_FSIZE, &old);
    kd_journal_stats after;
    kd_journal_stats_get(j, &after);
    assert_int_equal(after.bytes, st.bytes);
    assert_int_equal(after.live_sessions, st.live_sessions);
    kd_journal_close(j);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((size_t)sb.st_size, st.bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_journal_replays_everything),
        cmocka_unit_test(test_flipped_byte_in_every_record),
        cmocka_unit_test(test_cut_at_every_byte),
        cmocka_unit_test(test_headers_it_never_writes),
        cmocka_unit_test(test_configuration_that_does_not_fit),
        cmocka_unit_test(test_records_that_break_the_rules),
        cmocka_unit_test(test_failed_write_changes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
