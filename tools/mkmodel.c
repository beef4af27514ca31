/*
 * kronos-mkmodel: write a random-weight Kronos checkpoint (tokenizer + predictor)
 * in the released Hugging Face layout (config.json + model.safetensors per part).
 *
 * The output is fully deterministic for a given command line: every tensor draws
 * from its own PRNG stream seeded by (--seed, part, tensor name), so adding a
 * tensor (e.g. --kv-shift) or changing --dtype leaves all other values unchanged.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <jansson.h>

#define MAX_DIM    (1 << 20) /* sanity cap on every size flag */
#define MAX_NAME   128
#define GROUP_SIZE 4 /* tokenizer BSQ group size of the released models */
#define D_IN       6 /* open, high, low, close, volume, amount */
#define DEP_HEADS  4 /* the dependency layer always has 4 heads */

/* ---------- options ---------- */

enum dtype { DT_F32, DT_F16, DT_BF16 };

struct opts {
    const char *out;
    uint64_t seed;
    enum dtype dtype;
    int learn_te, kv_shift;
    int d_model, n_layers, n_heads, ff_dim;                             /* predictor */
    int tok_d_model, tok_enc_layers, tok_dec_layers, tok_heads, tok_ff; /* tokenizer */
    int s1_bits, s2_bits;
};

struct preset {
    const char *name;
    int d_model, n_layers, n_heads, ff_dim;
    int tok_d_model, tok_enc_layers, tok_dec_layers, tok_heads, tok_ff;
};

static const struct preset presets[] = {
    {"tiny", 64, 2, 4, 128, 32, 3, 3, 4, 64},
    {"mini", 256, 4, 4, 512, 256, 4, 4, 4, 512},
    {"small", 512, 8, 8, 1024, 256, 4, 4, 4, 512},
    {"base", 832, 12, 16, 2048, 256, 4, 4, 4, 512},
};

/* ---------- deterministic PRNG: splitmix64 + Box-Muller ---------- */

struct rng {
    uint64_t state;
    double spare;
    int has_spare;
};

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so log() in Box-Muller is finite. */
static double rng_uniform(struct rng *r) {
    return (double)((splitmix64(&r->state) >> 11) + 1) * 0x1.0p-53;
}

static double rng_normal(struct rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double rad = sqrt(-2.0 * log(rng_uniform(r)));
    double ang = 6.283185307179586 * rng_uniform(r); /* 2 pi */
    r->spare = rad * sin(ang);
    r->has_spare = 1;
    return rad * cos(ang);
}

/* FNV-1a, to give each tensor its own stream independent of tensor order. */
static uint64_t fnv1a(const char *s, uint64_t h) {
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static void rng_init(struct rng *r, uint64_t seed, const char *part, const char *name) {
    uint64_t h = fnv1a(name, fnv1a("/", fnv1a(part, 0xcbf29ce484222325ULL)));
    r->state = seed ^ h;
    splitmix64(&r->state); /* decorrelate nearby seeds */
    r->has_spare = 0;
}

/* ---------- tensor list ---------- */

enum init {
    INIT_NORMAL,   /* normal(0, std) */
    INIT_NORM,     /* 1 + normal(0, 0.05): RMSNorm weights */
    INIT_ROPE,     /* RoPE inv_freq for head size shape[0] * 2 */
    INIT_SINUSOID, /* upstream FixedEmbedding table */
    INIT_KV_SHIFT, /* rows a0, a1, b0, b1 */
    INIT_POW2,     /* I64 buffer 2^(n-1) ... 2^0 */
};

struct tensor {
    char name[MAX_NAME];
    int ndim;
    int64_t shape[2];
    enum init init;
    double std;
};

struct tlist {
    struct tensor *v;
    size_t n, cap;
};

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "kronos-mkmodel: out of memory (%zu bytes): %s\n", n, strerror(errno));
        exit(1);
    }
    return p;
}

static struct tensor *tl_add(struct tlist *tl, const char *name, int ndim, int64_t d0, int64_t d1,
                             enum init init, double std) {
    if (tl->n == tl->cap) {
        size_t cap = tl->cap ? tl->cap * 2 : 64;
        struct tensor *v = realloc(tl->v, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "kronos-mkmodel: out of memory: %s\n", strerror(errno));
            exit(1);
        }
        tl->v = v;
        tl->cap = cap;
    }
    struct tensor *t = &tl->v[tl->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->init = init;
    t->std = std;
    return t;
}

/* tl_add with a printf-style name. */
static void tl_addf(struct tlist *tl, int ndim, int64_t d0, int64_t d1, enum init init, double std,
                    const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void tl_addf(struct tlist *tl, int ndim, int64_t d0, int64_t d1, enum init init, double std,
                    const char *fmt, ...) {
    char name[MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    tl_add(tl, name, ndim, d0, d1, init, std);
}

/* nn.Linear(in, out): weight [out, in] ~ normal(0, 1/sqrt(in)), bias [out] ~ normal(0, 0.02). */
static void add_linear(struct tlist *tl, const char *prefix, int64_t in, int64_t out, int bias) {
    tl_addf(tl, 2, out, in, INIT_NORMAL, 1.0 / sqrt((double)in), "%s.weight", prefix);
    if (bias) tl_addf(tl, 1, out, 0, INIT_NORMAL, 0.02, "%s.bias", prefix);
}

/* One transformer block (prefix "encoder.0", "transformer.3", ...). */
static void add_block(struct tlist *tl, const char *prefix, int d, int heads, int ff,
                      int kv_shift) {
    static const char *const proj[] = {"q", "k", "v", "out"};
    char p[MAX_NAME + 32];
    tl_addf(tl, 1, d, 0, INIT_NORM, 0, "%s.norm1.weight", prefix);
    tl_addf(tl, 1, d, 0, INIT_NORM, 0, "%s.norm2.weight", prefix);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s.self_attn.%s_proj", prefix, proj[i]);
        add_linear(tl, p, d, d, 1);
    }
    tl_addf(tl, 1, d / heads / 2, 0, INIT_ROPE, 0, "%s.self_attn.rotary.inv_freq", prefix);
    if (kv_shift) tl_addf(tl, 2, 4, heads, INIT_KV_SHIFT, 0, "%s.self_attn.kv_shift", prefix);
    snprintf(p, sizeof p, "%s.ffn.w1", prefix);
    add_linear(tl, p, d, ff, 0);
    snprintf(p, sizeof p, "%s.ffn.w3", prefix);
    add_linear(tl, p, d, ff, 0);
    snprintf(p, sizeof p, "%s.ffn.w2", prefix);
    add_linear(tl, p, ff, d, 0);
}

static void build_tokenizer(struct tlist *tl, const struct opts *o) {
    int d = o->tok_d_model, bits = o->s1_bits + o->s2_bits;
    char p[MAX_NAME];
    add_linear(tl, "embed", D_IN, d, 1);
    /* upstream builds n_layers - 1 blocks per side */
    for (int i = 0; i < o->tok_enc_layers - 1; i++) {
        snprintf(p, sizeof p, "encoder.%d", i);
        add_block(tl, p, d, o->tok_heads, o->tok_ff, 0);
    }
    add_linear(tl, "quant_embed", d, bits, 1);
    add_linear(tl, "post_quant_embed", bits, d, 1);
    add_linear(tl, "post_quant_embed_pre", o->s1_bits, d, 1); /* training-only */
    for (int i = 0; i < o->tok_dec_layers - 1; i++) {
        snprintf(p, sizeof p, "decoder.%d", i);
        add_block(tl, p, d, o->tok_heads, o->tok_ff, 0);
    }
    add_linear(tl, "head", d, D_IN, 1);
    /* training-only BSQ buffers, present in the released checkpoints */
    tl_add(tl, "tokenizer.bsq.basis", 1, bits, 0, INIT_POW2, 0);
    tl_add(tl, "tokenizer.bsq.group_basis", 1, GROUP_SIZE, 0, INIT_POW2, 0);
}

static void build_predictor(struct tlist *tl, const struct opts *o) {
    static const char *const proj[] = {"q", "k", "v", "out"};
    static const struct {
        const char *name;
        int size;
    } time_tables[] = {{"minute", 60}, {"hour", 24}, {"weekday", 7}, {"day", 32}, {"month", 13}};
    int d = o->d_model;
    char p[MAX_NAME];

    tl_add(tl, "embedding.emb_s1.weight", 2, (int64_t)1 << o->s1_bits, d, INIT_NORMAL, 1 / sqrt(d));
    tl_add(tl, "embedding.emb_s2.weight", 2, (int64_t)1 << o->s2_bits, d, INIT_NORMAL, 1 / sqrt(d));
    add_linear(tl, "embedding.fusion_proj", 2 * d, d, 1);
    for (size_t i = 0; i < sizeof time_tables / sizeof time_tables[0]; i++) {
        if (o->learn_te)
            tl_addf(tl, 2, time_tables[i].size, d, INIT_NORMAL, 0.02, "time_emb.%s_embed.weight",
                    time_tables[i].name);
        else
            tl_addf(tl, 2, time_tables[i].size, d, INIT_SINUSOID, 0, "time_emb.%s_embed.emb.weight",
                    time_tables[i].name);
    }
    for (int i = 0; i < o->n_layers; i++) {
        snprintf(p, sizeof p, "transformer.%d", i);
        add_block(tl, p, d, o->n_heads, o->ff_dim, o->kv_shift);
    }
    tl_add(tl, "norm.weight", 1, d, 0, INIT_NORM, 0);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "dep_layer.cross_attn.%s_proj", proj[i]);
        add_linear(tl, p, d, d, 1);
    }
    tl_add(tl, "dep_layer.cross_attn.rotary.inv_freq", 1, d / DEP_HEADS / 2, 0, INIT_ROPE, 0);
    tl_add(tl, "dep_layer.norm.weight", 1, d, 0, INIT_NORM, 0);
    add_linear(tl, "head.proj_s1", d, (int64_t)1 << o->s1_bits, 1);
    add_linear(tl, "head.proj_s2", d, (int64_t)1 << o->s2_bits, 1);
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const struct tensor *)a)->name, ((const struct tensor *)b)->name);
}

static int64_t numel(const struct tensor *t) {
    return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}

static size_t elem_size(const struct tensor *t, enum dtype dt) {
    if (t->init == INIT_POW2) return 8;
    return dt == DT_F32 ? 4 : 2;
}

static const char *dtype_name(const struct tensor *t, enum dtype dt) {
    if (t->init == INIT_POW2) return "I64";
    return dt == DT_F32 ? "F32" : dt == DT_F16 ? "F16" : "BF16";
}

/* ---------- values ---------- */

/* RoPE inv_freq like torch: 1.0 / (10000 ** (arange(0, hd, 2).float() / hd)), all in float32. */
static void fill_rope(float *v, int64_t half) {
    float hd = (float)(2 * half);
    for (int64_t j = 0; j < half; j++)
        v[j] = 1.0f / powf(10000.0f, (float)(2 * j) / hd);
}

/* Upstream FixedEmbedding (float32): w[pos][2i] = sin(pos * div_i), w[pos][2i+1] = cos(...),
 * div_i = exp(2i * -(ln(10000) / d)). */
static void fill_sinusoid(float *v, int64_t rows, int64_t d) {
    float scale = (float)(-(log(10000.0) / (double)d));
    for (int64_t i = 0; i < d; i += 2) {
        float div = expf((float)i * scale);
        for (int64_t pos = 0; pos < rows; pos++) {
            float a = (float)pos * div;
            v[pos * d + i] = sinf(a);
            if (i + 1 < d) v[pos * d + i + 1] = cosf(a);
        }
    }
}

static void fill_floats(float *v, const struct tensor *t, struct rng *r) {
    int64_t n = numel(t);
    switch (t->init) {
    case INIT_NORMAL:
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)(t->std * rng_normal(r));
        break;
    case INIT_NORM:
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)(1.0 + 0.05 * rng_normal(r));
        break;
    case INIT_ROPE:
        fill_rope(v, n);
        break;
    case INIT_SINUSOID:
        fill_sinusoid(v, t->shape[0], t->shape[1]);
        break;
    case INIT_KV_SHIFT: {
        /* a0, b0 around 1 and a1, b1 around 0.5, each +/- 0.2 */
        static const double centre[4] = {1.0, 0.5, 1.0, 0.5};
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)(centre[i / t->shape[1]] + 0.4 * (rng_uniform(r) - 0.5));
        break;
    }
    case INIT_POW2:
        break; /* integer tensor, handled by the caller */
    }
}

/* IEEE binary16, round to nearest even; overflow to inf, NaN stays NaN. */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t a = x & 0x7fffffff;

    if (a >= 0x7f800000) /* inf or NaN */
        return sign | 0x7c00 | (a > 0x7f800000 ? 0x200 : 0);
    if (a >= 0x477ff000) /* >= 65520 rounds past 65504 */
        return sign | 0x7c00;
    if (a < 0x38800000) { /* below 2^-14: half subnormal or zero */
        uint32_t e = a >> 23;
        if (e < 102) /* < 2^-25: rounds to zero */
            return sign;
        uint32_t m = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t h = (a >> 13) - (112u << 10); /* rebias exponent 127 -> 15 */
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is still correct */
    return sign | (uint16_t)h;
}

/* bfloat16: top half of the f32 bits, round to nearest even. */
static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* keep NaN quiet */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Produce the raw little-endian bytes of one tensor in buf (numel * elem_size bytes). */
static void encode_tensor(unsigned char *buf, const struct tensor *t, enum dtype dt, uint64_t seed,
                          const char *part) {
    int64_t n = numel(t);
    if (t->init == INIT_POW2) {
        for (int64_t i = 0; i < n; i++)
            put_le(buf + 8 * i, (uint64_t)1 << (n - 1 - i), 8); /* upstream: 2**arange(n-1,-1,-1) */
        return;
    }
    struct rng r;
    rng_init(&r, seed, part, t->name);
    float *v = xmalloc((size_t)n * sizeof *v);
    fill_floats(v, t, &r);
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        if (dt == DT_F32)
            put_le(buf + 4 * i, bits, 4);
        else
            put_le(buf + 2 * i, dt == DT_F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]), 2);
    }
    free(v);
}

/* ---------- output ---------- */

static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        fprintf(stderr, "kronos-mkmodel: path too long: %s\n", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "kronos-mkmodel: mkdir %s: %s\n", buf, strerror(errno));
            return -1;
        }
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kronos-mkmodel: %s is not a directory\n", path);
        return -1;
    }
    return 0;
}

/* Header JSON: tensors in name order, then __metadata__, compact, like the released files. */
static char *make_header(const struct tlist *tl, enum dtype dt) {
    json_t *root = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const struct tensor *t = &tl->v[i];
        uint64_t end = off + (uint64_t)numel(t) * elem_size(t, dt);
        json_t *shape = json_array();
        for (int k = 0; k < t->ndim; k++)
            json_array_append_new(shape, json_integer(t->shape[k]));
        json_object_set_new(root, t->name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", dtype_name(t, dt), "shape",
                                      shape, "data_offsets", (json_int_t)off, (json_int_t)end));
        off = end;
    }
    json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path) {
    if (n && fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "kronos-mkmodel: write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_safetensors(const char *path, struct tlist *tl, enum dtype dt, uint64_t seed,
                             const char *part) {
    qsort(tl->v, tl->n, sizeof tl->v[0], cmp_tensor);
    char *hdr = make_header(tl, dt);
    if (!hdr) {
        fprintf(stderr, "kronos-mkmodel: cannot build the header of %s\n", path);
        return -1;
    }
    /* pad with spaces so the data starts 8-byte aligned */
    size_t len = strlen(hdr), padded = (len + 7) / 8 * 8;
    unsigned char lenbuf[8];
    put_le(lenbuf, padded, 8);

    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "kronos-mkmodel: open %s: %s\n", path, strerror(errno));
        free(hdr);
        return -1;
    }
    int rc = write_all(f, lenbuf, 8, path);
    if (!rc) rc = write_all(f, hdr, len, path);
    for (size_t i = len; !rc && i < padded; i++)
        rc = write_all(f, " ", 1, path);
    free(hdr);

    /* one tensor at a time keeps memory at the largest tensor */
    for (size_t i = 0; !rc && i < tl->n; i++) {
        size_t bytes = (size_t)numel(&tl->v[i]) * elem_size(&tl->v[i], dt);
        unsigned char *buf = xmalloc(bytes);
        encode_tensor(buf, &tl->v[i], dt, seed, part);
        rc = write_all(f, buf, bytes, path);
        free(buf);
    }
    if (fclose(f) != 0 && !rc) {
        fprintf(stderr, "kronos-mkmodel: close %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

static int write_json(const char *path, json_t *cfg) {
    /* 15 digits print 0.05 and 1.1 as such instead of their 17-digit expansions */
    int rc = json_dump_file(cfg, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    if (rc != 0) fprintf(stderr, "kronos-mkmodel: write %s: %s\n", path, strerror(errno));
    json_decref(cfg);
    return rc ? -1 : 0;
}

static json_t *tokenizer_config(const struct opts *o) {
    return json_pack("{s:f, s:f, s:i, s:i, s:i, s:f, s:f, s:f, s:i, s:i, s:i, s:i, s:f, s:i, s:i, "
                     "s:f}",
                     "attn_dropout_p", 0.0, "beta", 0.05, "d_in", D_IN, "d_model", o->tok_d_model,
                     "ff_dim", o->tok_ff, "ffn_dropout_p", 0.0, "gamma", 1.1, "gamma0", 1.0,
                     "group_size", GROUP_SIZE, "n_dec_layers", o->tok_dec_layers, "n_enc_layers",
                     o->tok_enc_layers, "n_heads", o->tok_heads, "resid_dropout_p", 0.0, "s1_bits",
                     o->s1_bits, "s2_bits", o->s2_bits, "zeta", 0.05);
}

static json_t *predictor_config(const struct opts *o) {
    json_t *cfg =
        json_pack("{s:f, s:i, s:i, s:f, s:b, s:i, s:i, s:f, s:i, s:i, s:f}", "attn_dropout_p", 0.0,
                  "d_model", o->d_model, "ff_dim", o->ff_dim, "ffn_dropout_p", 0.0, "learn_te",
                  o->learn_te, "n_heads", o->n_heads, "n_layers", o->n_layers, "resid_dropout_p",
                  0.0, "s1_bits", o->s1_bits, "s2_bits", o->s2_bits, "token_dropout_p", 0.0);
    if (cfg && o->kv_shift) json_object_set_new(cfg, "kv_shift", json_true());
    return cfg;
}

/* Write DIR/<part>/{config.json, model.safetensors}. */
static int write_part(const struct opts *o, const char *part, json_t *cfg,
                      void (*build)(struct tlist *, const struct opts *)) {
    char dir[PATH_MAX], path[PATH_MAX];
    if (!cfg) {
        fprintf(stderr, "kronos-mkmodel: cannot build the %s config\n", part);
        return -1;
    }
    if (snprintf(dir, sizeof dir, "%s/%s", o->out, part) >= (int)sizeof dir ||
        strlen(dir) + sizeof "/model.safetensors" > sizeof path) {
        fprintf(stderr, "kronos-mkmodel: output path too long: %s\n", o->out);
        json_decref(cfg);
        return -1;
    }
    if (mkdir_p(dir) != 0) {
        json_decref(cfg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (write_json(path, cfg) != 0) return -1;

    struct tlist tl = {0};
    build(&tl, o);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = write_safetensors(path, &tl, o->dtype, o->seed, part);
    free(tl.v);
    return rc;
}

/* ---------- command line ---------- */

static void usage(FILE *f) {
    fputs("usage: kronos-mkmodel --out DIR [options]\n"
          "\n"
          "Write a random-weight Kronos checkpoint in the released Hugging Face layout:\n"
          "DIR/tokenizer/{config.json,model.safetensors} and\n"
          "DIR/predictor/{config.json,model.safetensors}.\n"
          "\n"
          "  --out DIR             output directory (created if missing; required)\n"
          "  --preset NAME         tiny | mini | small | base (default small)\n"
          "                          tiny : predictor d 64, 2 layers, 4 heads, ff 128;\n"
          "                                 tokenizer d 32, enc 3, dec 3, 4 heads, ff 64\n"
          "                          mini : predictor d 256, 4 layers, 4 heads, ff 512;\n"
          "                                 tokenizer d 256, enc 4, dec 4, 4 heads, ff 512\n"
          "                          small: predictor d 512, 8 layers, 8 heads, ff 1024;\n"
          "                                 tokenizer as mini (Kronos-Tokenizer-base)\n"
          "                          base : predictor d 832, 12 layers, 16 heads, ff 2048;\n"
          "                                 tokenizer as mini\n"
          "  --seed N              PRNG seed (default 0); same arguments give identical files\n"
          "  --dtype T             f32 | f16 | bf16 float storage (default f32)\n"
          "  --no-learn-te         fixed sinusoidal time tables (learn_te false)\n"
          "  --kv-shift            add per-block kv_shift tensors and \"kv_shift\": true\n"
          "\n"
          "Predictor overrides:\n"
          "  --d-model N  --n-layers N  --n-heads N  --ff-dim N\n"
          "Tokenizer overrides:\n"
          "  --tok-d-model N  --tok-enc-layers N  --tok-dec-layers N  --tok-heads N  "
          "--tok-ff-dim N\n"
          "Both:\n"
          "  --s1-bits N  --s2-bits N   token bits, 1..16 (default 10 each)\n"
          "\n"
          "Constraints: d_model divisible by n_heads and by 4 (the dependency layer has 4\n"
          "heads), every head size even, tokenizer layers >= 2, all sizes positive.\n"
          "  -h, --help            show this help\n",
          f);
}

static void die_usage(const char *fmt, const char *arg) {
    fputs("kronos-mkmodel: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(see kronos-mkmodel --help)\n", stderr);
    exit(2);
}

static int parse_int(const char *flag, const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > MAX_DIM) {
        fprintf(stderr, "kronos-mkmodel: --%s: expected an integer in 1..%d, got '%s'\n", flag,
                MAX_DIM, s);
        fputs("(see kronos-mkmodel --help)\n", stderr);
        exit(2);
    }
    return (int)v;
}

static void apply_preset(struct opts *o, const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const struct preset *p = &presets[i];
        if (strcmp(p->name, name) != 0) continue;
        o->d_model = p->d_model;
        o->n_layers = p->n_layers;
        o->n_heads = p->n_heads;
        o->ff_dim = p->ff_dim;
        o->tok_d_model = p->tok_d_model;
        o->tok_enc_layers = p->tok_enc_layers;
        o->tok_dec_layers = p->tok_dec_layers;
        o->tok_heads = p->tok_heads;
        o->tok_ff = p->tok_ff;
        return;
    }
    die_usage("unknown preset '%s' (tiny, mini, small, base)", name);
}

static void validate(const struct opts *o) {
    char msg[160];
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(msg, sizeof msg, __VA_ARGS__);                                                \
            die_usage("%s", msg);                                                                  \
        }                                                                                          \
    } while (0)
    CHECK(o->d_model % o->n_heads == 0, "--d-model %d is not divisible by --n-heads %d", o->d_model,
          o->n_heads);
    CHECK((o->d_model / o->n_heads) % 2 == 0, "predictor head size %d is odd",
          o->d_model / o->n_heads);
    CHECK(o->d_model % DEP_HEADS == 0 && (o->d_model / DEP_HEADS) % 2 == 0,
          "--d-model %d must be a multiple of 8 (4 dependency heads of even size)", o->d_model);
    CHECK(o->tok_d_model % o->tok_heads == 0, "--tok-d-model %d is not divisible by --tok-heads %d",
          o->tok_d_model, o->tok_heads);
    CHECK((o->tok_d_model / o->tok_heads) % 2 == 0, "tokenizer head size %d is odd",
          o->tok_d_model / o->tok_heads);
    CHECK(o->tok_enc_layers >= 2, "--tok-enc-layers must be >= 2 (got %d)", o->tok_enc_layers);
    CHECK(o->tok_dec_layers >= 2, "--tok-dec-layers must be >= 2 (got %d)", o->tok_dec_layers);
    CHECK(o->s1_bits <= 16, "--s1-bits must be in 1..16 (got %d)", o->s1_bits);
    CHECK(o->s2_bits <= 16, "--s2-bits must be in 1..16 (got %d)", o->s2_bits);
#undef CHECK
}

enum {
    OPT_OUT = 256,
    OPT_PRESET,
    OPT_SEED,
    OPT_DTYPE,
    OPT_NO_LEARN_TE,
    OPT_KV_SHIFT,
    OPT_D_MODEL,
    OPT_N_LAYERS,
    OPT_N_HEADS,
    OPT_FF_DIM,
    OPT_TOK_D_MODEL,
    OPT_TOK_ENC,
    OPT_TOK_DEC,
    OPT_TOK_HEADS,
    OPT_TOK_FF,
    OPT_S1,
    OPT_S2,
};

static void parse_args(int argc, char **argv, struct opts *o) {
    static const struct option longopts[] = {
        {"out", required_argument, 0, OPT_OUT},
        {"preset", required_argument, 0, OPT_PRESET},
        {"seed", required_argument, 0, OPT_SEED},
        {"dtype", required_argument, 0, OPT_DTYPE},
        {"no-learn-te", no_argument, 0, OPT_NO_LEARN_TE},
        {"kv-shift", no_argument, 0, OPT_KV_SHIFT},
        {"d-model", required_argument, 0, OPT_D_MODEL},
        {"n-layers", required_argument, 0, OPT_N_LAYERS},
        {"n-heads", required_argument, 0, OPT_N_HEADS},
        {"ff-dim", required_argument, 0, OPT_FF_DIM},
        {"tok-d-model", required_argument, 0, OPT_TOK_D_MODEL},
        {"tok-enc-layers", required_argument, 0, OPT_TOK_ENC},
        {"tok-dec-layers", required_argument, 0, OPT_TOK_DEC},
        {"tok-heads", required_argument, 0, OPT_TOK_HEADS},
        {"tok-ff-dim", required_argument, 0, OPT_TOK_FF},
        {"s1-bits", required_argument, 0, OPT_S1},
        {"s2-bits", required_argument, 0, OPT_S2},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    /* Overrides apply after the preset, whatever the order on the command line. */
    int *override[OPT_S2 + 1] = {0};
    const char *override_arg[OPT_S2 + 1] = {0};
    override[OPT_D_MODEL] = &o->d_model;
    override[OPT_N_LAYERS] = &o->n_layers;
    override[OPT_N_HEADS] = &o->n_heads;
    override[OPT_FF_DIM] = &o->ff_dim;
    override[OPT_TOK_D_MODEL] = &o->tok_d_model;
    override[OPT_TOK_ENC] = &o->tok_enc_layers;
    override[OPT_TOK_DEC] = &o->tok_dec_layers;
    override[OPT_TOK_HEADS] = &o->tok_heads;
    override[OPT_TOK_FF] = &o->tok_ff;
    override[OPT_S1] = &o->s1_bits;
    override[OPT_S2] = &o->s2_bits;

    const char *preset = "small";
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            exit(0);
        case OPT_OUT:
            o->out = optarg;
            break;
        case OPT_PRESET:
            preset = optarg;
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-')
                die_usage("--seed: expected a non-negative integer, got '%s'", optarg);
            o->seed = v;
            break;
        }
        case OPT_DTYPE:
            if (strcmp(optarg, "f32") == 0)
                o->dtype = DT_F32;
            else if (strcmp(optarg, "f16") == 0)
                o->dtype = DT_F16;
            else if (strcmp(optarg, "bf16") == 0)
                o->dtype = DT_BF16;
            else
                die_usage("--dtype: expected f32, f16 or bf16, got '%s'", optarg);
            break;
        case OPT_NO_LEARN_TE:
            o->learn_te = 0;
            break;
        case OPT_KV_SHIFT:
            o->kv_shift = 1;
            break;
        default:
            if (c > OPT_KV_SHIFT && c <= OPT_S2) {
                override_arg[c] = optarg;
                break;
            }
            die_usage("unknown option or missing argument: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) die_usage("unexpected argument '%s'", argv[optind]);
    if (!o->out || !*o->out) die_usage("%s", "--out DIR is required");

    apply_preset(o, preset);
    /* longopts[] lists the options in enum order, so longopts[k - OPT_OUT] names option k */
    for (int k = OPT_D_MODEL; k <= OPT_S2; k++) {
        if (override_arg[k]) *override[k] = parse_int(longopts[k - OPT_OUT].name, override_arg[k]);
    }
    validate(o);
}

int main(int argc, char **argv) {
    struct opts o = {.seed = 0, .dtype = DT_F32, .learn_te = 1, .s1_bits = 10, .s2_bits = 10};
    parse_args(argc, argv, &o);

    if (mkdir_p(o.out) != 0) return 1;
    if (write_part(&o, "tokenizer", tokenizer_config(&o), build_tokenizer) != 0) return 1;
    if (write_part(&o, "predictor", predictor_config(&o), build_predictor) != 0) return 1;
    return 0;
}
