/* test_loader.c — kr_model_load on damaged and re-encoded copies of the fixture model
 * (tests/data/tiny), written into a fresh temporary directory: every damage must give a
 * clear error naming the tensor or key and the file, never a crash; F16, BF16 and the
 * learn_te = false layout must load and compute what the F32 original computes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"
#include "model.h"
#include "test_util.h"

#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE KR_TEST_DATA "/tiny"
#define NW      24 /* window of the logits checks */

static char g_tmp[256];
static kr_model *g_ref;
static float g_ref_logits[1024], g_ref_decoded[NW * KR_D_IN];
static int32_t g_s1[NW], g_s2[NW];
static kr_stamp g_st[NW];

/* ---- files ------------------------------------------------------------------------------- */

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *src, const char *dst) {
    size_t n;
    unsigned char *p = read_all(src, &n);
    write_all(dst, p, n);
    free(p);
}

/* ---- safetensors as header entries + bytes ------------------------------------------------ */

typedef struct {
    char name[160];
    char dtype[16];
    json_t *shape;
    unsigned char *bytes;
    size_t nbytes;
} st_ent;

typedef struct {
    st_ent *e;
    int n;
    json_t *meta;
} st_doc;

static void doc_read(st_doc *d, const char *path) {
    size_t n;
    unsigned char *p = read_all(path, &n);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | p[i];
    assert_true(hlen <= n - 8);
    json_error_t je;
    json_t *h = json_loadb((const char *)p + 8, (size_t)hlen, 0, &je);
    assert_non_null(h);
    const unsigned char *data = p + 8 + hlen;
    memset(d, 0, sizeof *d);
    d->e = calloc(json_object_size(h), sizeof *d->e);
    assert_non_null(d->e);
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            d->meta = json_incref(v);
            continue;
        }
        st_ent *e = &d->e[d->n++];
        snprintf(e->name, sizeof e->name, "%s", key);
        snprintf(e->dtype, sizeof e->dtype, "%s", json_string_value(json_object_get(v, "dtype")));
        e->shape = json_deep_copy(json_object_get(v, "shape"));
        json_t *offs = json_object_get(v, "data_offsets");
        size_t b = (size_t)json_integer_value(json_array_get(offs, 0));
        size_t end = (size_t)json_integer_value(json_array_get(offs, 1));
        e->nbytes = end - b;
        e->bytes = malloc(e->nbytes ? e->nbytes : 1);
        assert_non_null(e->bytes);
        memcpy(e->bytes, data + b, e->nbytes);
    }
    json_decref(h);
    free(p);
}

static void doc_free(st_doc *d) {
    for (int i = 0; i < d->n; i++) {
        json_decref(d->e[i].shape);
        free(d->e[i].bytes);
    }
    free(d->e);
    json_decref(d->meta);
    memset(d, 0, sizeof *d);
}

static st_ent *doc_get(st_doc *d, const char *name) {
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->e[i].name, name) == 0) return &d->e[i];
    fail_msg("no tensor %s in the fixture", name);
    return NULL;
}

static void ent_set_bytes(st_ent *e, const char *dtype, unsigned char *bytes, size_t n) {
    free(e->bytes);
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype);
    e->bytes = bytes;
    e->nbytes = n;
}

/* Lays the entries out back to back: a consistent header and data section. */
static void doc_layout(const st_doc *d, json_t **hdr, unsigned char **data, size_t *size) {
    size_t total = 0;
    for (int i = 0; i < d->n; i++)
        total += d->e[i].nbytes;
    *data = malloc(total ? total : 1);
    assert_non_null(*data);
    *hdr = json_object();
    size_t off = 0;
    for (int i = 0; i < d->n; i++) {
        const st_ent *e = &d->e[i];
        memcpy(*data + off, e->bytes, e->nbytes);
        json_t *offs = json_pack("[II]", (json_int_t)off, (json_int_t)(off + e->nbytes));
        json_object_set_new(*hdr, e->name,
                            json_pack("{s:s, s:O, s:o}", "dtype", e->dtype, "shape", e->shape,
                                      "data_offsets", offs));
        off += e->nbytes;
    }
    if (d->meta) json_object_set(*hdr, "__metadata__", d->meta);
    *size = total;
}

/* Writes 8-byte little-endian header length, the header (padded with spaces to a multiple of
 * 8, as the reference writer does) and the data. */
static void st_write(const char *path, json_t *hdr, const unsigned char *data, size_t n) {
    char *text = json_dumps(hdr, JSON_COMPACT);
    assert_non_null(text);
    size_t tlen = strlen(text), hlen = (tlen + 7) / 8 * 8;
    size_t total = 8 + hlen + n;
    unsigned char *out = malloc(total);
    assert_non_null(out);
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(out + 8, text, tlen);
    memset(out + 8 + tlen, ' ', hlen - tlen);
    memcpy(out + 8 + hlen, data, n);
    write_all(path, out, total);
    free(out);
    free(text);
}

static void doc_write(const st_doc *d, const char *path) {
    json_t *hdr;
    unsigned char *data;
    size_t n;
    doc_layout(d, &hdr, &data, &n);
    st_write(path, hdr, data, n);
    json_decref(hdr);
    free(data);
}

/* ---- conversions -------------------------------------------------------------------------- */

/* float32 -> IEEE half, round to nearest even (finite inputs of the fixture's range) */
static uint16_t to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, man = x & 0x7fffff;
    int32_t e8 = (int32_t)((x >> 23) & 0xff), exp = e8 - 127 + 15;
    if (e8 == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) { /* half subnormal: units of 2^-24 */
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | (uint32_t)exp << 10 | man >> 13, rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry rolls into the exponent */
    return (uint16_t)h;
}

static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static void doc_convert(st_doc *d, const char *dtype) {
    bool half = strcmp(dtype, "F16") == 0;
    for (int i = 0; i < d->n; i++) {
        st_ent *e = &d->e[i];
        if (strcmp(e->dtype, "F32") != 0) continue;
        size_t n = e->nbytes / 4;
        unsigned char *b = malloc(n * 2 + 1);
        assert_non_null(b);
        for (size_t k = 0; k < n; k++) {
            float f;
            memcpy(&f, e->bytes + 4 * k, 4);
            uint16_t h = half ? to_f16(f) : to_bf16(f);
            b[2 * k] = (unsigned char)(h & 0xff);
            b[2 * k + 1] = (unsigned char)(h >> 8);
        }
        ent_set_bytes(e, dtype, b, n * 2);
    }
}

/* ---- test cases in the temporary directory ------------------------------------------------ */

typedef struct {
    char tok[512], pred[512];
    char tok_st[600], pred_st[600], tok_cfg[600], pred_cfg[600];
} case_dirs;

static void make_case(const char *name, case_dirs *c) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(c->tok, sizeof c->tok, "%s/tokenizer", dir);
    snprintf(c->pred, sizeof c->pred, "%s/predictor", dir);
    assert_int_equal(mkdir(c->tok, 0700), 0);
    assert_int_equal(mkdir(c->pred, 0700), 0);
    snprintf(c->tok_st, sizeof c->tok_st, "%s/model.safetensors", c->tok);
    snprintf(c->pred_st, sizeof c->pred_st, "%s/model.safetensors", c->pred);
    snprintf(c->tok_cfg, sizeof c->tok_cfg, "%s/config.json", c->tok);
    snprintf(c->pred_cfg, sizeof c->pred_cfg, "%s/config.json", c->pred);
    copy_file(FIXTURE "/tokenizer/config.json", c->tok_cfg);
    copy_file(FIXTURE "/tokenizer/model.safetensors", c->tok_st);
    copy_file(FIXTURE "/predictor/config.json", c->pred_cfg);
    copy_file(FIXTURE "/predictor/model.safetensors", c->pred_st);
}

static kr_model *load_case(const case_dirs *c, kr_error *err) {
    kr_model_paths p = {.tokenizer_dir = c->tok, .predictor_dir = c->pred, .max_context = 512};
    memset(err, 0, sizeof *err);
    return kr_model_load(&p, err);
}

/* Loading must fail with a message holding every one of the words (NULL-terminated). */
static void expect_fail_(const case_dirs *c, const char *file, int line, ...) {
    kr_error err;
    kr_model *m = load_case(c, &err);
    if (m) {
        kr_model_free(m);
        print_error("the damaged model in %s loaded\n", c->pred);
        _fail(file, line);
        return;
    }
    print_message("error: %s\n", err.msg);
    va_list ap;
    va_start(ap, line);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(err.msg, w)) {
            print_error("message \"%s\" does not contain \"%s\"\n", err.msg, w);
            va_end(ap);
            _fail(file, line);
            return;
        }
    va_end(ap);
}
#define EXPECT_FAIL(c, ...) expect_fail_(c, __FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)

/* Sets (value) or deletes (NULL) a key of a config.json. */
static void edit_config(const char *path, const char *key, json_t *value) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    if (value)
        json_object_set_new(root, key, value);
    else
        assert_int_equal(json_object_del(root, key), 0);
    assert_int_equal(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
}

static void truncate_file(const char *path, size_t keep) {
    size_t n;
    unsigned char *p = read_all(path, &n);
    assert_true(keep <= n);
    write_all(path, p, keep);
    free(p);
}

static uint64_t header_len(const char *path) {
    size_t n;
    unsigned char *p = read_all(path, &n);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--)
        h = h << 8 | p[i];
    free(p);
    return h;
}

static void window_logits(const kr_model *m, float *out) {
    kr_error err = {0};
    int rc = kr_predictor_window(m, g_s1, g_s2, g_st, NW, out, NULL, &err);
    if (rc) fail_msg("predictor window: %s", err.msg);
}

static void decoded(const kr_model *m, float *out) {
    kr_error err = {0};
    int rc = kr_tokenizer_decode(m, g_s1, g_s2, NW, out, &err);
    if (rc) fail_msg("tokenizer decode: %s", err.msg);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/kr_test_loader_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    g_ref = tu_load_tiny(512);
    if (!g_ref) return -1;
    uint32_t x = 2024;
    for (int i = 0; i < NW; i++) {
        x = x * 1664525u + 1013904223u;
        g_s1[i] = (int32_t)(x >> 22);
        x = x * 1664525u + 1013904223u;
        g_s2[i] = (int32_t)(x >> 22);
        g_st[i] = kr_stamp_from_wall(1718709300 + 300 * (int64_t)i);
    }
    kr_error err = {0};
    if (kr_predictor_window(g_ref, g_s1, g_s2, g_st, NW, g_ref_logits, NULL, &err) ||
        kr_tokenizer_decode(g_ref, g_s1, g_s2, NW, g_ref_decoded, &err)) {
        fprintf(stderr, "reference: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(g_ref);
    if (g_tmp[0]) nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- positive cases ----------------------------------------------------------------------- */

/* The s2 head's query table: every row the bits dep_q gives that token's embedding row
 * alone, on every kernel level this CPU has (it is computed once, at load). */
static void test_dep_q_table(void **state) {
    (void)state;
    const kr_predictor_weights *w = &g_ref->pred;
    int d = g_ref->pc.d_model, v1 = 1 << g_ref->pc.s1_bits;
    float *q = malloc((size_t)d * sizeof(float));
    assert_non_null(q);
    assert_non_null(w->dep_q_table);
    kr_simd best = kr_simd_level();
    for (int level = KR_SIMD_GENERIC; level <= (int)best; level++) {
        assert_int_equal(kr_simd_set((kr_simd)level), 0);
        for (int t = 0; t < v1; t += t < 8 ? 1 : 97) {
            kr_linear_forward(q, w->emb_s1 + (size_t)t * d, 1, &w->dep_q);
            assert_memory_equal(q, w->dep_q_table + (size_t)t * d, (size_t)d * sizeof(float));
        }
    }
    kr_simd_set(best);
    free(q);
}

static void test_fixture_loads(void **state) {
    (void)state;
    const kr_predictor_config *pc = kr_model_predictor_config(g_ref);
    const kr_tokenizer_config *tc = kr_model_tokenizer_config(g_ref);
    assert_int_equal(pc->d_model, 64);
    assert_int_equal(pc->n_layers, 2);
    assert_int_equal(pc->n_heads, 4);
    assert_int_equal(pc->ff_dim, 128);
    assert_true(pc->learn_te);
    assert_false(pc->kv_shift);
    assert_int_equal(tc->d_model, 32);
    assert_int_equal(tc->n_enc_layers, 3);
    assert_int_equal(tc->n_dec_layers, 3);
    assert_int_equal(tc->s1_bits + tc->s2_bits, 20);
    assert_int_equal(kr_model_max_context(g_ref), 512);
    /* parameters used at inference, from the spec's tensor list:
     * tokenizer (d 32, ff 64, 2 + 2 blocks): embed 32·6+32, quant 20·32+20, post 32·20+32,
     *   head 6·32+6, block = 2·32 + 4·(32² + 32) + 3·64·32 + 32/4/2 = 10436
     * predictor (d 64, ff 128, 2 blocks): emb 2·1024·64, fusion 64·128+64,
     *   time (60+24+7+32+13)·64, block = 2·64 + 4·(64² + 64) + 3·128·64 + 8 = 41352,
     *   norm 64, dep q/k/v/o 4·(64² + 64), dep norm 64, proj 2·(1024·64 + 1024) */
    size_t tok = 224 + 660 + 672 + 198 + 4 * 10436;
    size_t pred = 131072 + 8256 + 8704 + 2 * 41352 + 64 + 16640 + 64 + 133120;
    assert_int_equal(kr_model_param_count(g_ref), tok + pred);
    /* max_context 0 means 512 */
    kr_model_paths p = {.tokenizer_dir = FIXTURE "/tokenizer",
                        .predictor_dir = FIXTURE "/predictor"};
    kr_error err = {0};
    kr_model *m = kr_model_load(&p, &err);
    assert_non_null(m);
    assert_int_equal(kr_model_max_context(m), 512);
    kr_model_free(m);
}

/* The helpers themselves: a re-written copy (new layout, no padding quirks) is the same
 * model. */
static void test_rewrite_identity(void **state) {
    (void)state;
    case_dirs c;
    make_case("rewrite", &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    doc_write(&d, c.pred_st);
    doc_free(&d);
    doc_read(&d, c.tok_st);
    doc_write(&d, c.tok_st);
    doc_free(&d);
    kr_error err;
    kr_model *m = load_case(&c, &err);
    if (!m) fail_msg("%s", err.msg);
    float l[1024], o[NW * KR_D_IN];
    window_logits(m, l);
    decoded(m, o);
    assert_memory_equal(l, g_ref_logits, sizeof l);
    assert_memory_equal(o, g_ref_decoded, sizeof o);
    kr_model_free(m);
}

static void check_converted(const char *dtype, double tol) {
    case_dirs c;
    char name[32];
    snprintf(name, sizeof name, "conv_%s", dtype);
    make_case(name, &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    doc_convert(&d, dtype);
    assert_string_equal(doc_get(&d, "norm.weight")->dtype, dtype);
    doc_write(&d, c.pred_st);
    doc_free(&d);
    doc_read(&d, c.tok_st);
    doc_convert(&d, dtype);
    doc_write(&d, c.tok_st);
    doc_free(&d);
    kr_error err;
    kr_model *m = load_case(&c, &err);
    if (!m) fail_msg("%s model: %s", dtype, err.msg);
    assert_int_equal(kr_model_param_count(m), kr_model_param_count(g_ref));
    float l[1024], o[NW * KR_D_IN];
    window_logits(m, l);
    decoded(m, o);
    double rl = tu_max_rel_floats(l, g_ref_logits, 1024),
           ro = tu_max_rel_floats(o, g_ref_decoded, NW * KR_D_IN);
    print_message("%s: s1 logits max diff %.2e, decoded candles %.2e (relative to max |F32|)\n",
                  dtype, rl, ro);
    assert_true(rl < tol);
    assert_true(ro < tol);
    assert_true(rl > 0); /* the weights really were rounded */
    kr_model_free(m);
}

static void test_f16(void **state) {
    (void)state;
    check_converted("F16", 5e-3);
}

static void test_bf16(void **state) {
    (void)state;
    check_converted("BF16", 5e-2);
}

/* Exact decoding of F16 and BF16 bit patterns: norm.weight (64 values) written with chosen
 * patterns, read back from the loaded model. */
static void check_patterns(const char *dtype, const uint16_t *bits, const double *want, int n) {
    case_dirs c;
    char name[32];
    snprintf(name, sizeof name, "patterns_%s", dtype);
    make_case(name, &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    st_ent *e = doc_get(&d, "norm.weight");
    unsigned char *b = calloc(64, 2);
    assert_non_null(b);
    for (int i = 0; i < 64; i++) {
        uint16_t h = bits[i % n];
        b[2 * i] = (unsigned char)(h & 0xff);
        b[2 * i + 1] = (unsigned char)(h >> 8);
    }
    ent_set_bytes(e, dtype, b, 128);
    doc_write(&d, c.pred_st);
    doc_free(&d);
    kr_error err;
    kr_model *m = load_case(&c, &err);
    if (!m) fail_msg("%s", err.msg);
    for (int i = 0; i < 64; i++) {
        double got = m->pred.norm[i];
        if (!(got == want[i % n]) || signbit(got) != signbit(want[i % n]))
            fail_msg("%s 0x%04x: got %.10g, expected %.10g", dtype, bits[i % n], got, want[i % n]);
    }
    kr_model_free(m);
}

static void test_half_patterns(void **state) {
    (void)state;
    const uint16_t f16[] = {0x3c00, 0xc000, 0x0001, 0x03ff, 0x0400,
                            0x7bff, 0x8000, 0x3555, 0x8001, 0x0000};
    const double f16v[] = {1.0,
                           -2.0,
                           ldexp(1, -24),        /* smallest subnormal */
                           1023 * ldexp(1, -24), /* largest subnormal */
                           ldexp(1, -14),        /* smallest normal */
                           65504.0,              /* largest finite */
                           -0.0,
                           0.333251953125, /* 0x3555: 1.0101010101b · 2^-2 */
                           -ldexp(1, -24),
                           0.0};
    check_patterns("F16", f16, f16v, (int)(sizeof f16 / sizeof f16[0]));
    const uint16_t bf16[] = {0x3f80, 0xc040, 0x0001, 0x7f7f, 0x8000, 0x3eab, 0x0080};
    const double bf16v[] = {1.0,
                            -3.0,
                            ldexp(1, -133),      /* float32 subnormal */
                            255 * ldexp(1, 120), /* largest finite: 1.1111111b · 2^127 */
                            -0.0,
                            0.333984375,     /* 0x3eab: 1.0101011b · 2^-2 */
                            ldexp(1, -126)}; /* smallest normal */
    check_patterns("BF16", bf16, bf16v, (int)(sizeof bf16 / sizeof bf16[0]));
}

static const char *const time_names[5] = {"minute", "hour", "weekday", "day", "month"};

static void rename_time_tables(const char *path) {
    st_doc d;
    doc_read(&d, path);
    for (int i = 0; i < 5; i++) {
        char from[96];
        snprintf(from, sizeof from, "time_emb.%s_embed.weight", time_names[i]);
        st_ent *e = doc_get(&d, from);
        snprintf(e->name, sizeof e->name, "time_emb.%s_embed.emb.weight", time_names[i]);
    }
    doc_write(&d, path);
    doc_free(&d);
}

static void test_learn_te_false(void **state) {
    (void)state;
    case_dirs c;
    make_case("learn_te_false", &c);
    rename_time_tables(c.pred_st);
    edit_config(c.pred_cfg, "learn_te", json_false());
    kr_error err;
    kr_model *m = load_case(&c, &err);
    if (!m) fail_msg("%s", err.msg);
    assert_false(kr_model_predictor_config(m)->learn_te);
    float l[1024];
    window_logits(m, l);
    assert_memory_equal(l, g_ref_logits, sizeof l);
    kr_model_free(m);

    /* the same file with a config that still says learn_te = true contradicts it */
    edit_config(c.pred_cfg, "learn_te", json_true());
    EXPECT_FAIL(&c, "learn_te", "time_emb.minute_embed.emb.weight", "predictor/model.safetensors");
}

static void test_unused_i64_ok(void **state) {
    (void)state;
    /* inference ignores I64 buffers (the fixture's tokenizer already holds two); one more in
     * the predictor, a scalar, must not disturb anything */
    case_dirs c;
    make_case("extra_i64", &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    d.e = realloc(d.e, (size_t)(d.n + 1) * sizeof *d.e);
    assert_non_null(d.e);
    st_ent *e = &d.e[d.n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "transformer.0.self_attn.rotary.num_calls");
    snprintf(e->dtype, sizeof e->dtype, "I64");
    e->shape = json_array();
    e->nbytes = 8;
    e->bytes = calloc(1, 8);
    assert_non_null(e->bytes);
    doc_write(&d, c.pred_st);
    doc_free(&d);
    kr_error err;
    kr_model *m = load_case(&c, &err);
    if (!m) fail_msg("%s", err.msg);
    float l[1024];
    window_logits(m, l);
    assert_memory_equal(l, g_ref_logits, sizeof l);
    kr_model_free(m);
}

/* ---- damaged files ------------------------------------------------------------------------ */

static void test_missing_file(void **state) {
    (void)state;
    case_dirs c;
    make_case("missing_file", &c);
    assert_int_equal(remove(c.pred_st), 0);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "cannot open");
}

static void test_truncated_data(void **state) {
    (void)state;
    case_dirs c;
    make_case("truncated_data", &c);
    size_t n;
    free(read_all(c.pred_st, &n));
    truncate_file(c.pred_st, n / 2);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "tensor '", "truncated");
    /* one byte short: the last tensor in the data section is the one cut */
    make_case("truncated_one_byte", &c);
    truncate_file(c.pred_st, n - 1);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "transformer.1.self_attn.v_proj.weight",
                "past the end");
}

static void test_truncated_header(void **state) {
    (void)state;
    case_dirs c;
    make_case("truncated_header", &c);
    uint64_t h = header_len(c.pred_st);
    truncate_file(c.pred_st, 8 + (size_t)h / 2);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "header length", "truncated");
    make_case("too_short", &c);
    truncate_file(c.pred_st, 5);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "too short");
    make_case("empty", &c);
    truncate_file(c.tok_st, 0);
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "too short");
}

static void test_bad_json(void **state) {
    (void)state;
    case_dirs c;
    make_case("bad_json", &c);
    size_t n;
    unsigned char *p = read_all(c.pred_st, &n);
    memcpy(p + 8 + 20, "\x01garbage}}{[", 12);
    write_all(c.pred_st, p, n);
    free(p);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "not valid JSON");

    /* valid JSON, but not an object */
    make_case("json_array", &c);
    json_t *arr = json_pack("[i,i]", 1, 2);
    st_write(c.pred_st, arr, (const unsigned char *)"", 0);
    json_decref(arr);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "not a JSON object");

    /* an entry without data_offsets */
    make_case("json_entry", &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    json_t *hdr;
    unsigned char *data;
    doc_layout(&d, &hdr, &data, &n);
    json_object_del(json_object_get(hdr, "norm.weight"), "data_offsets");
    st_write(c.pred_st, hdr, data, n);
    json_decref(hdr);
    free(data);
    doc_free(&d);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "norm.weight", "data_offsets");
}

static void test_header_length_too_large(void **state) {
    (void)state;
    case_dirs c;
    make_case("hlen_large", &c);
    size_t n;
    unsigned char *p = read_all(c.pred_st, &n);
    uint64_t h = (uint64_t)n; /* larger than the n - 8 bytes that follow it */
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(h >> (8 * i));
    write_all(c.pred_st, p, n);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "header length", "exceeds");
    make_case("hlen_huge", &c);
    for (int i = 0; i < 8; i++)
        p[i] = 0xff; /* 2^64 - 1: 8 + hlen would wrap */
    write_all(c.pred_st, p, n);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "header length", "exceeds");
    free(p);
}

/* A used tensor stored in another dtype, the header otherwise consistent. */
static void check_dtype(const char *dtype) {
    case_dirs c;
    char name[32];
    snprintf(name, sizeof name, "dtype_%s", dtype);
    make_case(name, &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    st_ent *e = doc_get(&d, "norm.weight");
    size_t n = e->nbytes / 4;
    unsigned char *b = malloc(n * 8);
    assert_non_null(b);
    for (size_t k = 0; k < n; k++) {
        float f;
        memcpy(&f, e->bytes + 4 * k, 4);
        if (dtype[0] == 'F') {
            double v = f;
            memcpy(b + 8 * k, &v, 8);
        } else {
            int64_t v = (int64_t)k;
            memcpy(b + 8 * k, &v, 8);
        }
    }
    ent_set_bytes(e, dtype, b, n * 8);
    doc_write(&d, c.pred_st);
    doc_free(&d);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'norm.weight'", dtype);
}

static void test_wrong_dtype(void **state) {
    (void)state;
    check_dtype("I64");
    check_dtype("F64");
    /* and an unknown dtype name */
    case_dirs c;
    make_case("dtype_unknown", &c);
    st_doc d;
    doc_read(&d, c.tok_st);
    snprintf(doc_get(&d, "embed.bias")->dtype, 16, "Q4_K");
    doc_write(&d, c.tok_st);
    doc_free(&d);
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "embed.bias", "Q4_K");
}

static void test_missing_tensor(void **state) {
    (void)state;
    case_dirs c;
    make_case("missing_norm", &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    snprintf(doc_get(&d, "norm.weight")->name, 160, "norm.weight_renamed");
    doc_write(&d, c.pred_st);
    doc_free(&d);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "missing", "'norm.weight'");

    make_case("missing_quant_bias", &c);
    doc_read(&d, c.tok_st);
    snprintf(doc_get(&d, "quant_embed.bias")->name, 160, "quant_embed.b");
    doc_write(&d, c.tok_st);
    doc_free(&d);
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "missing", "'quant_embed.bias'");
}

static void reshape(const char *path, const char *tensor, json_t *shape) {
    st_doc d;
    doc_read(&d, path);
    st_ent *e = doc_get(&d, tensor);
    json_decref(e->shape);
    e->shape = shape;
    doc_write(&d, path);
    doc_free(&d);
}

static void test_shape_mismatch(void **state) {
    (void)state;
    case_dirs c;
    make_case("shape_fusion", &c);
    reshape(c.pred_st, "embedding.fusion_proj.weight", json_pack("[i,i]", 128, 64));
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'embedding.fusion_proj.weight'", "[128, 64]",
                "[64, 128]");
    make_case("shape_norm", &c);
    reshape(c.pred_st, "norm.weight", json_pack("[i,i]", 8, 8));
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'norm.weight'", "[8, 8]", "[64]");
    make_case("shape_inv_freq", &c);
    reshape(c.tok_st, "decoder.1.self_attn.rotary.inv_freq", json_pack("[i,i]", 2, 2));
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "'decoder.1.self_attn.rotary.inv_freq'",
                "shape");
}

/* Writes the predictor with the data_offsets of one tensor replaced. */
static void lie_offsets(const case_dirs *c, const char *tensor, json_int_t b, json_int_t e,
                        bool relative_to_end) {
    st_doc d;
    doc_read(&d, c->pred_st);
    json_t *hdr;
    unsigned char *data;
    size_t n;
    doc_layout(&d, &hdr, &data, &n);
    if (relative_to_end) {
        b += (json_int_t)n;
        e += (json_int_t)n;
    }
    json_object_set_new(json_object_get(hdr, tensor), "data_offsets", json_pack("[II]", b, e));
    st_write(c->pred_st, hdr, data, n);
    json_decref(hdr);
    free(data);
    doc_free(&d);
}

static void test_offsets_lie(void **state) {
    (void)state;
    case_dirs c;
    /* past the end of the data */
    make_case("offsets_past_end", &c);
    lie_offsets(&c, "head.proj_s1.bias", 0, 4096, true);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'head.proj_s1.bias'", "past the end");
    /* straddling the end */
    make_case("offsets_straddle", &c);
    lie_offsets(&c, "head.proj_s1.bias", -2048, 2048, true);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'head.proj_s1.bias'", "past the end");
    /* within the file but the wrong size for the shape */
    make_case("offsets_span", &c);
    lie_offsets(&c, "head.proj_s1.bias", 0, 100, false);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'head.proj_s1.bias'", "4096");
    /* reversed */
    make_case("offsets_reversed", &c);
    lie_offsets(&c, "head.proj_s1.bias", 4096, 0, false);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'head.proj_s1.bias'", "data_offsets");
    /* negative, and beyond 2^63 in the file's own JSON */
    make_case("offsets_negative", &c);
    lie_offsets(&c, "head.proj_s1.bias", -4096, 0, false);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'head.proj_s1.bias'", "data_offsets");
}

static void test_config_missing_key(void **state) {
    (void)state;
    case_dirs c;
    make_case("cfg_no_d_model", &c);
    edit_config(c.pred_cfg, "d_model", NULL);
    EXPECT_FAIL(&c, "predictor/config.json", "'d_model'", "missing");
    make_case("cfg_no_n_enc", &c);
    edit_config(c.tok_cfg, "n_enc_layers", NULL);
    EXPECT_FAIL(&c, "tokenizer/config.json", "'n_enc_layers'", "missing");
    make_case("cfg_no_s2_bits", &c);
    edit_config(c.pred_cfg, "s2_bits", NULL);
    EXPECT_FAIL(&c, "predictor/config.json", "'s2_bits'");
    make_case("cfg_string", &c);
    edit_config(c.pred_cfg, "n_heads", json_string("4"));
    EXPECT_FAIL(&c, "predictor/config.json", "'n_heads'", "integer");
    make_case("cfg_garbage", &c);
    const char *bad = "{\"d_model\": 64,, }";
    write_all(c.pred_cfg, bad, strlen(bad));
    EXPECT_FAIL(&c, "predictor/config.json");
    make_case("cfg_missing", &c);
    assert_int_equal(remove(c.tok_cfg), 0);
    EXPECT_FAIL(&c, "tokenizer/config.json");
}

static void test_config_contradicts(void **state) {
    (void)state;
    case_dirs c;
    make_case("cfg_n_layers_1", &c);
    edit_config(c.pred_cfg, "n_layers", json_integer(1));
    EXPECT_FAIL(&c, "predictor/model.safetensors", "transformer.1", "n_layers");
    make_case("cfg_n_layers_3", &c);
    edit_config(c.pred_cfg, "n_layers", json_integer(3));
    EXPECT_FAIL(&c, "predictor/model.safetensors", "missing", "transformer.2.");
    make_case("cfg_n_enc_2", &c);
    edit_config(c.tok_cfg, "n_enc_layers", json_integer(2));
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "encoder.1", "n_enc_layers");
    make_case("cfg_learn_te_false", &c);
    edit_config(c.pred_cfg, "learn_te", json_false());
    EXPECT_FAIL(&c, "predictor/model.safetensors", "learn_te", "time_emb.minute_embed.weight");
    make_case("cfg_d_model", &c);
    edit_config(c.pred_cfg, "d_model", json_integer(32));
    edit_config(c.pred_cfg, "n_heads", json_integer(2));
    EXPECT_FAIL(&c, "predictor/model.safetensors", "shape", "embedding.emb_s1.weight");
    make_case("cfg_kv_shift", &c);
    edit_config(c.pred_cfg, "kv_shift", json_true());
    EXPECT_FAIL(&c, "predictor/model.safetensors", "missing", "kv_shift");
    make_case("cfg_bits", &c);
    edit_config(c.pred_cfg, "s1_bits", json_integer(9));
    EXPECT_FAIL(&c, "bits", "differ");
}

/* Writes one non-finite value into a float tensor. */
static void poison(const char *path, const char *tensor, size_t index, float value) {
    st_doc d;
    doc_read(&d, path);
    st_ent *e = doc_get(&d, tensor);
    assert_true(4 * index + 4 <= e->nbytes);
    memcpy(e->bytes + 4 * index, &value, 4);
    doc_write(&d, path);
    doc_free(&d);
}

static void test_non_finite(void **state) {
    (void)state;
    case_dirs c;
    make_case("nan_norm", &c);
    poison(c.pred_st, "norm.weight", 5, NAN);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'norm.weight'", "non-finite", "5");
    make_case("nan_w2", &c);
    poison(c.pred_st, "transformer.1.ffn.w2.weight", 100, NAN);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'transformer.1.ffn.w2.weight'", "non-finite");
    make_case("inf_embed", &c);
    poison(c.tok_st, "embed.bias", 0, -INFINITY);
    EXPECT_FAIL(&c, "tokenizer/model.safetensors", "'embed.bias'", "non-finite");
    /* a NaN in an F16 file (0x7e00) */
    make_case("nan_f16", &c);
    st_doc d;
    doc_read(&d, c.pred_st);
    doc_convert(&d, "F16");
    st_ent *e = doc_get(&d, "dep_layer.norm.weight");
    e->bytes[2 * 3] = 0x00;
    e->bytes[2 * 3 + 1] = 0x7e;
    doc_write(&d, c.pred_st);
    doc_free(&d);
    EXPECT_FAIL(&c, "predictor/model.safetensors", "'dep_layer.norm.weight'", "non-finite");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_loads),
        cmocka_unit_test(test_dep_q_table),
        cmocka_unit_test(test_rewrite_identity),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_half_patterns),
        cmocka_unit_test(test_learn_te_false),
        cmocka_unit_test(test_unused_i64_ok),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_truncated_data),
        cmocka_unit_test(test_truncated_header),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_header_length_too_large),
        cmocka_unit_test(test_wrong_dtype),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_offsets_lie),
        cmocka_unit_test(test_config_missing_key),
        cmocka_unit_test(test_config_contradicts),
        cmocka_unit_test(test_non_finite),
    };
    return cmocka_run_group_tests_name("loader", tests, setup, teardown);
}
