/* hash.h — the one string hash of server/ (FNV-1a, 64 bits): table buckets, the model's
 * fingerprint, a bare key's owner name. Not a secret's protection: keys are compared whole. */
#ifndef KD_HASH_H
#define KD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define KD_HASH_SEED 0xcbf29ce484222325ULL /* FNV-1a's offset basis */

/* h extended by n bytes at p; start from KD_HASH_SEED. */
uint64_t kd_hash(uint64_t h, const void *p, size_t n);

#endif
