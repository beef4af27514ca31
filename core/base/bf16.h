/* bf16.h — BF16 (the top 16 bits of a float32) to and from float32: the one rounding that
 * BF16 weights and a BF16 KV cache are stored with, and its exact widening. */
#ifndef KR_BF16_H
#define KR_BF16_H

#include <stdint.h>
#include <string.h>

/* f rounded to the nearest BF16, ties to even (f finite: weights are checked at load, keys
 * and values are finite products of them) */
static inline uint16_t kr_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float kr_bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
