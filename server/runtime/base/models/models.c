/* models.c — kd_models (models.h): the configured folders listed, hashed, loaded (models
 * with the same tokenizer files sharing one tokenizer), each with its pool; models added
 * and removed while serving, and the references that keep a removed one until it is
 * unused. */
#include "models.h"
#include "fail.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
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

/* The listed model of this id; with lock held (or before serving). */
static kd_model *find_live(const kd_models *ms, const char *id) {
    for (int i = 0; i < ms->n; i++)
        if (ms->v[i].used && ms->v[i].live && strcmp(ms->v[i].id, id) == 0) return &ms->v[i];
    return NULL;
}

/* A removed model without references freed, and its reference on the model whose
 * tokenizer it borrowed dropped; with lock held. */
static void free_if_unused(kd_models *ms, kd_model *md) {
    while (md && md->used && !md->live && md->refs <= 0) {
        const int owner = md->tokenizer_of;
        if (ms->on_free) ms->on_free(ms->on_free_ctx, md->m);
        free_slot(md);
        md = owner >= 0 ? &ms->v[owner] : NULL; /* the tokenizer's owner: one user fewer */
        if (md) md->refs--;
    }
}

static int add_entry(kd_models *ms, const char *id, const char *tok, const char *pred, char *err,
                     size_t errlen) {
    if (valid_id(id, err, errlen) < 0) return -1;
    if (find_live(ms, id)) return kd_fail(err, errlen, "model id '%s' is given twice", id);
    if (ms->n >= KD_MODELS_MAX)
        return kd_fail(err, errlen, "model '%s': more than %d models", id, KD_MODELS_MAX);
    kd_model *md = &ms->v[ms->n];
    ms->n++; /* counted at once, so that kd_models_free frees what it holds */
    if (fill_slot(md, id, tok, pred, err, errlen) < 0) return -1;
    md->used = md->live = md->configured = true;
    return 0;
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

/* The loaded model holding the tokenizer of these files (the one that loaded it), or -1;
 * with lock held. */
static int tokenizer_root(const kd_models *ms, int i) {
    for (int k = 0; k < ms->n; k++) {
        const kd_model *o = &ms->v[k];
        if (k != i && o->used && o->m && strcmp(o->tokenizer_hash, ms->v[i].tokenizer_hash) == 0 &&
            o->set.weights == ms->v[i].set.weights)
            return o->tokenizer_of >= 0 ? o->tokenizer_of : k;
    }
    return -1;
}

/* The settings c gives every model (kd_config_load checked them). */
static int daemon_wide(const kd_config *c, kd_model_settings *s, char *err, size_t errlen) {
    kr_error ke = {0};
    *s = (kd_model_settings){.max_context = c->max_context};
    if (kr_precision_parse(c->weights, "weights", &s->weights, &ke) != 0 ||
        kr_kv_precision_parse(c->kv, "kv", &s->kv, &ke) != 0)
        return kd_fail(err, errlen, "%s", ke.msg);
    return 0;
}

/* Model i hashed, loaded with its settings (sharing a loaded model's tokenizer when its
 * files and weights are the same, a shared tokenizer keeping the packing it was loaded
 * with: a reference on that model), fingerprinted, its pool made. */
static int load_one(kd_models *ms, int i, const kd_config *c, const kd_model_overrides *o,
                    char *err, size_t errlen) {
    kd_model *md = &ms->v[i];
    kr_error ke = {0};
    if (daemon_wide(c, &md->set, err, errlen) < 0 ||
        kd_model_settings_of(c->model_option, md->id, o, &md->set, err, errlen) < 0 ||
        hash_model(md, err, errlen) < 0)
        return -1;
    pthread_mutex_lock(&ms->lock);
    md->tokenizer_of = tokenizer_root(ms, i);
    if (md->tokenizer_of >= 0) ms->v[md->tokenizer_of].refs++;
    pthread_mutex_unlock(&ms->lock);
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

/* whether a model of this id is listed (at start, before any request) */
static bool is_listed(const void *ctx, const char *id) {
    const kd_models *ms = ctx;
    for (int i = 0; i < ms->n; i++)
        if (ms->v[i].used && strcmp(ms->v[i].id, id) == 0) return true;
    return false;
}

int kd_models_load(kd_models *ms, const kd_config *c, char *err, size_t errlen) {
    memset(ms, 0, sizeof *ms);
    /* every slot at once: a model added while serving never moves one a request reads */
    if (!(ms->v = calloc(KD_MODELS_MAX, sizeof *ms->v)))
        return kd_fail(err, errlen, "out of memory");
    if (pthread_mutex_init(&ms->lock, NULL) != 0) {
        free(ms->v);
        ms->v = NULL;
        return kd_fail(err, errlen, "models: cannot make a lock");
    }
    if (pthread_mutex_init(&ms->change_lock, NULL) != 0) {
        pthread_mutex_destroy(&ms->lock);
        free(ms->v);
        ms->v = NULL;
        return kd_fail(err, errlen, "models: cannot make a lock");
    }
    int rc = list_models(ms, c, err, errlen);
    char line[256];
    if (rc == 0 && kd_model_options_unknown(c->model_option, is_listed, ms, line, sizeof line)) {
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
    /* borrowers first: a model sharing a tokenizer goes before the one that holds it */
    if (!ms->v) return;
    for (int pass = 0; pass < 2; pass++)
        for (int i = ms->n - 1; i >= 0; i--)
            if (pass == 1 || (ms->v[i].used && ms->v[i].tokenizer_of >= 0)) free_slot(&ms->v[i]);
    free(ms->v);
    ms->v = NULL;
    ms->n = 0;
    pthread_mutex_destroy(&ms->lock);
    pthread_mutex_destroy(&ms->change_lock);
}

/* With the model being loaded in slot i counted: idle listed models unloaded least
 * recently used first until every model's weights fit budget (0: no limit); -1 with err
 * when they cannot. With lock held. */
static int make_room(kd_models *ms, int i, size_t budget, char *err, size_t errlen) {
    const size_t need = kd_model_own_bytes(ms, &ms->v[i]);
    for (;;) {
        size_t held = 0;
        for (int k = 0; k < ms->n; k++)
            if (ms->v[k].used) held += kd_model_own_bytes(ms, &ms->v[k]);
        if (!budget || held + need <= budget) return 0;
        kd_model *lru = NULL;
        for (int k = 1; k < ms->n; k++) { /* never the default, slot 0 */
            kd_model *o = &ms->v[k];
            if (o->used && o->live && o->refs == 0 && o->sessions == 0 &&
                (!lru || o->last_used < lru->last_used))
                lru = o;
        }
        if (!lru)
            return kd_fail(err, errlen,
                           "model-memory-bytes %zu: model '%s' needs %zu bytes, and the models "
                           "loaded hold %zu that cannot be unloaded now (the default, in use, "
                           "or holding sessions)",
                           budget, ms->v[i].id, need, held);
        kd_log("model %s unloaded (least recently used) to make room for %s under "
               "model-memory-bytes %zu",
               lru->id, ms->v[i].id, budget);
        lru->live = false;
        ms->unloads++;
        free_if_unused(ms, lru);
    }
}

/* kd_models_add of the two parts' folders (NULL: out of memory). */
static kd_model_add_result add_parts(kd_models *ms, const kd_config *c, const char *id,
                                     const char *tok, const char *pred, const kd_model_overrides *o,
                                     const kd_model **out, char *err, size_t errlen) {
    if (valid_id(id, err, errlen) < 0) return KD_MODEL_ADD_INVALID;
    pthread_mutex_lock(&ms->change_lock);
    pthread_mutex_lock(&ms->lock);
    const bool exists = find_live(ms, id) != NULL;
    int i = -1;
    for (int k = 0; k < KD_MODELS_MAX && i < 0; k++)
        if (!ms->v[k].used) i = k;
    /* filled under the lock: listings read a free slot's flags */
    const int filled = !exists && i >= 0 && tok && pred
                           ? fill_slot(&ms->v[i], id, tok, pred, err, errlen)
                           : kd_fail(err, errlen, "out of memory");
    pthread_mutex_unlock(&ms->lock);
    kd_model_add_result rc = KD_MODEL_ADD_OK;
    if (exists) {
        kd_fail(err, errlen, "model '%s' is loaded already (DELETE it first)", id);
        rc = KD_MODEL_ADD_EXISTS;
    } else if (i < 0) {
        kd_fail(err, errlen, "model '%s': all %d model slots are taken", id, KD_MODELS_MAX);
        rc = KD_MODEL_ADD_FULL;
    } else {
        const bool loaded = filled == 0 && load_one(ms, i, c, o, err, errlen) == 0;
        pthread_mutex_lock(&ms->lock); /* room made and published in one hold */
        if (loaded && make_room(ms, i, c->model_memory_bytes, err, errlen) == 0) {
            kd_model *md = &ms->v[i];
            md->used = md->live = true;
            md->refs = 1; /* the caller's */
            md->last_used = kd_now_s();
            ms->loads++;
            if (ms->n < i + 1) ms->n = i + 1;
            *out = md;
        } else {
            const int owner = filled < 0 ? -1 : ms->v[i].tokenizer_of;
            free_slot(&ms->v[i]);
            if (owner >= 0) {
                ms->v[owner].refs--;
                free_if_unused(ms, &ms->v[owner]);
            }
            rc = loaded ? KD_MODEL_ADD_NO_ROOM : KD_MODEL_ADD_FAILED;
        }
        pthread_mutex_unlock(&ms->lock);
    }
    pthread_mutex_unlock(&ms->change_lock);
    return rc;
}

kd_model_add_result kd_models_add(kd_models *ms, const kd_config *c, const char *id,
                                  const char *dir, const kd_model_overrides *o,
                                  const kd_model **out, char *err, size_t errlen) {
    char name[KD_MODEL_ID_MAX + 2];
    if (!id) {
        id_of_dir(dir, name, sizeof name);
        id = name;
    }
    char *tok = join(dir, "tokenizer"), *pred = join(dir, "predictor");
    const kd_model_add_result rc = add_parts(ms, c, id, tok, pred, o, out, err, errlen);
    free(tok);
    free(pred);
    return rc;
}

/* The configured models of c, listed (ids and folders) but not loaded; -1 with err. */
static int configured(kd_models *list, const kd_config *c, char *err, size_t errlen) {
    memset(list, 0, sizeof *list);
    if (!(list->v = calloc(KD_MODELS_MAX, sizeof *list->v)))
        return kd_fail(err, errlen, "out of memory");
    return list_models(list, c, err, errlen);
}

static void free_list(kd_models *list) {
    for (int i = 0; list->v && i < list->n; i++)
        free_slot(&list->v[i]);
    free(list->v);
}

/* The entry of this id in a list, or NULL. */
static const kd_model *entry(const kd_models *list, const char *id) {
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->v[i].id, id) == 0) return &list->v[i];
    return NULL;
}

static bool same_entry(const kd_model *a, const kd_model *b) {
    return strcmp(a->tokenizer_dir, b->tokenizer_dir) == 0 &&
           strcmp(a->predictor_dir, b->predictor_dir) == 0;
}

int kd_models_sync(kd_models *ms, const kd_config *now) {
    kd_models after;
    char err[1024];
    if (configured(&after, now, err, sizeof err) < 0) {
        kd_log("reload: models: %s; the models are kept", err);
        free_list(&after);
        return -1;
    }
    /* the configured models now loaded that are no longer configured (or from other
     * folders), named under the lock, then removed as DELETE would (the default stays) */
    char gone[KD_MODELS_MAX][KD_MODEL_ID_MAX + 1];
    bool moved[KD_MODELS_MAX];
    int n_gone = 0, changes = 0;
    pthread_mutex_lock(&ms->lock);
    for (int i = 0; i < ms->n; i++) {
        const kd_model *md = &ms->v[i], *next = entry(&after, md->id);
        if (!md->used || !md->live || !md->configured || (next && same_entry(md, next))) continue;
        moved[n_gone] = next != NULL;
        snprintf(gone[n_gone++], sizeof gone[0], "%s", md->id);
    }
    pthread_mutex_unlock(&ms->lock);
    for (int i = 0; i < n_gone; i++, changes++)
        if (kd_models_remove(ms, gone[i], err, sizeof err) == KD_MODEL_REMOVE_OK)
            kd_log("reload: model %s unloaded (no longer configured%s)", gone[i],
                   moved[i] ? " from that folder" : "");
        else
            kd_log("reload: model %s kept: %s", gone[i], err);
    for (int i = 0; i < after.n; i++) {
        const kd_model *e = &after.v[i], *md = NULL;
        pthread_mutex_lock(&ms->lock);
        const kd_model *loaded = find_live(ms, e->id);
        const bool same = loaded && same_entry(loaded, e);
        pthread_mutex_unlock(&ms->lock);
        if (same) continue;
        const kd_model_add_result rc = add_parts(ms, now, e->id, e->tokenizer_dir, e->predictor_dir,
                                                 NULL, &md, err, sizeof err);
        if (rc == KD_MODEL_ADD_OK) {
            pthread_mutex_lock(&ms->lock);
            ms->v[md - ms->v].configured = true;
            pthread_mutex_unlock(&ms->lock);
            kd_log("reload: model %s loaded from %s: hash %s", md->id, e->predictor_dir, md->hash);
            kd_models_release(ms, md);
        } else {
            kd_log("reload: model %s not loaded: %s", e->id, err);
        }
        changes++;
    }
    free_list(&after);
    return changes;
}

const kd_model *kd_models_acquire(kd_models *ms, const char *id) {
    pthread_mutex_lock(&ms->lock);
    kd_model *md = id ? find_live(ms, id) : &ms->v[0];
    if (md) {
        md->refs++;
        md->last_used = kd_now_s();
    }
    pthread_mutex_unlock(&ms->lock);
    return md;
}

void kd_models_hold(kd_models *ms, const kd_model *md) {
    if (!md) return;
    pthread_mutex_lock(&ms->lock);
    ms->v[md - ms->v].refs++;
    pthread_mutex_unlock(&ms->lock);
}

void kd_models_release(kd_models *ms, const kd_model *md) {
    if (!md) return;
    pthread_mutex_lock(&ms->lock);
    kd_model *m = &ms->v[md - ms->v];
    m->refs--;
    free_if_unused(ms, m);
    pthread_mutex_unlock(&ms->lock);
}

void kd_models_bind_session(kd_models *ms, const kd_model *md) {
    pthread_mutex_lock(&ms->lock);
    ms->v[md - ms->v].refs++;
    ms->v[md - ms->v].sessions++;
    pthread_mutex_unlock(&ms->lock);
}

void kd_models_unbind_session(kd_models *ms, const kd_model *md) {
    pthread_mutex_lock(&ms->lock);
    kd_model *m = &ms->v[md - ms->v];
    m->sessions--;
    m->refs--;
    free_if_unused(ms, m);
    pthread_mutex_unlock(&ms->lock);
}

static void ids_locked(const kd_models *ms, char *out, size_t n) {
    size_t at = 0;
    if (n) out[0] = '\0';
    for (int i = 0; i < ms->n && at < n; i++) {
        if (!ms->v[i].used || !ms->v[i].live) continue;
        int w = snprintf(out + at, n - at, "%s%s", at ? ", " : "", ms->v[i].id);
        if (w < 0) break;
        at += (size_t)w;
    }
}

kd_model_remove_result kd_models_remove(kd_models *ms, const char *id, char *err, size_t errlen) {
    char ids[512];
    kd_model_remove_result rc = KD_MODEL_REMOVE_OK;
    pthread_mutex_lock(&ms->lock);
    kd_model *md = find_live(ms, id);
    if (!md) {
        ids_locked(ms, ids, sizeof ids);
        kd_fail(err, errlen, "model: no model \"%s\" here; the models are: %s", id, ids);
        rc = KD_MODEL_REMOVE_UNKNOWN;
    } else if (md == &ms->v[0]) {
        kd_fail(err, errlen,
                "model %s is the default model (the first configured): it cannot be unloaded", id);
        rc = KD_MODEL_REMOVE_DEFAULT;
    } else if (md->sessions > 0) {
        kd_fail(err, errlen,
                "model %s holds %d live session%s: delete %s (or let %s expire) before "
                "unloading it",
                id, md->sessions, md->sessions == 1 ? "" : "s", md->sessions == 1 ? "it" : "them",
                md->sessions == 1 ? "it" : "them");
        rc = KD_MODEL_REMOVE_BUSY;
    } else {
        md->live = false; /* unlisted now; freed here or at its last reference */
        ms->unloads++;
        free_if_unused(ms, md);
    }
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

void kd_models_each(kd_models *ms, void (*fn)(void *ctx, const kd_model *md), void *ctx) {
    pthread_mutex_lock(&ms->lock);
    for (int i = 0; i < ms->n; i++)
        if (ms->v[i].used && ms->v[i].live) fn(ctx, &ms->v[i]);
    pthread_mutex_unlock(&ms->lock);
}

void kd_models_changes(kd_models *ms, unsigned long long *loads, unsigned long long *unloads) {
    pthread_mutex_lock(&ms->lock);
    *loads = ms->loads;
    *unloads = ms->unloads;
    pthread_mutex_unlock(&ms->lock);
}

void kd_models_ids(kd_models *ms, char *out, size_t n) {
    pthread_mutex_lock(&ms->lock);
    ids_locked(ms, out, n);
    pthread_mutex_unlock(&ms->lock);
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
