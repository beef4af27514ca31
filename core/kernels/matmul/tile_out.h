/* tile_out.h — where a tile of a reduced-precision product (weights bf16 or int8) writes its
 * finished sums: straight into the layer's output, plus the bias, stored or added to what is
 * there, on each kernel level (the same IEEE operations on each: the same bits). Internal to
 * core/kernels/matmul. */
#ifndef KR_TILE_OUT_H
#define KR_TILE_OUT_H

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

typedef struct {
    float *y;       /* the tile's row 0, its first column */
    size_t ld;      /* floats from one row of y to the next */
    const float *b; /* the bias from the tile's first column; NULL: none (-0 stays -0) */
    int add;        /* y += v instead of y = v, v = the sum + bias rounded first */
    int m;          /* the tile's columns that exist (a last panel may be partial) */
} kr_tile_out;

/* The part of o from row i, column c on */
static inline kr_tile_out kr_tile_sub(const kr_tile_out *o, int i, int c) {
    kr_tile_out s = {o->y + (size_t)i * o->ld + c, o->ld, o->b ? o->b + c : NULL, o->add, o->m - c};
    return s;
}

/* One sum v of row i, column c */
static inline void kr_tile_put1(const kr_tile_out *o, int i, int c, float v) {
    float *y = o->y + (size_t)i * o->ld + c;
    if (o->b) v += o->b[c];
    *y = o->add ? *y + v : v;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Columns c .. c + 7 of row i (those below m) */
__attribute__((target("avx2"))) static inline void kr_tile_put8(const kr_tile_out *o, int i, int c,
                                                                __m256 v) {
    int n = o->m - c;
    if (n <= 0) return;
    float *y = o->y + (size_t)i * o->ld + c;
    if (n >= 8) {
        if (o->b) v = _mm256_add_ps(v, _mm256_loadu_ps(o->b + c));
        if (o->add) v = _mm256_add_ps(_mm256_loadu_ps(y), v);
        _mm256_storeu_ps(y, v);
        return;
    }
    __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    if (o->b) v = _mm256_add_ps(v, _mm256_maskload_ps(o->b + c, mask));
    if (o->add) v = _mm256_add_ps(_mm256_maskload_ps(y, mask), v);
    _mm256_maskstore_ps(y, mask, v);
}

/* Columns c .. c + 15 of row i (those below m) */
__attribute__((target("avx512f"))) static inline void kr_tile_put16(const kr_tile_out *o, int i,
                                                                    int c, __m512 v) {
    int n = o->m - c;
    if (n <= 0) return;
    __mmask16 mask = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
    float *y = o->y + (size_t)i * o->ld + c;
    if (o->b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, o->b + c));
    if (o->add) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), v);
    _mm512_mask_storeu_ps(y, mask, v);
}
#endif

#endif
