/* models.h — the daemon's models: loaded at start from the configured folders (model
 * lines, models-dir, or tokenizer + predictor) and added while serving (POST /models),
 * each with its id, content hash, pool and fingerprint. The first is the default. A model
 * is read-only once published; the table only grows, so a model outlives every request. */
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
} kd_model;

/* Slots v[0 .. KD_MODELS_MAX) never move once loading is done; n is published after a
 * slot is filled, so a reader sees whole models only. Additions take add_lock. */
typedef struct {
    kd_model *v;
    _Atomic int n;
    pthread_mutex_t add_lock;
} kd_models;

/* Why kd_models_add refused. */
typedef enum {
    KD_MODEL_ADD_OK = 0,
    KD_MODEL_ADD_INVALID, /* the id is not one */
    KD_MODEL_ADD_EXISTS,  /* a model of this id is loaded */
    KD_MODEL_ADD_FAILED,  /* its files did not load (the loader's message) */
    KD_MODEL_ADD_FULL,    /* every slot is taken */
} kd_model_add_result;

/* Every configured model loaded (each with its pool), or -1 with the first failure in err
 * (the loader's message, naming the model) and nothing held. */
int kd_models_load(kd_models *ms, const kd_config *c, char *err, size_t errlen);
void kd_models_free(kd_models *ms);
/* The model in dir (holding tokenizer/ and predictor/) loaded as at start (hashed, its
 * tokenizer shared with a loaded model's of the same files and weights, its pool of c's
 * pool-bytes, its settings c's for id with o's fields over them; o may be NULL) and
 * published as id (NULL: the folder's name). On a refusal err says why and nothing
 * changed; on success *out is the new model. */
kd_model_add_result kd_models_add(kd_models *ms, const kd_config *c, const char *id,
                                  const char *dir, const kd_model_overrides *o,
                                  const kd_model **out, char *err, size_t errlen);
/* The model of this id, or NULL. */
const kd_model *kd_models_find(const kd_models *ms, const char *id);
/* The known ids, "a, b, c", for a refusal's message. */
void kd_models_ids(const kd_models *ms, char *out, size_t n);
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
