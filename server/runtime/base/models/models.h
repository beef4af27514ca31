/* models.h — the daemon's models: loaded at start from the configured folders (model
 * lines, models-dir, or tokenizer + predictor), added (POST /models) and removed (DELETE
 * /models/{id}) while serving, each with its id, content hash, pool and fingerprint. The
 * first is the default and is never removed. A model is read-only once published; whoever
 * uses one holds a reference (a request, a job, a session, a model borrowing its
 * tokenizer), and a removed model is freed when its last reference goes, so its slot is
 * reused only once nothing can read it. */
#ifndef KD_MODELS_H
#define KD_MODELS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "config.h"
#include "kronos.h"
#include "model_options.h"

#define KD_MODEL_ID_MAX   64
#define KD_MODELS_MAX     64 /* the table's slots: models at start plus those added */
#define KD_MODEL_ID_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

/* What a model served, for /metrics: counted from any thread. */
typedef struct {
    atomic_ullong requests; /* answered requests that ran on it */
    atomic_ullong tokens;   /* token pairs it generated */
} kd_model_counts;

typedef struct {
    char id[KD_MODEL_ID_MAX + 1];
    /* SHA-256 in hex: a part's is of the SHA-256 digests of its config.json then its
     * model.safetensors (32 bytes each); the model's is of its tokenizer's digest then its
     * predictor's. The same files give the same hash on every machine. */
    char hash[65], tokenizer_hash[65], predictor_hash[65];
    char *tokenizer_dir, *predictor_dir;
    kr_model *m;
    kd_model_settings set; /* its max-context, weights and kv (model_options.h) */
    kr_pool *pool;         /* its own, of pool-bytes */
    int tokenizer_of;      /* the earlier model whose tokenizer it uses (same files), or -1 */
    uint64_t fingerprint;  /* kd_model_fingerprint: what a journal is checked against */
    char fp_hex[24];       /* the fingerprint in hex: what a calibration object names */
    char desc[512];        /* the fingerprint's line naming it */
    time_t loaded_at;
    kd_model_counts *counts;
    /* the registry's, under kd_models.lock */
    bool used;        /* the slot holds a model (listed or still referenced) */
    bool live;        /* listed: requests can pick it; false: removed, freed at refs 0 */
    bool configured;  /* loaded from the config (at start or by kd_models_sync) */
    int refs;         /* requests, jobs, sessions and tokenizer borrowers holding it */
    int sessions;     /* of those, live sessions bound to it */
    double last_used; /* monotonic seconds of its last pick */
} kd_model;

/* Slots v[0 .. KD_MODELS_MAX) never move; n is how many have ever been filled (a slot
 * below it may be free again). Every reading of a slot's registry fields and every listing
 * takes lock; additions and removals also take change_lock, held across a load, so that
 * the short lock is never held while files are read. */
typedef struct {
    kd_model *v;
    _Atomic int n;
    pthread_mutex_t lock, change_lock;
    unsigned long long loads, unloads; /* while serving, under lock */
    /* called (lock held) as a model unloaded while serving is freed: what others keep by its
     * address goes (the scheduler's figures); NULL: nothing */
    void (*on_free)(void *ctx, const kr_model *m);
    void *on_free_ctx;
} kd_models;

/* Why kd_models_add refused. */
typedef enum {
    KD_MODEL_ADD_OK = 0,
    KD_MODEL_ADD_INVALID, /* the id is not one */
    KD_MODEL_ADD_EXISTS,  /* a model of this id is loaded */
    KD_MODEL_ADD_FAILED,  /* its files did not load (the loader's message) */
    KD_MODEL_ADD_FULL,    /* every slot is taken */
    KD_MODEL_ADD_NO_ROOM, /* over model-memory-bytes with no idle model left to unload */
} kd_model_add_result;

/* Every configured model loaded (each with its pool), or -1 with the first failure in err
 * (the loader's message, naming the model) and nothing held. */
int kd_models_load(kd_models *ms, const kd_config *c, char *err, size_t errlen);
void kd_models_free(kd_models *ms);
/* The model in dir (holding tokenizer/ and predictor/) loaded as at start (hashed, its
 * tokenizer shared with a loaded model's of the same files and weights, its pool of c's
 * pool-bytes, its settings c's for id with o's fields over them; o may be NULL) and
 * published as id (NULL: the folder's name). With c's model-memory-bytes, idle models (no
 * reference, no session, not the default) are unloaded least recently used first until
 * the weights fit with it. On a refusal err says why and nothing changed (but the models
 * unloaded for room); on success *out is the new model, with a reference for the caller. */
kd_model_add_result kd_models_add(kd_models *ms, const kd_config *c, const char *id,
                                  const char *dir, const kd_model_overrides *o,
                                  const kd_model **out, char *err, size_t errlen);
/* SIGHUP: the models configured in now (model lines, models-dir as its folders are now,
 * tokenizer + predictor) against the configured models loaded: those no longer configured
 * (or now from other folders) removed as kd_models_remove would (a refusal logged, the
 * model kept), new ids loaded as kd_models_add would (a failure logged), the others kept,
 * models loaded by POST /models left alone; one log line per change. The number of
 * changes, or -1 (logged) when the set could not be listed. */
int kd_models_sync(kd_models *ms, const kd_config *now);
/* The listed model of this id (NULL: the default) with a reference for the caller, its
 * last use now; NULL when there is none. */
const kd_model *kd_models_acquire(kd_models *ms, const char *id);
/* Another reference on md, which the caller holds one of (or NULL: nothing). */
void kd_models_hold(kd_models *ms, const kd_model *md);
/* A reference dropped (md NULL: nothing); a removed model's last frees it. */
void kd_models_release(kd_models *ms, const kd_model *md);
/* A session bound to md (a reference, counted as a session) and its end. */
void kd_models_bind_session(kd_models *ms, const kd_model *md);
void kd_models_unbind_session(kd_models *ms, const kd_model *md);

/* Why kd_models_remove refused. */
typedef enum {
    KD_MODEL_REMOVE_OK = 0,
    KD_MODEL_REMOVE_UNKNOWN, /* no listed model of this id */
    KD_MODEL_REMOVE_DEFAULT, /* the default model stays */
    KD_MODEL_REMOVE_BUSY,    /* live sessions are bound to it */
} kd_model_remove_result;

/* The model of this id unlisted at once (the next pick of it fails) and freed when its
 * last reference goes; a refusal's reason in err. */
kd_model_remove_result kd_models_remove(kd_models *ms, const char *id, char *err, size_t errlen);
/* fn on every listed model, in slot order, under lock (fn must not call into ms). */
void kd_models_each(kd_models *ms, void (*fn)(void *ctx, const kd_model *md), void *ctx);
/* Models loaded and unloaded while serving. */
void kd_models_changes(kd_models *ms, unsigned long long *loads, unsigned long long *unloads);
/* The listed ids, "a, b, c", for a refusal's message. */
void kd_models_ids(kd_models *ms, char *out, size_t n);
/* The id and hash of the model in these folders (model_dir holding tokenizer/ and
 * predictor/, or the two parts' folders), as kd_models_load names and hashes it; -1 with
 * err. For the one-shot commands, whose answers name their model as the server's do. */
int kd_model_dirs_tag(const char *model_dir, const char *tokenizer_dir, const char *predictor_dir,
                      char id[KD_MODEL_ID_MAX + 1], char hash[65], char *err, size_t errlen);
/* An answer's model: {"id", "hash"} as body's "model", or "model_ref" when body has a
 * "model" already (an evaluation's scores); each element of a "series" answer gets its
 * own, so that it is what that series alone would answer. -1 when out of memory. */
int kd_model_tag_json(json_t *body, const char *id, const char *hash);

/* A request answered on md; n token pairs md generated. */
void kd_model_count_request(const kd_model *md);
void kd_model_count_tokens(const kd_model *md, unsigned long long n);
/* The weights' bytes a model holds itself (its tokenizer's too unless shared). */
size_t kd_model_own_bytes(const kd_models *ms, const kd_model *md);

#endif
