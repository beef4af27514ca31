/* models.h — the daemon's models: each loaded once at start from the configured folders
 * (model lines, models-dir, or tokenizer + predictor), with its id, content hash, pool and
 * fingerprint. The first is the default. Read-only once loaded. */
#ifndef KD_MODELS_H
#define KD_MODELS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "kronos.h"

#define KD_MODEL_ID_MAX   64
#define KD_MODEL_ID_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

typedef struct {
    char id[KD_MODEL_ID_MAX + 1];
    /* SHA-256 in hex: a part's is of the SHA-256 digests of its config.json then its
     * model.safetensors (32 bytes each); the model's is of its tokenizer's digest then its
     * predictor's. The same files give the same hash on every machine. */
    char hash[65], tokenizer_hash[65], predictor_hash[65];
    char *tokenizer_dir, *predictor_dir;
    kr_model *m;
    kr_pool *pool;        /* its own, of pool-bytes */
    int tokenizer_of;     /* the earlier model whose tokenizer it uses (same files), or -1 */
    uint64_t fingerprint; /* kd_model_fingerprint: what a journal is checked against */
    char fp_hex[24];      /* the fingerprint in hex: what a calibration object names */
    char desc[512];       /* the fingerprint's line naming it */
    time_t loaded_at;
} kd_model;

typedef struct {
    kd_model *v;
    int n;
} kd_models;

/* Every configured model loaded (each with its pool), or -1 with the first failure in err
 * (the loader's message, naming the model) and nothing held. */
int kd_models_load(kd_models *ms, const kd_config *c, char *err, size_t errlen);
void kd_models_free(kd_models *ms);
/* The model of this id, or NULL. */
const kd_model *kd_models_find(const kd_models *ms, const char *id);
/* The known ids, "a, b, c", for a refusal's message. */
void kd_models_ids(const kd_models *ms, char *out, size_t n);
/* The weights' bytes a model holds itself (its tokenizer's too unless shared). */
size_t kd_model_own_bytes(const kd_models *ms, const kd_model *md);

#endif
