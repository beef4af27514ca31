/* matmul_q8.c — the arithmetic of int8 weights (weights = int8), as llama.cpp's Q8_0: blocks
 * of 32 along the input, one float32 scale each, for the weights (at load) and for each row of
 * activations (at each product).
 *
 * Each block's dot product is a sum of 32 products of integers in [-127, 127]: exact in int32
 * on every level (AVX512-VNNI's vpdpbusd, AVX2's vpmaddubsw + vpmaddwd, or C). The float
 * part is written once, in C, in one order: per block, in order, acc = fma(dx * dw, isum,
 * acc). So every level computes the same bits, and a row's bits depend on that row alone. */
#include "matmul_q8.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KR_X86 1
#endif

float kr_q8_quantise(int8_t *q, const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < KR_Q8_BLOCK; i++)
        q[i] = i < n ? (int8_t)roundf(x[i] * id) : 0;
    return d;
}

void kr_q8_pack(int8_t *wq, float *ws, const float *w, int out, int in) {
    int nb = kr_q8_blocks(in);
    for (int b = 0; b < nb; b++) {
        int n = in - b * KR_Q8_BLOCK < KR_Q8_BLOCK ? in - b * KR_Q8_BLOCK : KR_Q8_BLOCK;
        for (int o = 0; o < out; o++)
            ws[(size_t)b * out + o] = kr_q8_quantise(wq + ((size_t)b * out + o) * KR_Q8_BLOCK,
                                                     w + (size_t)o * in + b * KR_Q8_BLOCK, n);
    }
}

/* ---- one block's integer dot product, per level ------------------------------------------ */

static int32_t dot_c(const int8_t *a, const int8_t *w) {
    int32_t s = 0;
    for (int i = 0; i < KR_Q8_BLOCK; i++)
        s += (int32_t)a[i] * w[i];
    return s;
}

#ifdef KR_X86
__attribute__((target("avx2"))) static inline int32_t hsum256(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* |a| (unsigned) times w with a's sign: the products a * w, and |a| <= 127 keeps
 * vpmaddubsw's pair sums below 2 * 127 * 127, inside int16 (no saturation) */
__attribute__((target("avx2"))) static int32_t dot_avx2(const int8_t *a, const int8_t *w) {
    __m256i va = _mm256_loadu_si256((const __m256i *)a),
            vw = _mm256_loadu_si256((const __m256i *)w);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vw, va));
    return hsum256(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) static int32_t
dot_vnni(const int8_t *a, const int8_t *w) {
    __m256i va = _mm256_loadu_si256((const __m256i *)a),
            vw = _mm256_loadu_si256((const __m256i *)w);
    __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(va, va),
                                    _mm256_sign_epi8(vw, va));
    return hsum256(s);
}

/* The unreduced products of one block: 8 int32 lanes whose sum is the dot product */
__attribute__((target("avx2"), always_inline)) static inline __m256i
lanes_avx2(__m256i ax, __m256i sx, const int8_t *w) {
    __m256i p =
        _mm256_maddubs_epi16(ax, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)w), sx));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"), always_inline)) static inline __m256i
lanes_vnni(__m256i ax, __m256i sx, const int8_t *w) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax,
                               _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)w), sx));
}

/* 8 vectors of lanes to their 8 sums, column i in lane i (integer adds: exact in any order) */
__attribute__((target("avx2"), always_inline)) static inline __m256i sums8(const __m256i v[8]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    __m128i lo = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    __m128i hi = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    return _mm256_set_m128i(hi, lo);
}

/* Columns [c, c + 8) of one block, 8 at a time: the lanes of the C expression, the same
 * roundings (a float multiply, then a fused multiply-add, per column) */
#define GROUP8(LANES)                                                                              \
    do {                                                                                           \
        __m256i v[8];                                                                              \
        for (int i = 0; i < 8; i++)                                                                \
            v[i] = LANES(ax, sx, wb + (size_t)(c + i) * KR_Q8_BLOCK);                              \
        __m256 f = _mm256_cvtepi32_ps(sums8(v));                                                   \
        __m256 d = _mm256_mul_ps(_mm256_set1_ps(dx), _mm256_loadu_ps(sb + c));                     \
        _mm256_storeu_ps(acc + c - c0, _mm256_fmadd_ps(d, f, _mm256_loadu_ps(acc + c - c0)));      \
    } while (0)

/* kr_q8_row's block loop with 8 columns at a time; vnni picks vpdpbusd */
__attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni"))) static void
row_vnni(float *acc, const int8_t *q, float dx, const int8_t *wb, const float *sb, int c0, int c1) {
    __m256i xq = _mm256_loadu_si256((const __m256i *)q), ax = _mm256_sign_epi8(xq, xq), sx = xq;
    int c = c0;
    for (; c + 8 <= c1; c += 8)
        GROUP8(lanes_vnni);
    for (; c < c1; c++)
        acc[c - c0] =
            fmaf(dx * sb[c], (float)dot_vnni(q, wb + (size_t)c * KR_Q8_BLOCK), acc[c - c0]);
}

__attribute__((target("avx2,fma"))) static void
row_avx2(float *acc, const int8_t *q, float dx, const int8_t *wb, const float *sb, int c0, int c1) {
    __m256i xq = _mm256_loadu_si256((const __m256i *)q), ax = _mm256_sign_epi8(xq, xq), sx = xq;
    int c = c0;
    for (; c + 8 <= c1; c += 8)
        GROUP8(lanes_avx2);
    for (; c < c1; c++)
        acc[c - c0] =
            fmaf(dx * sb[c], (float)dot_avx2(q, wb + (size_t)c * KR_Q8_BLOCK), acc[c - c0]);
}

static int has_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}
#endif

typedef int32_t (*dot_fn)(const int8_t *, const int8_t *);

static dot_fn pick(kr_simd simd) {
#ifdef KR_X86
    if (simd == KR_SIMD_AVX512 && has_vnni()) return dot_vnni;
    if (simd >= KR_SIMD_AVX2) return dot_avx2;
#else
    (void)simd;
#endif
    return dot_c;
}

void kr_q8_row(float *acc, const float *x, int c0, int c1, const kr_linear *l, kr_simd simd) {
    dot_fn dot = pick(simd);
    int in = l->in, out = l->out, nb = kr_q8_blocks(in);
    for (int c = c0; c < c1; c++)
        acc[c - c0] = 0.0f;
    for (int b = 0; b < nb; b++) {
        int8_t q[KR_Q8_BLOCK];
        int n = in - b * KR_Q8_BLOCK < KR_Q8_BLOCK ? in - b * KR_Q8_BLOCK : KR_Q8_BLOCK;
        float dx = kr_q8_quantise(q, x + b * KR_Q8_BLOCK, n);
        const int8_t *wb = l->wq + (size_t)b * out * KR_Q8_BLOCK;
        const float *sb = l->ws + (size_t)b * out;
#ifdef KR_X86
        if (dot == dot_vnni || dot == dot_avx2) {
            (dot == dot_vnni ? row_vnni : row_avx2)(acc, q, dx, wb, sb, c0, c1);
            continue;
        }
#endif
        for (int c = c0; c < c1; c++) {
            int32_t s = dot(q, wb + (size_t)c * KR_Q8_BLOCK);
            acc[c - c0] = fmaf(dx * sb[c], (float)s, acc[c - c0]);
        }
    }
}
