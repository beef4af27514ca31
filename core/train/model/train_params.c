/* train_params.c — the trainable predictor: its config.json (shape, dropout), every
 * tensor of its model.safetensors as float32 with room for a gradient and AdamW's moments,
 * the layers' tensors found by their checkpoint names, and which of them train (depth). */
#include "train_model.h"

#include "safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *time_names[5] = {"minute", "hour", "weekday", "day", "month"};
static const int time_sizes[5] = {60, 24, 7, 32, 13};

static int cfg_num(json_t *root, const char *path, const char *key, double lo, double hi,
                   double dflt, double *out, kr_error *err) {
    json_t *v = json_object_get(root, key);
    if (!v) {
        if (dflt < lo) return kr_fail(err, "%s: %s is missing", path, key);
        *out = dflt;
        return 0;
    }
    if (json_is_boolean(v) && lo == 0 && hi == 1) {
        *out = json_is_true(v);
        return 0;
    }
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi)
        return kr_fail(err, "%s: %s must be a number in [%g, %g]", path, key, lo, hi);
    *out = json_number_value(v);
    return 0;
}

static int read_config(kr_train_model *m, const char *dir, kr_error *err) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return kr_fail(err, "%s: not a JSON object (%s)", path, je.text);
    }
    double v[12];
    const char *ints[6] = {"d_model", "n_layers", "n_heads", "ff_dim", "s1_bits", "s2_bits"};
    const char *drops[4] = {"token_dropout_p", "attn_dropout_p", "resid_dropout_p",
                            "ffn_dropout_p"};
    int rc = 0;
    for (int i = 0; i < 6 && !rc; i++)
        rc = cfg_num(root, path, ints[i], 1, i >= 4 ? 16 : 65536, -1, &v[i], err);
    for (int i = 0; i < 4 && !rc; i++)
        rc = cfg_num(root, path, drops[i], 0, 0.99, 0, &v[6 + i], err);
    if (!rc) rc = cfg_num(root, path, "learn_te", 0, 1, 1, &v[10], err);
    if (!rc) rc = cfg_num(root, path, "kv_shift", 0, 1, 0, &v[11], err);
    if (rc) {
        json_decref(root);
        return -1;
    }
    m->config = root;
    kr_predictor_config *c = &m->pc;
    *c = (kr_predictor_config){(int)v[0], (int)v[1], (int)v[2],  (int)v[3],
                               (int)v[4], (int)v[5], v[10] != 0, v[11] != 0};
    m->p_token = (float)v[6], m->p_attn = (float)v[7], m->p_resid = (float)v[8];
    m->p_ffn = (float)v[9];
    if (c->kv_shift) return kr_fail(err, "%s: kv_shift predictors cannot be trained", path);
    if (c->d_model % c->n_heads || (c->d_model / c->n_heads) % 2 || c->d_model % 8)
        return kr_fail(err,
                       "%s: d_model = %d must split into %d heads of even size and 4 "
                       "of even size",
                       path, c->d_model, c->n_heads);
    return 0;
}

static int find_shaped(kr_train_model *m, const char *name, int64_t d0, int64_t d1, kr_error *err) {
    int i = kr_train_tensor_find(m, name);
    if (i < 0) return kr_fail(err, "predictor: tensor '%s' is missing", name), -1;
    if (m->t[i].shape[0] != d0 || m->t[i].shape[1] != d1)
        return kr_fail(err, "predictor: '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                       (long long)m->t[i].shape[0], (long long)m->t[i].shape[1], (long long)d0,
                       (long long)d1),
               -1;
    return i;
}

static int linear(kr_train_model *m, tr_linear *l, const char *prefix, int out, int in, bool bias,
                  kr_error *err) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    l->out = out, l->in = in, l->b = -1;
    if ((l->w = find_shaped(m, name, out, in, err)) < 0) return -1;
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (bias && (l->b = find_shaped(m, name, out, 1, err)) < 0) return -1;
    return 0;
}

static int block(kr_train_model *m, tr_block *b, int i, kr_error *err) {
    const kr_predictor_config *c = &m->pc;
    int d = c->d_model, ff = c->ff_dim;
    char p[96], name[160];
    snprintf(p, sizeof p, "transformer.%d", i);
#define NAME(s) (snprintf(name, sizeof name, "%s.%s", p, s), name)
    if ((b->norm1 = find_shaped(m, NAME("norm1.weight"), d, 1, err)) < 0 ||
        (b->norm2 = find_shaped(m, NAME("norm2.weight"), d, 1, err)) < 0 ||
        (b->inv_freq =
             find_shaped(m, NAME("self_attn.rotary.inv_freq"), d / c->n_heads / 2, 1, err)) < 0 ||
        linear(m, &b->q, NAME("self_attn.q_proj"), d, d, true, err) ||
        linear(m, &b->k, NAME("self_attn.k_proj"), d, d, true, err) ||
        linear(m, &b->v, NAME("self_attn.v_proj"), d, d, true, err) ||
        linear(m, &b->o, NAME("self_attn.out_proj"), d, d, true, err) ||
        linear(m, &b->w1, NAME("ffn.w1"), ff, d, false, err) ||
        linear(m, &b->w2, NAME("ffn.w2"), d, ff, false, err) ||
        linear(m, &b->w3, NAME("ffn.w3"), ff, d, false, err))
        return -1;
#undef NAME
    return 0;
}

static int layers(kr_train_model *m, kr_error *err) {
    const kr_predictor_config *c = &m->pc;
    int d = c->d_model, v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    if ((m->emb_s1 = find_shaped(m, "embedding.emb_s1.weight", v1, d, err)) < 0 ||
        (m->emb_s2 = find_shaped(m, "embedding.emb_s2.weight", v2, d, err)) < 0 ||
        linear(m, &m->fusion, "embedding.fusion_proj", d, 2 * d, true, err))
        return -1;
    for (int i = 0; i < 5; i++) {
        char name[96];
        snprintf(name, sizeof name,
                 c->learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight",
                 time_names[i]);
        if ((m->time[i] = find_shaped(m, name, time_sizes[i], d, err)) < 0) return -1;
        if (!c->learn_te) m->t[m->time[i]].param = false; /* fixed: no gradient */
    }
    m->blocks = calloc((size_t)c->n_layers, sizeof *m->blocks);
    if (!m->blocks) return kr_fail_code(err, KR_E_NO_MEMORY, "predictor: out of memory");
    for (int i = 0; i < c->n_layers; i++)
        if (block(m, &m->blocks[i], i, err)) return -1;
    char extra[64];
    snprintf(extra, sizeof extra, "transformer.%d.norm1.weight", c->n_layers);
    if (kr_train_tensor_find(m, extra) >= 0)
        return kr_fail(err, "predictor: '%s' beyond n_layers = %d", extra, c->n_layers);
    if ((m->norm = find_shaped(m, "norm.weight", d, 1, err)) < 0 ||
        (m->dep_norm = find_shaped(m, "dep_layer.norm.weight", d, 1, err)) < 0 ||
        linear(m, &m->dep_q, "dep_layer.cross_attn.q_proj", d, d, true, err) ||
        linear(m, &m->dep_k, "dep_layer.cross_attn.k_proj", d, d, true, err) ||
        linear(m, &m->dep_v, "dep_layer.cross_attn.v_proj", d, d, true, err) ||
        linear(m, &m->dep_o, "dep_layer.cross_attn.out_proj", d, d, true, err) ||
        linear(m, &m->proj_s1, "head.proj_s1", v1, d, true, err) ||
        linear(m, &m->proj_s2, "head.proj_s2", v2, d, true, err))
        return -1;
    m->dep_inv_freq = kr_train_tensor_find(m, "dep_layer.cross_attn.rotary.inv_freq");
    return 0;
}

/* every tensor of the file; buffers (inv_freq, integer ones) kept to be written back, not
 * trained */
static int read_tensors(kr_train_model *m, const char *dir, kr_error *err) {
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st_file f;
    if (st_open(&f, path, err)) return -1;
    int rc = -1;
    m->t = calloc((size_t)f.n_tensors + 1, sizeof *m->t);
    if (!m->t) {
        kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *s = &f.tensors[i];
        tr_tensor *t = &m->t[m->n++];
        t->name = strdup(s->name);
        t->ndim = s->ndim;
        t->shape[1] = 1;
        for (int k = 0; k < s->ndim && k < ST_DIMS; k++)
            t->shape[k] = s->shape[k];
        t->n = s->numel;
        snprintf(t->dtype, sizeof t->dtype, "%s", s->dtype == ST_OTHER ? s->dtype_name : "F32");
        if (s->dtype == ST_OTHER) { /* an integer buffer: training carries its bytes */
            t->raw_bytes = s->end - s->begin;
            t->raw = malloc(t->raw_bytes ? t->raw_bytes : 1);
            if (!t->name || !t->raw) {
                kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory", path);
                goto out;
            }
            memcpy(t->raw, f.data + s->begin, t->raw_bytes);
            continue;
        }
        if (s->ndim < 1 || s->ndim > 2) {
            kr_fail(err, "%s: tensor '%s' has %d dimensions", path, s->name, s->ndim);
            goto out;
        }
        t->w = malloc((s->numel ? s->numel : 1) * sizeof(float));
        t->param = !strstr(s->name, ".inv_freq");
        if (!t->name || !t->w) {
            kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        if (st_read_f32(&f, s, t->w, err)) goto out;
    }
    rc = 0;
out:
    st_close(&f);
    return rc;
}

static int moments(kr_train_model *m, kr_error *err) {
    for (int i = 0; i < m->n; i++) {
        tr_tensor *t = &m->t[i];
        if (!t->param) continue;
        t->g = calloc(t->n, sizeof(float));
        t->m = calloc(t->n, sizeof(float));
        t->v = calloc(t->n, sizeof(float));
        if (!t->g || !t->m || !t->v)
            return kr_fail_code(err, KR_E_NO_MEMORY,
                                "predictor: out of memory for '%s''s "
                                "gradient and moments",
                                t->name);
    }
    return 0;
}

kr_train_model *kr_train_load(const char *predictor_dir, kr_error *err) {
    kr_train_model *m = kr_zalloc(sizeof *m, err, "predictor: out of memory");
    if (!m) return NULL;
    if (read_config(m, predictor_dir, err) || read_tensors(m, predictor_dir, err) ||
        layers(m, err) || moments(m, err) || kr_train_set_depth(m, 0, err)) {
        kr_train_free(m);
        return NULL;
    }
    return m;
}

void kr_train_free(kr_train_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        tr_tensor *t = &m->t[i];
        KR_FREE_ALL(t->name, t->w, t->g, t->m, t->v, t->raw);
    }
    json_decref(m->config);
    KR_FREE_ALL(m->t, m->blocks, m->pack, m->trans, m->xpack, m->act_mem, m->grad_mem, m);
}

/* the block a tensor name belongs to, or -1 (embeddings, heads) */
static int block_of(const char *name) {
    int i;
    return sscanf(name, "transformer.%d.", &i) == 1 ? i : -1;
}

int kr_train_set_depth(kr_train_model *m, int depth, kr_error *err) {
    if (depth < 0 || depth > m->pc.n_layers)
        return kr_fail_code(err, KR_E_INVALID, "depth: must be in [0, %d] (n_layers), got %d",
                            m->pc.n_layers, depth);
    m->depth = depth;
    for (int i = 0; i < m->n; i++) {
        tr_tensor *t = &m->t[i];
        int b = block_of(t->name);
        bool head = !strncmp(t->name, "norm.", 5) || !strncmp(t->name, "dep_layer.", 10) ||
                    !strncmp(t->name, "head.", 5);
        t->trains = t->param && (depth == 0 || head || b >= m->pc.n_layers - depth);
    }
    return 0;
}

const kr_predictor_config *kr_train_config(const kr_train_model *m) {
    return &m->pc;
}
int kr_train_tensor_count(const kr_train_model *m) {
    return m->n;
}
int kr_train_tensor_find(const kr_train_model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return i;
    return -1;
}
const char *kr_train_tensor_name(const kr_train_model *m, int i) {
    return i >= 0 && i < m->n ? m->t[i].name : NULL;
}
float *kr_train_tensor_weights(kr_train_model *m, int i, size_t *numel) {
    if (i < 0 || i >= m->n) return NULL;
    if (numel) *numel = m->t[i].n;
    return m->t[i].w;
}
int kr_train_tensor_shape(const kr_train_model *m, int i, int64_t shape[2]) {
    if (i < 0 || i >= m->n) return -1;
    shape[0] = m->t[i].shape[0], shape[1] = m->t[i].shape[1];
    return 0;
}
const float *kr_train_tensor_gradient(const kr_train_model *m, int i) {
    return i >= 0 && i < m->n && m->t[i].trains ? m->t[i].g : NULL;
}
int kr_train_steps(const kr_train_model *m) {
    return m->steps;
}
