/* sha256.h — SHA-256 (FIPS 180-4) of bytes and of files: what names a model's weights
 * (models.c), the same on every machine for the same files. */
#ifndef KD_SHA256_H
#define KD_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char buf[64];
    size_t n; /* bytes in buf */
} kd_sha256;

void kd_sha256_init(kd_sha256 *s);
void kd_sha256_update(kd_sha256 *s, const void *p, size_t n);
void kd_sha256_final(kd_sha256 *s, unsigned char out[32]);
/* The digest of a file's bytes; -1 with errno set when it cannot be read. */
int kd_sha256_file(const char *path, unsigned char out[32]);
/* 64 lowercase hex digits and a NUL. */
void kd_sha256_hex(const unsigned char d[32], char out[65]);

#endif
