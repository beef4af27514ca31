/* bf16.h — BF16 (the top 16 bits of a float32) to and from float32: the one rounding that
 * BF16 weights and a BF16 KV cache are stored with, its exact widening, and the add of a
 * BF16 dot product (weights = bf16's contract, in C). */
#ifndef KR_BF16_H
#define KR_BF16_H

#include <float.h>
#include <math.h>
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

/* r = fmaf(x, w, acc) with |r| <= FLT_MIN: the add as vdpbf16ps makes it, a zero of its
 * sign when the sum rounded to 24 bits as if the exponent were unbounded is below FLT_MIN.
 * The same fma scaled by 2^64 rounds so: |x w| is then below 2^-100 (an exact sum near
 * FLT_MIN of a 24-bit acc and a 16-bit product needs both small), so scaling the smaller
 * factor and acc cannot overflow. */
static inline float kr_bf16_add_tiny(float acc, float x, float w, float r) {
    if (fabsf(x) < fabsf(w))
        x *= 0x1p64f;
    else
        w *= 0x1p64f;
    float s = fmaf(x, w, acc * 0x1p64f);
    return fabsf(s) < 0x1p-62f ? copysignf(0.0f, s) : r;
}

/* acc + x w as the contract adds (x, w BF16 values, so x w is exact): rounded to nearest
 * even, a tiny sum to a zero of its sign */
static inline float kr_bf16_add(float acc, float x, float w) {
    float r = fmaf(x, w, acc);
    return fabsf(r) > FLT_MIN ? r : kr_bf16_add_tiny(acc, x, w, r);
}

#endif
