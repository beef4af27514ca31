/* models.c — kd_models (models.h): the configured folders listed, hashed, loaded (models
 * with the same tokenizer files sharing one tokenizer), each with its pool. */
#include "models.h"
#include "fail.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_fingerprint.h"
#include "sha256.h"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A part's digest: SHA-256 of the digests of dir/config.json and dir/model.safetensors. */
static int part_digest(const char *dir, unsigned char out[32], char *err, size_t errlen) {
    static const char *const files[] = {"config.json", "model.safetensors"};
    unsigned char both[64];
    for (int i = 0; i < 2; i++) {
        char *path = join(dir, files[i]);
        if (!path) return kd_fail(err, errlen, "out of memory");
        int rc = kd_sha256_file(path, both + 32 * i);
        if (rc < 0) kd_fail(err, errlen, "%s: %s", path, strerror(errno));
        free(path);
        if (rc < 0) return -1;
    }
    kd_sha256 s;
    kd_sha256_init(&s);
    kd_sha256_update(&s, both, sizeof both);
    kd_sha256_final(&s, out);
    return 0;
}

static int hash_model(kd_model *md, char *err, size_t errlen) {
    unsigned char d[64], h[32];
    if (part_digest(md->tokenizer_dir, d, err, errlen) < 0 ||
        part_digest(md->predictor_dir, d + 32, err, errlen) < 0)
        return -1;
    kd_sha256_hex(d, md->tokenizer_hash);
    kd_sha256_hex(d + 32, md->predictor_hash);
    kd_sha256 s;
    kd_sha256_init(&s);
    kd_sha256_update(&s, d, sizeof d);
    kd_sha256_final(&s, h);
    kd_sha256_hex(h, md->hash);
    return 0;
}

/* The id a folder gives: its last path component. */
static void id_of_dir(const char *dir, char *id, size_t n) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    snprintf(id, n, "%.*s", (int)(len - start), dir + start);
}

static int valid_id(const char *id, char *err, size_t errlen) {
    size_t n = strlen(id);
    if (n == 0 || n > KD_MODEL_ID_MAX || strspn(id, KD_MODEL_ID_CHARS) != n)
        return kd_fail(err, errlen,
                       "model id '%s': expected 1 to %d letters, digits, '_', '.' or '-' (give "
                       "ID=DIR)",
                       id, KD_MODEL_ID_MAX);
    return 0;
}

/* A slot's own allocations, freed (its model and pool too). */
static void free_slot(kd_model *md) {
    kr_pool_free(md->pool);
    kr_model_free(md->m);
    free(md->tokenizer_dir);
    free(md->predictor_dir);
    free(md->counts);
    memset(md, 0, sizeof *md);
}

static int fill_slot(kd_model *md, const char *id, const char *tok, const char *pred, char *err,
                     size_t errlen) {
    memset(md, 0, sizeof *md);
    snprintf(md->id, sizeof md->id, "%s", id);
    md->tokenizer_of = -1;
    md->tokenizer_dir = strdup(tok);
    md->predictor_dir = strdup(pred);
    md->counts = calloc(1, sizeof *md->counts);
    if (!md->tokenizer_dir || !md->predictor_dir || !md->counts)
        return kd_fail(err, errlen, "out of memory");
    return 0;
}

static int add_entry(kd_models *ms, const char *id, const char *tok, const char *pred, char *err,
                     size_t errlen) {
    if (valid_id(id, err, errlen) < 0) return -1;
    if (kd_models_find(ms, id)) return kd_fail(err, errlen, "model id '%s' is given twice", id);
    if (ms->n >= KD_MODELS_MAX)
        return kd_fail(err, errlen, "model '%s': more than %d models", id, KD_MODELS_MAX);
    kd_model *md = &ms->v[ms->n];
    ms->n++; /* counted at once, so that kd_models_free frees what it holds */
    return fill_slot(md, id, tok, pred, err, errlen);
}

/* One model line, "[ID=]DIR": an id before '=' when what is before it is one. */
static int add_line(kd_models *ms, const char *line, char *err, size_t errlen) {
    char id[KD_MODEL_ID_MAX + 2];
    const char *eq = strchr(line, '='), *dir = line;
    size_t k = eq ? (size_t)(eq - line) : 0;
    if (eq && k > 0 && k <= KD_MODEL_ID_MAX && strspn(line, KD_MODEL_ID_CHARS) == k) {
        snprintf(id, sizeof id, "%.*s", (int)k, line);
        dir = eq + 1;
    } else {
        id_of_dir(line, id, sizeof id);
    }
    char *tok = join(dir, "tokenizer"), *pred = join(dir, "predictor");
    int rc = tok && pred ? add_entry(ms, id, tok, pred, err, errlen)
                         : kd_fail(err, errlen, "out of memory");
    free(tok);
    free(pred);
    return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* models-dir: every subfolder holding tokenizer/ and predictor/, in name order. */
static int add_dir(kd_models *ms, const char *root, char *err, size_t errlen) {
    struct dirent **names;
    int n = scandir(root, &names, NULL, by_name);
    if (n < 0) return kd_fail(err, errlen, "models-dir %s: %s", root, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char *sub = name[0] == '.' ? NULL : join(root, name);
        char *tok = sub ? join(sub, "tokenizer") : NULL,
             *pred = sub ? join(sub, "predictor") : NULL;
        if (rc == 0 && tok && pred && is_dir(tok) && is_dir(pred))
            rc = add_entry(ms, name, tok, pred, err, errlen);
        free(sub);
        free(tok);
        free(pred);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int list_models(kd_models *ms, const kd_config *c, char *err, size_t errlen) {
    if (c->tokenizer && c->predictor) {
        char id[KD_MODEL_ID_MAX + 2];
        id_of_dir(c->predictor, id, sizeof id);
        if (add_entry(ms, id, c->tokenizer, c->predictor, err, errlen) < 0) return -1;
    }
    for (const char *p = c->model; p && *p;) {
        size_t len = strcspn(p, "\n");
        char *line = strndup(p, len);
        if (!line) return kd_fail(err, errlen, "out of memory");
        int rc = add_line(ms, line, err, errlen);
        free(line);
        if (rc < 0) return -1;
        p += len + (p[len] == '\n');
    }
    if (c->models_dir && add_dir(ms, c->models_dir, err, errlen) < 0) return -1;
    if (ms->n == 0) return kd_fail(err, errlen, "models-dir %s: no model folders", c->models_dir);
    return 0;
}

/* Model i hashed, loaded with its settings (sharing an earlier model's tokenizer when its
 * files and weights are the same: a shared tokenizer keeps the packing it was loaded with),
 * fingerprinted, its pool made. */
static int load_one(kd_models *ms, int i, const kd_config *c, const kd_model_overrides *o,
                    char *err, size_t errlen) {
    kd_model *md = &ms->v[i];
    kr_error ke = {0};
    if (kd_model_settings_of(c, md->id, o, &md->set, err, errlen) < 0 ||
        hash_model(md, err, errlen) < 0)
        return -1;
    for (int k = 0; k < i && md->tokenizer_of < 0; k++)
        if (strcmp(ms->v[k].tokenizer_hash, md->tokenizer_hash) == 0 &&
            ms->v[k].set.weights == md->set.weights)
            md->tokenizer_of = ms->v[k].tokenizer_of >= 0 ? ms->v[k].tokenizer_of : k;
    const kr_model_paths paths = {.tokenizer_dir = md->tokenizer_dir,
                                  .predictor_dir = md->predictor_dir,
                                  .max_context = md->set.max_context,
                                  .weights = md->set.weights,
                                  .kv = md->set.kv};
    md->m = md->tokenizer_of >= 0 ? kr_model_load_sharing(&paths, ms->v[md->tokenizer_of].m, &ke)
                                  : kr_model_load(&paths, &ke);
    if (!md->m) return kd_fail(err, errlen, "cannot load model '%s': %s", md->id, ke.msg);
    if (kd_model_fingerprint(md->m, md->id, &md->fingerprint, md->desc, sizeof md->desc, &ke) < 0)
        return kd_fail(err, errlen, "model '%s': its fingerprint: %s", md->id, ke.msg);
    snprintf(md->fp_hex, sizeof md->fp_hex, "%016llx", (unsigned long long)md->fingerprint);
    if (!(md->pool = kr_pool_create(md->m, c->pool_bytes, &ke)))
        return kd_fail(err, errlen, "model '%s': pool-bytes %zu: %s", md->id, c->pool_bytes,
                       ke.msg);
    md->loaded_at = time(NULL);
    return 0;
}

static bool is_known(const void *ctx, const char *id) {
    return kd_models_find(ctx, id) != NULL;
}

int kd_models_load(kd_models *ms, const kd_config *c, char *err, size_t errlen) {
    memset(ms, 0, sizeof *ms);
    /* every slot at once: a model added while serving never moves one a request reads */
    if (!(ms->v = calloc(KD_MODELS_MAX, sizeof *ms->v)))
        return kd_fail(err, errlen, "out of memory");
    if (pthread_mutex_init(&ms->add_lock, NULL) != 0) {
        free(ms->v);
        ms->v = NULL;
        return kd_fail(err, errlen, "models: cannot make a lock");
    }
    int rc = list_models(ms, c, err, errlen);
    char line[256];
    if (rc == 0 && kd_model_options_unknown(c, is_known, ms, line, sizeof line)) {
        char ids[512];
        kd_models_ids(ms, ids, sizeof ids);
        rc = kd_fail(err, errlen, "model-option '%s': no model of that id (the models: %s)", line,
                     ids);
    }
    for (int i = 0; rc == 0 && i < ms->n; i++)
        rc = load_one(ms, i, c, NULL, err, errlen);
    if (rc < 0) kd_models_free(ms);
    return rc;
}

void kd_models_free(kd_models *ms) {
    /* last first: a model sharing a tokenizer goes before the one that holds it */
    if (!ms->v) return;
    for (int i = ms->n - 1; i >= 0; i--)
        free_slot(&ms->v[i]);
    free(ms->v);
    ms->v = NULL;
    ms->n = 0;
    pthread_mutex_destroy(&ms->add_lock);
}

kd_model_add_result kd_models_add(kd_models *ms, const kd_config *c, const char *id,
                                  const char *dir, const kd_model_overrides *o,
                                  const kd_model **out, char *err, size_t errlen) {
    char name[KD_MODEL_ID_MAX + 2];
    if (!id) {
        id_of_dir(dir, name, sizeof name);
        id = name;
    }
    if (valid_id(id, err, errlen) < 0) return KD_MODEL_ADD_INVALID;
    pthread_mutex_lock(&ms->add_lock);
    kd_model_add_result rc = KD_MODEL_ADD_OK;
    const int n = ms->n;
    char *tok = join(dir, "tokenizer"), *pred = join(dir, "predictor");
    if (kd_models_find(ms, id)) {
        kd_fail(err, errlen, "model '%s' is loaded already (DELETE it first)", id);
        rc = KD_MODEL_ADD_EXISTS;
    } else if (n >= KD_MODELS_MAX) {
        kd_fail(err, errlen, "model '%s': all %d model slots are taken", id, KD_MODELS_MAX);
        rc = KD_MODEL_ADD_FULL;
    } else if (!tok || !pred || fill_slot(&ms->v[n], id, tok, pred, err, errlen) < 0 ||
               load_one(ms, n, c, o, err, errlen) < 0) {
        free_slot(&ms->v[n]);
        rc = KD_MODEL_ADD_FAILED;
    } else {
        *out = &ms->v[n];
        ms->n = n + 1; /* published whole: an atomic store after the slot is filled */
    }
    free(tok);
    free(pred);
    pthread_mutex_unlock(&ms->add_lock);
    return rc;
}

const kd_model *kd_models_find(const kd_models *ms, const char *id) {
    for (int i = 0; i < ms->n; i++)
        if (strcmp(ms->v[i].id, id) == 0) return &ms->v[i];
    return NULL;
}

void kd_models_ids(const kd_models *ms, char *out, size_t n) {
    size_t at = 0;
    if (n) out[0] = '\0';
    for (int i = 0; i < ms->n && at < n; i++) {
        int w = snprintf(out + at, n - at, "%s%s", i ? ", " : "", ms->v[i].id);
        if (w < 0) break;
        at += (size_t)w;
    }
}

int kd_model_dirs_tag(const char *model_dir, const char *tokenizer_dir, const char *predictor_dir,
                      char id[KD_MODEL_ID_MAX + 1], char hash[65], char *err, size_t errlen) {
    kd_model md = {
        .tokenizer_dir = model_dir ? join(model_dir, "tokenizer") : (char *)tokenizer_dir,
        .predictor_dir = model_dir ? join(model_dir, "predictor") : (char *)predictor_dir};
    int rc = md.tokenizer_dir && md.predictor_dir ? hash_model(&md, err, errlen)
                                                  : kd_fail(err, errlen, "out of memory");
    if (rc == 0) {
        id_of_dir(model_dir ? model_dir : predictor_dir, md.id, sizeof md.id);
        snprintf(id, KD_MODEL_ID_MAX + 1, "%s", md.id);
        snprintf(hash, 65, "%s", md.hash);
    }
    if (model_dir) {
        free(md.tokenizer_dir);
        free(md.predictor_dir);
    }
    return rc;
}

static int put_tag(json_t *o, const char *id, const char *hash) {
    const char *key = json_object_get(o, "model") ? "model_ref" : "model";
    return json_object_set_new(o, key, json_pack("{s:s,s:s}", "id", id, "hash", hash));
}

int kd_model_tag_json(json_t *body, const char *id, const char *hash) {
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(body, "series"), i,
                       e) if (json_is_object(e) && put_tag(e, id, hash) < 0) return -1;
    return put_tag(body, id, hash);
}

void kd_model_count_request(const kd_model *md) {
    atomic_fetch_add_explicit(&md->counts->requests, 1, memory_order_relaxed);
}

void kd_model_count_tokens(const kd_model *md, unsigned long long n) {
    atomic_fetch_add_explicit(&md->counts->tokens, n, memory_order_relaxed);
}

size_t kd_model_own_bytes(const kd_models *ms, const kd_model *md) {
    (void)ms;
    size_t params = kr_model_param_count(md->m);
    if (md->tokenizer_of >= 0) params -= kr_model_tokenizer_param_count(md->m);
    return params * sizeof(float);
}
