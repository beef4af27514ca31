/* loader.c — reads a tokenizer folder and a predictor folder (config.json +
 * model.safetensors, the released Hugging Face layout) into a kr_model.
 *
 * Every tensor inference uses is checked against the shape the config implies; weights
 * are converted to float32 once, here (the linear layers' then packed as float32 or, for
 * weights bf16, rounded to BF16: a BF16 file's exactly as stored but for denormals, flushed),
 * and the files are unmapped afterwards.
 */
#include "matmul_bf16.h"
#include "matmul_q8.h"
#include "model.h"
#include "nn.h"
#include "parallel.h"
#include "safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    kr_model *m;
    st_file st;
    kr_error *err;
} loader;

static const char *const time_names[KR_N_TIME] = {"minute", "hour", "weekday", "day", "month"};
static const int time_sizes[KR_N_TIME] = {60, 24, 7, 32, 13};

/* ---- config.json ------------------------------------------------------------------------ */

static int cfg_int(json_t *root, const char *path, const char *key, int lo, int hi, int *out,
                   kr_error *err) {
    json_t *v = json_object_get(root, key);
    if (!v) return kr_fail(err, "%s: missing key '%s'", path, key);
    if (!json_is_integer(v)) return kr_fail(err, "%s: '%s' must be an integer", path, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return kr_fail(err, "%s: '%s' = %lld is out of range [%d, %d]", path, key, (long long)x, lo,
                       hi);
    *out = (int)x;
    return 0;
}

static int cfg_bool(json_t *root, const char *path, const char *key, bool dflt, bool *out,
                    kr_error *err) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) return kr_fail(err, "%s: '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

static json_t *read_config(const char *dir, char *path, size_t pathlen, kr_error *err) {
    snprintf(path, pathlen, "%s/config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (jerr.line > 0)
            kr_fail(err, "%s: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
        else
            kr_fail(err, "%s", jerr.text); /* jansson names the file and the reason */
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        kr_fail(err, "%s: not a JSON object", path);
        return NULL;
    }
    return root;
}

static int check_heads(const char *path, int d, int n_heads, kr_error *err) {
    if (d % n_heads != 0)
        return kr_fail(err, "%s: d_model = %d is not divisible by n_heads = %d", path, d, n_heads);
    if ((d / n_heads) % 2 != 0)
        return kr_fail(err, "%s: head size %d is odd; RoPE needs an even head size", path,
                       d / n_heads);
    return 0;
}

/* The integer keys of each config.json, with their ranges: one table a part. */
typedef struct {
    const char *key;
    int lo, hi;
    size_t offset; /* of the int in the part's config struct */
} cfg_key;

#define TOKENIZER_KEY(name, lo, hi)                                                                \
    { #name, lo, hi, offsetof(kr_tokenizer_config, name) }
static const cfg_key tokenizer_keys[] = {
    TOKENIZER_KEY(d_in, 1, 64),           TOKENIZER_KEY(d_model, 1, 1 << 16),
    TOKENIZER_KEY(n_heads, 1, 1024),      TOKENIZER_KEY(ff_dim, 1, 1 << 18),
    TOKENIZER_KEY(n_enc_layers, 1, 1024), TOKENIZER_KEY(n_dec_layers, 1, 1024),
    TOKENIZER_KEY(s1_bits, 1, 20),        TOKENIZER_KEY(s2_bits, 1, 20),
};
#define PREDICTOR_KEY(name, lo, hi)                                                                \
    { #name, lo, hi, offsetof(kr_predictor_config, name) }
static const cfg_key predictor_keys[] = {
    PREDICTOR_KEY(d_model, 1, 1 << 16), PREDICTOR_KEY(n_layers, 1, 1024),
    PREDICTOR_KEY(n_heads, 1, 1024),    PREDICTOR_KEY(ff_dim, 1, 1 << 18),
    PREDICTOR_KEY(s1_bits, 1, 20),      PREDICTOR_KEY(s2_bits, 1, 20),
};

/* A config's own rules beyond its integer keys' ranges: 0, or -1 with err set. */
typedef int (*cfg_check)(json_t *root, const char *path, void *out, kr_error *err);

/* Reads dir/config.json's integer keys into the struct at out, then its own rules. */
static int read_config_ints(const char *dir, const cfg_key *keys, size_t n_keys, void *out,
                            cfg_check check, kr_error *err) {
    char path[1100];
    json_t *root = read_config(dir, path, sizeof path, err);
    if (!root) return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_keys; i++)
        rc = cfg_int(root, path, keys[i].key, keys[i].lo, keys[i].hi,
                     (int *)((char *)out + keys[i].offset), err);
    if (rc == 0) rc = check(root, path, out, err);
    json_decref(root);
    return rc;
}

static int check_tokenizer_config(json_t *root, const char *path, void *out, kr_error *err) {
    (void)root;
    const kr_tokenizer_config *c = out;
    if (check_heads(path, c->d_model, c->n_heads, err)) return -1;
    if (c->d_in != KR_D_IN)
        return kr_fail(err,
                       "%s: d_in = %d, but kronosd forecasts the %d columns open, high, low, "
                       "close, volume, amount",
                       path, c->d_in, KR_D_IN);
    return 0;
}

static int check_predictor_config(json_t *root, const char *path, void *out, kr_error *err) {
    kr_predictor_config *c = out;
    if (cfg_bool(root, path, "learn_te", true, &c->learn_te, err) ||
        cfg_bool(root, path, "kv_shift", false, &c->kv_shift, err) ||
        check_heads(path, c->d_model, c->n_heads, err))
        return -1;
    if (c->d_model % KR_DEP_HEADS != 0 || (c->d_model / KR_DEP_HEADS) % 2 != 0)
        return kr_fail(err,
                       "%s: d_model = %d must split into %d heads of even size for the "
                       "dependency-aware layer",
                       path, c->d_model, KR_DEP_HEADS);
    return 0;
}

static int read_tokenizer_config(const char *dir, kr_tokenizer_config *c, kr_error *err) {
    return read_config_ints(dir, tokenizer_keys, sizeof tokenizer_keys / sizeof *tokenizer_keys, c,
                            check_tokenizer_config, err);
}

static int read_predictor_config(const char *dir, kr_predictor_config *c, kr_error *err) {
    return read_config_ints(dir, predictor_keys, sizeof predictor_keys / sizeof *predictor_keys, c,
                            check_predictor_config, err);
}

/* ---- tensors ---------------------------------------------------------------------------- */

static float *track(loader *L, size_t n) {
    kr_model *m = L->m;
    if (m->n_allocs == m->cap_allocs) {
        int cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        float **a = realloc(m->allocs, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        m->allocs = a;
        m->cap_allocs = cap;
    }
    float *p = kr_alloc_large(n * sizeof(float));
    if (p) m->allocs[m->n_allocs++] = p;
    return p;
}

static void shape_str(const int64_t *shape, int ndim, char *out, size_t n) {
    size_t used = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used +=
            (size_t)snprintf(out + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < n) snprintf(out + used, n - used, "]");
}

/* Loads tensor `name` of the expected shape (d1 == 0 means one dimension) into dst, or
 * into a new buffer when dst is NULL. */
static const float *tensor_into(loader *L, const char *name, int d0, int d1, float *dst);

static const float *tensor(loader *L, const char *name, int d0, int d1) {
    return tensor_into(L, name, d0, d1, NULL);
}

static const float *tensor_into(loader *L, const char *name, int d0, int d1, float *dst) {
    const st_tensor *t = st_find(&L->st, name);
    if (!t) {
        kr_fail(L->err, "%s: missing tensor '%s'", L->st.path, name);
        return NULL;
    }
    int64_t want[2] = {d0, d1};
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char have[128], exp[64];
        shape_str(t->shape, t->ndim, have, sizeof have);
        shape_str(want, ndim, exp, sizeof exp);
        kr_fail(L->err, "%s: tensor '%s' has shape %s, but config.json implies %s", L->st.path,
                name, have, exp);
        return NULL;
    }
    if (!dst) dst = track(L, t->numel);
    if (!dst) {
        kr_fail_code(L->err, KR_E_NO_MEMORY, "%s: out of memory for tensor '%s'", L->st.path, name);
        return NULL;
    }
    if (st_read_f32(&L->st, t, dst, L->err) != 0) return NULL;
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(dst[i])) {
            kr_fail(L->err, "%s: tensor '%s' holds a non-finite value at index %zu", L->st.path,
                    name, i);
            return NULL;
        }
    L->m->n_params += t->numel;
    return dst;
}

/* name = a + b; tensor names are short, so a truncation means a bug, reported as such */
static const char *cat(char *buf, size_t n, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb + 1 > n) la = lb = 0;
    memcpy(buf, a, la);
    memcpy(buf + la, b, lb);
    buf[la + lb] = '\0';
    return buf;
}

/* A Linear; w and b (optional) say where to put its weight and bias, NULL for new buffers. */
static int linear_into(loader *L, kr_linear *l, const char *prefix, int out, int in, bool bias,
                       float *w, float *b) {
    char name[300];
    cat(name, sizeof name, prefix, ".weight");
    l->out = out;
    l->in = in;
    if (!(l->w = tensor_into(L, name, out, in, w))) return -1;
    l->b = NULL;
    if (bias) {
        cat(name, sizeof name, prefix, ".bias");
        if (!(l->b = tensor_into(L, name, out, 0, b))) return -1;
    }
    return 0;
}

static int linear(loader *L, kr_linear *l, const char *prefix, int out, int in, bool bias) {
    return linear_into(L, l, prefix, out, in, bias, NULL, NULL);
}

/* Loads n Linears of the same input size, outs[i] rows each, stacked into one (parts[i]
 * their views). */
static int stacked_outs(loader *L, kr_linear *whole, kr_linear *const *parts,
                        const char *const *names, int n, const int *outs, int in, bool bias) {
    size_t rows = 0;
    for (int i = 0; i < n; i++)
        rows += (size_t)outs[i];
    float *w = track(L, rows * in), *b = bias ? track(L, rows) : NULL;
    if (!w || (bias && !b))
        return kr_fail_code(L->err, KR_E_NO_MEMORY, "out of memory for %s", names[0]);
    for (size_t i = 0, at = 0; i < (size_t)n; at += (size_t)outs[i++])
        if (linear_into(L, parts[i], names[i], outs[i], in, bias, w + at * in,
                        bias ? b + at : NULL))
            return -1;
    *whole = (kr_linear){.w = w, .b = b, .out = (int)rows, .in = in};
    return 0;
}

/* Loads n (at most 3: q, k, v) Linears of the same shape stacked into one (parts[i] their
 * views). */
static int stacked(loader *L, kr_linear *whole, kr_linear *const *parts, const char *const *names,
                   int n, int out, int in, bool bias) {
    int outs[3];
    if (n > 3) return kr_fail(L->err, "model load: %d layers stacked, at most 3", n);
    for (int i = 0; i < n; i++)
        outs[i] = out;
    return stacked_outs(L, whole, parts, names, n, outs, in, bias);
}

static int block(loader *L, kr_block *b, const char *prefix, int d, int n_heads, int ff,
                 bool kv_shift) {
    char name[256];
    b->d = d;
    b->n_heads = n_heads;
    b->hd = d / n_heads;
    b->ff = ff;
#define NAME(suffix) cat(name, sizeof name, prefix, "." suffix)
    if (!(b->norm1 = tensor(L, NAME("norm1.weight"), d, 0))) return -1;
    if (!(b->norm2 = tensor(L, NAME("norm2.weight"), d, 0))) return -1;
    char qn[300], kn[300], vn[300], w1n[300], w3n[300];
    cat(qn, sizeof qn, prefix, ".self_attn.q_proj");
    cat(kn, sizeof kn, prefix, ".self_attn.k_proj");
    cat(vn, sizeof vn, prefix, ".self_attn.v_proj");
    cat(w1n, sizeof w1n, prefix, ".ffn.w1");
    cat(w3n, sizeof w3n, prefix, ".ffn.w3");
    kr_linear *qkv[] = {&b->q, &b->k, &b->v}, *w13[] = {&b->w1, &b->w3};
    const char *qkv_names[] = {qn, kn, vn}, *w13_names[] = {w1n, w3n};
    if (stacked(L, &b->qkv, qkv, qkv_names, 3, d, d, true) ||
        linear(L, &b->o, NAME("self_attn.out_proj"), d, d, true) ||
        stacked(L, &b->w13, w13, w13_names, 2, ff, d, false) ||
        linear(L, &b->w2, NAME("ffn.w2"), d, ff, false))
        return -1;
    if (!(b->inv_freq = tensor(L, NAME("self_attn.rotary.inv_freq"), b->hd / 2, 0))) return -1;
    b->rope_len = L->m->max_context;
    float *cs = track(L, (size_t)b->rope_len * b->hd);
    if (!cs)
        return kr_fail_code(L->err, KR_E_NO_MEMORY, "out of memory for the RoPE table of %s",
                            prefix);
    kr_rope_table(cs, b->rope_len, b->hd, b->inv_freq);
    b->rope_cs = cs;
    b->kv_shift = NULL;
    if (kv_shift) {
        if (!(b->kv_shift = tensor(L, NAME("self_attn.kv_shift"), 4, n_heads))) return -1;
    } else if (st_find(&L->st, NAME("self_attn.kv_shift"))) {
        return kr_fail(L->err,
                       "%s: tensor '%s' is present but config.json does not set "
                       "\"kv_shift\": true",
                       L->st.path, name);
    }
#undef NAME
    return 0;
}

/* ---- packing for the kernels -------------------------------------------------------------- */

/* Frees one tracked buffer (the torch-layout weights, once packed). */
static void untrack(loader *L, const float *p) {
    kr_model *m = L->m;
    for (int i = 0; i < m->n_allocs; i++)
        if (m->allocs[i] == p) {
            free(m->allocs[i]);
            m->allocs[i] = m->allocs[--m->n_allocs];
            return;
        }
}

/* The precision a layer is packed in: the model's weights mode, but float32 for the layers
 * of the kinds kept (kr_model_paths.keep_f32), and int8 only where int8_ok (an inner layer) */
static kr_precision layer_mode(const loader *L, unsigned kind, bool int8_ok) {
    const kr_precision w = L->m->weights;
    if (L->m->keep_f32 & kind) return KR_PREC_F32;
    return w == KR_PREC_INT8 && !int8_ok ? KR_PREC_F32 : w;
}

/* l's weights packed for the kernels in mode: as float32, as BF16, or as int8 blocks (float32
 * where the input is too long for them); l->w kept */
static int pack_weights(loader *L, kr_linear *l, kr_precision mode) {
    size_t n = kr_linear_packed_floats(l->out, l->in);
    bool bf = mode == KR_PREC_BF16 && l->in <= KR_BF16_MAX_IN;
    bool q8 = mode == KR_PREC_INT8 && l->in <= KR_Q8_MAX_IN;
    size_t nq = kr_q8_scales(l->out, l->in);   /* int8 blocks: 32 bytes, a scale each */
    size_t nh = kr_bf16_packed(l->out, l->in); /* BF16 values */
    float *wp = track(L, q8 ? nq * (KR_Q8_BLOCK / sizeof(float) + 1) : bf ? (nh + 1) / 2 : n);
    if (!wp)
        return kr_fail_code(L->err, KR_E_NO_MEMORY,
                            "model load: out of memory packing a %dx%d weight", l->out, l->in);
    if (q8) {
        kr_q8_pack((int8_t *)(wp + nq), wp, l->w, l->out, l->in);
        l->ws = wp;
        l->wq = (const int8_t *)(wp + nq);
    } else if (bf) {
        kr_bf16_pack((uint16_t *)wp, l->w, l->out, l->in);
        l->wh = (const uint16_t *)wp;
    } else {
        kr_linear_pack(wp, l->w, l->out, l->in);
        l->wp = wp;
    }
    return 0;
}

static int pack_as(loader *L, kr_linear *l, kr_precision mode) {
    if (pack_weights(L, l, mode)) return -1;
    untrack(L, l->w);
    l->w = NULL;
    return 0;
}

/* An inner layer, packed as the model's weights say (int8 included) */
static int pack(loader *L, kr_linear *l) {
    return pack_as(L, l, layer_mode(L, 0, true));
}

/* q, k, v and w1, w3 were views into the stacked matrices, which packing replaces: only
 * the stacked products are used from here on. */
static int pack_block(loader *L, kr_block *b) {
    kr_linear *parts[] = {&b->q, &b->k, &b->v, &b->w1, &b->w3};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        parts[i]->w = parts[i]->b = NULL;
    return pack(L, &b->qkv) || pack(L, &b->o) || pack(L, &b->w13) || pack(L, &b->w2) ? -1 : 0;
}

/* dep_kv and proj_s1 are views into dep_kv_s1 (model.h). Packed whole when both are packed
 * alike and dep_kv's columns fill whole panels, so that the views' packed forms are its first
 * and last panels; else each view packed on its own and the stacked product left unused (wp
 * NULL). */
static int pack_dep_s1(loader *L) {
    kr_predictor_weights *p = &L->m->pred;
    const float *whole = p->dep_kv_s1.w;
    const kr_precision modes[2] = {layer_mode(L, 0, true), layer_mode(L, KR_KEEP_HEADS, false)};
    p->dep_k.w = p->dep_k.b = p->dep_v.w = p->dep_v.b = NULL; /* views into dep_kv's */
    if (modes[0] == modes[1] &&
        kr_linear_packed_floats(p->dep_kv.out, p->dep_kv.in) ==
            (size_t)p->dep_kv.out * p->dep_kv.in) { /* no padding panel between the two */
        if (pack_as(L, &p->dep_kv_s1, modes[0])) return -1;
        size_t at = (size_t)p->dep_kv.out * p->dep_kv.in; /* proj_s1's first panel */
        p->dep_kv.wp = p->dep_kv_s1.wp;
        p->dep_kv.wh = p->dep_kv_s1.wh;
        p->proj_s1.wp = p->dep_kv_s1.wp ? p->dep_kv_s1.wp + at : NULL;
        p->proj_s1.wh =
            p->dep_kv_s1.wh ? p->dep_kv_s1.wh + kr_bf16_packed(p->dep_kv.out, p->dep_kv.in) : NULL;
        p->dep_kv.w = p->proj_s1.w = NULL;
        return 0;
    }
    kr_linear *views[] = {&p->dep_kv, &p->proj_s1};
    for (int i = 0; i < 2; i++) {
        if (pack_weights(L, views[i], modes[i])) return -1;
        views[i]->w = NULL;
    }
    untrack(L, whole);
    p->dep_kv_s1.w = p->dep_kv_s1.wp = NULL;
    p->dep_kv_s1.wh = NULL;
    return 0;
}

/* With int8 weights, the layers that stay float32: those at the model's edges (the
 * embeddings of the candles and of the codes, the tokenizer's output head, the predictor's
 * s1 and s2 heads). They are a small share of the bytes; the heads' logits are the
 * forecast's distribution itself, and an input of 6 features is not a block of 32. A layer
 * whose input is longer than KR_Q8_MAX_IN stays float32 too (the kernels quantise a task's
 * rows on its stack). With BF16 weights the edges are BF16 too, unless keep_f32 keeps them:
 * the heads (KR_KEEP_HEADS), the tokenizer's edge layers and the predictor's fusion of the
 * code embeddings (KR_KEEP_EMBEDDINGS). */
static int pack_all(loader *L) {
    kr_tokenizer_weights *t = &L->m->tok;
    kr_predictor_weights *p = &L->m->pred;
    /* a shared tokenizer was packed when its own model loaded */
    kr_linear *tok_edges[] = {&t->embed, &t->quant_embed, &t->post_quant_embed, &t->head};
    kr_linear *inner[] = {&p->dep_q, &p->dep_o};
    const bool own_tokenizer = !L->m->tok_shared;
    if (pack_dep_s1(L) || pack_as(L, &p->proj_s2, layer_mode(L, KR_KEEP_HEADS, false)) ||
        pack_as(L, &p->fusion, layer_mode(L, KR_KEEP_EMBEDDINGS, true)))
        return -1;
    for (size_t i = 0; i < sizeof inner / sizeof *inner; i++)
        if (pack(L, inner[i])) return -1;
    for (size_t i = 0; own_tokenizer && i < sizeof tok_edges / sizeof *tok_edges; i++)
        if (pack_as(L, tok_edges[i], layer_mode(L, KR_KEEP_EMBEDDINGS, false))) return -1;
    for (int i = 0; i < t->n_enc && own_tokenizer; i++)
        if (pack_block(L, &t->enc[i])) return -1;
    for (int i = 0; i < t->n_dec && own_tokenizer; i++)
        if (pack_block(L, &t->dec[i])) return -1;
    for (int i = 0; i < p->n_layers; i++)
        if (pack_block(L, &p->blocks[i])) return -1;
    return 0;
}

/* A config that says fewer blocks than the file holds contradicts the tensors. */
static int check_no_extra_block(loader *L, const char *prefix, int n, const char *key) {
    char name[256];
    snprintf(name, sizeof name, "%s.%d.norm1.weight", prefix, n);
    if (st_find(&L->st, name))
        return kr_fail(L->err, "%s: holds tensor '%s', more blocks than config.json's %s says",
                       L->st.path, name, key);
    return 0;
}

static int blocks(loader *L, kr_block **out, int n, const char *prefix, int d, int heads, int ff,
                  bool kv_shift) {
    *out = calloc((size_t)(n ? n : 1), sizeof **out);
    if (!*out)
        return kr_fail_code(L->err, KR_E_NO_MEMORY, "out of memory for %d %s blocks", n, prefix);
    for (int i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s.%d", prefix, i);
        if (block(L, &(*out)[i], p, d, heads, ff, kv_shift)) return -1;
    }
    return 0;
}

static int open_weights(loader *L, const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return st_open(&L->st, path, L->err);
}

static int load_tokenizer(loader *L, const char *dir) {
    kr_model *m = L->m;
    const kr_tokenizer_config *c = &m->tc;
    kr_tokenizer_weights *w = &m->tok;
    int d = c->d_model, nb = c->s1_bits + c->s2_bits;
    if (open_weights(L, dir)) return -1;
    w->n_enc = c->n_enc_layers - 1;
    w->n_dec = c->n_dec_layers - 1;
    int rc = -1;
    if (linear(L, &w->embed, "embed", d, c->d_in, true) ||
        blocks(L, &w->enc, w->n_enc, "encoder", d, c->n_heads, c->ff_dim, false) ||
        check_no_extra_block(L, "encoder", w->n_enc, "n_enc_layers (blocks = n_enc_layers - 1)") ||
        linear(L, &w->quant_embed, "quant_embed", nb, d, true) ||
        linear(L, &w->post_quant_embed, "post_quant_embed", d, nb, true) ||
        blocks(L, &w->dec, w->n_dec, "decoder", d, c->n_heads, c->ff_dim, false) ||
        check_no_extra_block(L, "decoder", w->n_dec, "n_dec_layers (blocks = n_dec_layers - 1)") ||
        linear(L, &w->head, "head", c->d_in, d, true))
        goto out;
    rc = 0;
out:
    st_close(&L->st);
    return rc;
}

static int time_tables(loader *L) {
    kr_model *m = L->m;
    int d = m->pc.d_model;
    for (int i = 0; i < KR_N_TIME; i++) {
        char name[128], other[128];
        const char *learned = "time_emb.%s_embed.weight", *fixed = "time_emb.%s_embed.emb.weight";
        snprintf(name, sizeof name, m->pc.learn_te ? learned : fixed, time_names[i]);
        snprintf(other, sizeof other, m->pc.learn_te ? fixed : learned, time_names[i]);
        if (!st_find(&L->st, name) && st_find(&L->st, other))
            return kr_fail(L->err,
                           "%s: config.json says learn_te = %s but the file holds '%s' (the "
                           "learn_te = %s form)",
                           L->st.path, m->pc.learn_te ? "true" : "false", other,
                           m->pc.learn_te ? "false" : "true");
        if (!(m->pred.time[i] = tensor(L, name, time_sizes[i], d))) return -1;
    }
    return 0;
}

static int load_predictor(loader *L, const char *dir) {
    kr_model *m = L->m;
    const kr_predictor_config *c = &m->pc;
    kr_predictor_weights *w = &m->pred;
    int d = c->d_model, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    kr_linear *dep_kv_s1[] = {&w->dep_k, &w->dep_v, &w->proj_s1};
    const char *dep_kv_s1_names[] = {"dep_layer.cross_attn.k_proj", "dep_layer.cross_attn.v_proj",
                                     "head.proj_s1"};
    int dep_kv_s1_outs[] = {d, d, v1};
    if (open_weights(L, dir)) return -1;
    w->n_layers = c->n_layers;
    int rc = -1;
    if (!(w->emb_s1 = tensor(L, "embedding.emb_s1.weight", v1, d)) ||
        !(w->emb_s2 = tensor(L, "embedding.emb_s2.weight", v2, d)) ||
        linear(L, &w->fusion, "embedding.fusion_proj", d, 2 * d, true) || time_tables(L) ||
        blocks(L, &w->blocks, w->n_layers, "transformer", d, c->n_heads, c->ff_dim, c->kv_shift) ||
        check_no_extra_block(L, "transformer", w->n_layers, "n_layers") ||
        !(w->norm = tensor(L, "norm.weight", d, 0)) ||
        linear(L, &w->dep_q, "dep_layer.cross_attn.q_proj", d, d, true) ||
        stacked_outs(L, &w->dep_kv_s1, dep_kv_s1, dep_kv_s1_names, 3, dep_kv_s1_outs, d, true) ||
        linear(L, &w->dep_o, "dep_layer.cross_attn.out_proj", d, d, true) ||
        !(w->dep_norm = tensor(L, "dep_layer.norm.weight", d, 0)) ||
        linear(L, &w->proj_s2, "head.proj_s2", v2, d, true))
        goto out;
    /* dep_k and dep_v's columns then proj_s1's: views of the stacked rows */
    w->dep_kv = (kr_linear){.w = w->dep_kv_s1.w, .b = w->dep_kv_s1.b, .out = 2 * d, .in = d};
    w->proj_s1 = (kr_linear){
        .w = w->dep_kv_s1.w + (size_t)2 * d * d, .b = w->dep_kv_s1.b + 2 * d, .out = v1, .in = d};
    rc = 0;
out:
    st_close(&L->st);
    return rc;
}

/* The s2 head's query for every s1 token (model.h): dep_q over all rows of emb_s1. */
static int dep_q_table(loader *L) {
    kr_predictor_weights *w = &L->m->pred;
    int v1 = 1 << L->m->pc.s1_bits;
    float *t = track(L, (size_t)v1 * L->m->pc.d_model);
    if (!t)
        return kr_fail_code(L->err, KR_E_NO_MEMORY,
                            "model load: out of memory for the s2 head's query table");
    kr_linear_forward(t, w->emb_s1, v1, &w->dep_q);
    w->dep_q_table = t;
    return 0;
}

/* kr_model_load, or with tok_from's tokenizer (its config and weights) when given. */
static kr_model *model_load(const kr_model_paths *paths, const kr_model *tok_from, kr_error *err) {
    if (!paths || !paths->tokenizer_dir || !paths->predictor_dir) {
        kr_fail(err, "model load: both a tokenizer and a predictor folder are required");
        return NULL;
    }
    int max_context = paths->max_context ? paths->max_context : 512;
    if (max_context < 1 || max_context > 1 << 16) {
        kr_fail(err, "model load: max_context = %d is outside [1, 65536]", max_context);
        return NULL;
    }
    kr_parallel_threads(); /* start the pool, and with it single-threaded BLAS */
    kr_model *m = calloc(1, sizeof *m);
    if (!m) {
        kr_fail_code(err, KR_E_NO_MEMORY, "model load: out of memory");
        return NULL;
    }
    m->max_context = max_context;
    m->weights = paths->weights;
    m->kv = paths->kv;
    m->keep_f32 = paths->keep_f32;
    if (m->weights != KR_PREC_F32 && m->weights != KR_PREC_BF16 && m->weights != KR_PREC_INT8) {
        kr_fail_code(err, KR_E_INVALID, "model load: weights = %d is not a precision",
                     (int)m->weights);
        goto fail;
    }
    if (m->keep_f32 & ~(unsigned)(KR_KEEP_HEADS | KR_KEEP_EMBEDDINGS)) {
        kr_fail_code(err, KR_E_INVALID,
                     "model load: keep_f32 = %#x: only KR_KEEP_HEADS and "
                     "KR_KEEP_EMBEDDINGS are layers to keep",
                     m->keep_f32);
        goto fail;
    }
    if (m->kv != KR_PREC_F32 && m->kv != KR_PREC_BF16) {
        kr_fail_code(err, KR_E_INVALID, "model load: kv: must be f32 or bf16, got %s",
                     m->kv == KR_PREC_INT8 ? "int8" : "a value that is not a precision");
        goto fail;
    }
    loader L = {.m = m, .err = err};
    if (tok_from) {
        m->tc = tok_from->tc;
        m->tok = tok_from->tok;
        m->tok_shared = true;
        m->n_tok_params = m->n_params = tok_from->n_tok_params;
    } else if (read_tokenizer_config(paths->tokenizer_dir, &m->tc, err)) {
        goto fail;
    }
    if (read_predictor_config(paths->predictor_dir, &m->pc, err)) goto fail;
    if (m->tc.s1_bits != m->pc.s1_bits || m->tc.s2_bits != m->pc.s2_bits) {
        kr_fail(err, "model load: tokenizer bits (%d+%d) and predictor bits (%d+%d) differ",
                m->tc.s1_bits, m->tc.s2_bits, m->pc.s1_bits, m->pc.s2_bits);
        goto fail;
    }
    if (!tok_from) {
        if (load_tokenizer(&L, paths->tokenizer_dir)) goto fail;
        m->n_tok_params = m->n_params;
    }
    if (load_predictor(&L, paths->predictor_dir) || pack_all(&L) || dep_q_table(&L)) goto fail;
    return m;
fail:
    kr_model_free(m);
    return NULL;
}

kr_model *kr_model_load(const kr_model_paths *paths, kr_error *err) {
    return model_load(paths, NULL, err);
}

kr_model *kr_model_load_sharing(const kr_model_paths *paths, const kr_model *tokenizer_of,
                                kr_error *err) {
    if (!tokenizer_of) {
        kr_fail(err, "model load: no model to share a tokenizer with");
        return NULL;
    }
    /* a shared tokenizer keeps the packing it was loaded with */
    if (paths && tokenizer_of->weights != paths->weights) {
        kr_fail_code(err, KR_E_INVALID,
                     "model load: weights = %d, but the model whose tokenizer is shared has %d",
                     (int)paths->weights, (int)tokenizer_of->weights);
        return NULL;
    }
    if (paths && (paths->keep_f32 ^ tokenizer_of->keep_f32) & KR_KEEP_EMBEDDINGS) {
        kr_fail_code(err, KR_E_INVALID,
                     "model load: keep_f32: the tokenizer's edge layers are %s here, but %s in "
                     "the model whose tokenizer is shared",
                     paths->keep_f32 & KR_KEEP_EMBEDDINGS ? "kept" : "not kept",
                     tokenizer_of->keep_f32 & KR_KEEP_EMBEDDINGS ? "kept" : "not kept");
        return NULL;
    }
    return model_load(paths, tokenizer_of, err);
}

void kr_model_free(kr_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_allocs; i++)
        free(m->allocs[i]);
    free(m->allocs);
    if (!m->tok_shared) {
        free(m->tok.enc);
        free(m->tok.dec);
    }
    free(m->pred.blocks);
    free(m);
}
