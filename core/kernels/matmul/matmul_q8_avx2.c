/* matmul_q8_avx2.c — int8 weights' tiles at the avx2 level: up to 4 rows x 1 panel (two
 * registers of 8 columns), each block's exact integer dot product by one of two products, then
 * the block's float step, acc = fma(dx * dw, isum, acc), as on every level (matmul_q8.c).
 *
 * - vpdpbusd on 8 lanes (AVX-VNNI, VEX-encoded: CPUs with AVX2 and no AVX-512 such as Intel's
 *   since Alder Lake and Sierra Forest): unsigned weight bytes (q + 128) times signed
 *   activations, four products a lane an instruction, each sum starting at the row's neg.
 * - vpmaddubsw + vpmaddwd (every AVX2 CPU): vpmaddubsw would saturate on q + 128, so the bytes
 *   are flipped back and |x| multiplies w with x's sign; four instructions for what vpdpbusd
 *   does in one.
 *
 * Both give the same int32 sums, so the same bits. */
#include "matmul_q8_avx2.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define KR_X86 1
#endif

#define QB    KR_Q8_BLOCK
#define PANEL KR_Q8_PANEL
#define PB    (PANEL * QB) /* bytes of one panel's block */
#define RB    4            /* rows a call */

/* ---- which product ------------------------------------------------------------------------ */

/* CPUID's AVX-VNNI (leaf 7, subleaf 1, EAX bit 4); the avx2 level has checked the OS saves
 * the registers */
int kr_q8_has_avx_vnni(void) {
#ifdef KR_X86
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
#else
    return 0;
#endif
}

static atomic_int product = -1;

kr_q8_avx2_product kr_q8_avx2_product_get(void) {
    int p = atomic_load(&product);
    if (p >= 0) return (kr_q8_avx2_product)p;
    const char *force = getenv("KRONOS_Q8_PRODUCT");
    p = kr_q8_has_avx_vnni() && !(force && strcmp(force, "vpmaddubsw") == 0) ? KR_Q8_AVX_VNNI
                                                                             : KR_Q8_MADDUBS;
    int none = -1; /* two threads deciding at once: the first one's answer stands */
    atomic_compare_exchange_strong(&product, &none, p);
    return (kr_q8_avx2_product)atomic_load(&product);
}

int kr_q8_avx2_product_set(kr_q8_avx2_product p) {
    if (p != KR_Q8_MADDUBS && (p != KR_Q8_AVX_VNNI || !kr_q8_has_avx_vnni())) return -1;
    atomic_store(&product, (int)p);
    return 0;
}

#ifdef KR_X86
/* ---- the float part, the same for both --------------------------------------------------- */

/* Inlined into either product's kernel (AVX2 and FMA: a subset of both targets) */
#define FLOATS_FN __attribute__((target("avx2,fma"), always_inline)) static inline

/* The rows' block b into their chains: acc = fma(dx * dw, isum, acc), 16 columns a row */
FLOATS_FN void block_floats(int RN, __m256 (*f)[2], __m256i (*s)[2], const kr_q8_rows *xq, int r,
                            int b, const float *ws) {
    __m256 d0 = _mm256_loadu_ps(ws), d1 = _mm256_loadu_ps(ws + 8);
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++) {
        __m256 dx = _mm256_set1_ps(xq->d[(size_t)(r + i) * xq->nb + b]);
        f[i][0] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d0), _mm256_cvtepi32_ps(s[i][0]), f[i][0]);
        f[i][1] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d1), _mm256_cvtepi32_ps(s[i][1]), f[i][1]);
    }
}

FLOATS_FN void floats_zero(int RN, __m256 (*f)[2]) {
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
        f[i][0] = f[i][1] = _mm256_setzero_ps();
}

FLOATS_FN void floats_put(int RN, const kr_tile_out *t, __m256 (*f)[2]) {
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++) {
        kr_tile_put8(t, i, 0, f[i][0]);
        kr_tile_put8(t, i, 8, f[i][1]);
    }
}

/* ---- vpmaddubsw + vpmaddwd ---------------------------------------------------------------- */

__attribute__((target("avx2,fma"), always_inline)) static inline void
micro_maddubs(int RN, const kr_tile_out *t, const kr_q8_rows *xq, int r, int p,
              const kr_linear *l) {
    int nb = xq->nb;
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 f[RB][2];
    floats_zero(RN, f);
    for (int b = 0; b < nb; b++) {
        const int8_t *w = l->wq + ((size_t)p * nb + b) * PB;
        __m256i s[RB][2];
#pragma GCC unroll 4
        for (int i = 0; i < RN; i++)
            s[i][0] = s[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + q * 64)), flip),
                    w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + q * 64 + 32)),
                                          flip);
#pragma GCC unroll 4
            for (int i = 0; i < RN; i++) {
                __m256i a =
                    _mm256_set1_epi32(kr_q8_quad(xq->q + ((size_t)(r + i) * nb + b) * QB + 4 * q));
                __m256i ax = _mm256_abs_epi8(a);
                s[i][0] = _mm256_add_epi32(
                    s[i][0],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, a)), ones));
                s[i][1] = _mm256_add_epi32(
                    s[i][1],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, a)), ones));
            }
        }
        block_floats(RN, f, s, xq, r, b, l->ws + ((size_t)p * nb + b) * PANEL);
    }
    floats_put(RN, t, f);
}

/* ---- vpdpbusd on 8 lanes (AVX-VNNI) ------------------------------------------------------- */

#define AVX_VNNI_TARGET __attribute__((target("avx2,fma,avxvnni")))

AVX_VNNI_TARGET __attribute__((always_inline)) static inline void
micro_avx_vnni(int RN, const kr_tile_out *t, const kr_q8_rows *xq, int r, int p,
               const kr_linear *l) {
    int nb = xq->nb;
    __m256 f[RB][2];
    floats_zero(RN, f);
    for (int b = 0; b < nb; b++) {
        const int8_t *w = l->wq + ((size_t)p * nb + b) * PB;
        __m256i s[RB][2];
#pragma GCC unroll 4
        for (int i = 0; i < RN; i++)
            s[i][0] = s[i][1] = _mm256_set1_epi32(xq->neg[(size_t)(r + i) * nb + b]);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(w + q * 64)),
                    w1 = _mm256_loadu_si256((const __m256i *)(w + q * 64 + 32));
#pragma GCC unroll 4
            for (int i = 0; i < RN; i++) {
                __m256i a =
                    _mm256_set1_epi32(kr_q8_quad(xq->q + ((size_t)(r + i) * nb + b) * QB + 4 * q));
                s[i][0] = _mm256_dpbusd_avx_epi32(s[i][0], w0, a);
                s[i][1] = _mm256_dpbusd_avx_epi32(s[i][1], w1, a);
            }
        }
        block_floats(RN, f, s, xq, r, b, l->ws + ((size_t)p * nb + b) * PANEL);
    }
    floats_put(RN, t, f);
}

/* ---- the tiles ---------------------------------------------------------------------------- */

typedef void (*micro_fn)(const kr_tile_out *, const kr_q8_rows *, int, int, const kr_linear *);
#define MICRO(NAME, TARGET, RN)                                                                    \
    TARGET static void NAME##_##RN(const kr_tile_out *t, const kr_q8_rows *xq, int r, int p,       \
                                   const kr_linear *l) {                                           \
        NAME(RN, t, xq, r, p, l);                                                                  \
    }
#define AVX2_TARGET __attribute__((target("avx2,fma")))
MICRO(micro_maddubs, AVX2_TARGET, 1)
MICRO(micro_maddubs, AVX2_TARGET, 2)
MICRO(micro_maddubs, AVX2_TARGET, 3)
MICRO(micro_maddubs, AVX2_TARGET, 4)
MICRO(micro_avx_vnni, AVX_VNNI_TARGET, 1)
MICRO(micro_avx_vnni, AVX_VNNI_TARGET, 2)
MICRO(micro_avx_vnni, AVX_VNNI_TARGET, 3)
MICRO(micro_avx_vnni, AVX_VNNI_TARGET, 4)
static const micro_fn micro_table[2][RB] = {
    [KR_Q8_AVX_VNNI] = {micro_avx_vnni_1, micro_avx_vnni_2, micro_avx_vnni_3, micro_avx_vnni_4},
    [KR_Q8_MADDUBS] = {micro_maddubs_1, micro_maddubs_2, micro_maddubs_3, micro_maddubs_4}};

void kr_q8_tile_avx2(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                     const kr_linear *l) {
    const micro_fn *micro = micro_table[kr_q8_avx2_product_get()];
    for (int c = 0; c < cb; c++)
        for (int i = 0; i < rn; i += RB) {
            int n = rn - i < RB ? rn - i : RB;
            kr_tile_out s = kr_tile_sub(t, i, c * PANEL);
            micro[n - 1](&s, xq, r + i, p + c, l);
        }
}
#endif
