/* matmul_bf16.c — the arithmetic of BF16 weights (weights = bf16): weights packed as BF16 at
 * load, each row of activations rounded to BF16 once a product, and dot products of
 * BF16 pairs accumulated in float32 as AVX512-BF16's vdpbf16ps does them.
 *
 * vdpbf16ps adds, per 32-bit lane, the product of the odd BF16 pair elements and then the
 * product of the even ones, each add rounded to nearest even; denormal inputs read as zero,
 * and an add whose sum is tiny gives a zero of the sum's sign: tiny after rounding to 24 bits
 * as if the exponent were unbounded, as x86 detects underflow (measured on AMD Zen 5: a sum
 * that the denormal grid would round up to FLT_MIN is flushed, one that the 24-bit grid
 * rounds up to it is kept). A product of two BF16 values (8-bit mantissas) is exact in float32, so
 * each add is a fused multiply-add of the two factors; the AVX2 and C levels run exactly that chain
 * (two FMAs a pair), decide the rare results within FLT_MIN of zero from the exact sum, and
 * the inputs are flushed when they are rounded. Where vdpbf16ps is missing or slower than
 * FMAs, and this CPU's flush to zero is the contract's (matmul_bf16_product.c), the avx512 and
 * avx2 levels run the chain as plain FMAs with MXCSR's FTZ set, no decision needed.
 * tests/test_precision_bf16.c checks the instruction and the FMAs under FTZ against this
 * emulation bit for bit. So every level computes the same bits, and a row's bits
 * depend on that row alone.
 *
 * The tiles are register-blocked: several rows by several panels of 16 columns per inner
 * loop, each 64-byte weight vector (16 columns x one pair) loaded once for all the rows, each
 * row's pair broadcast. */
#include "matmul_bf16.h"

#include "bf16.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KR_X86 1
#endif

#define PANEL KR_BF16_PANEL
#define PW    (2 * PANEL) /* BF16 values of one panel's pair */

/* ---- packing and rounding ----------------------------------------------------------------- */

size_t kr_bf16_packed(int out, int in) {
    return (size_t)((out + PANEL - 1) / PANEL) * PW * kr_bf16_pairs(in);
}

uint16_t kr_bf16_round_daz(float f) {
    uint16_t h = kr_bf16_round(f);
    return (h & 0x7f80u) ? h : (uint16_t)(h & 0x8000u);
}

static size_t at_packed(int in, int o, int k) {
    size_t p = (size_t)(o / PANEL), j = (size_t)(k / 2);
    return (p * kr_bf16_pairs(in) + j) * PW + (size_t)(o % PANEL) * 2 + (size_t)(k & 1);
}

void kr_bf16_pack(uint16_t *dst, const float *w, int out, int in) {
    (void)kr_bf16_product_get(); /* the product chosen at load, before any product runs */
    int panels = (out + PANEL - 1) / PANEL, in2 = 2 * kr_bf16_pairs(in);
    for (int o = 0; o < panels * PANEL; o++)
        for (int k = 0; k < in2; k++)
            dst[at_packed(in, o, k)] =
                o < out && k < in ? kr_bf16_round_daz(w[(size_t)o * in + k]) : 0;
}

uint16_t kr_bf16_weight(const kr_linear *l, int o, int k) {
    return l->wh[at_packed(l->in, o, k)];
}

static void rows_c(uint32_t *d, const float *xr, int j0, int np, int in) {
    for (int j = j0; j < np; j++) {
        uint32_t hi = 2 * j + 1 < in ? kr_bf16_round_daz(xr[2 * j + 1]) : 0;
        d[j] = (uint32_t)kr_bf16_round_daz(xr[2 * j]) | hi << 16;
    }
}

#ifdef KR_X86
/* kr_bf16_round_daz's integer steps on 8 or 16 lanes at once (the same bits, NaN and inf
 * included: the arithmetic is the same), each pair packed as kr_bf16_rows says. A row's whole
 * pairs in steps of 8, the rest by rows_c. */
__attribute__((target("avx2"))) static int rows_avx2(uint32_t *d, const float *xr, int in) {
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    const __m256i expo = _mm256_set1_epi32(0x7f800000), sign = _mm256_set1_epi32(INT32_MIN);
    int j = 0;
    for (; 2 * j + 16 <= in; j += 8) {
        __m256i h[2];
        for (int i = 0; i < 2; i++) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(xr + 2 * j + 8 * i));
            u = _mm256_add_epi32(
                u, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
            __m256i zero_exp =
                _mm256_cmpeq_epi32(_mm256_and_si256(u, expo), _mm256_setzero_si256());
            u = _mm256_blendv_epi8(u, _mm256_and_si256(u, sign), zero_exp);
            h[i] = _mm256_srli_epi32(u, 16);
        }
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xd8);
        _mm256_storeu_si256((__m256i *)(d + j), p);
    }
    return j;
}

__attribute__((target("avx512f"))) static int rows_avx512(uint32_t *d, const float *xr, int in) {
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    const __m512i expo = _mm512_set1_epi32(0x7f800000), sign = _mm512_set1_epi32(INT32_MIN);
    int j = 0;
    for (; 2 * j + 16 <= in; j += 8) {
        __m512i u = _mm512_loadu_si512((const void *)(xr + 2 * j));
        u = _mm512_add_epi32(
            u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        __mmask16 keep = _mm512_test_epi32_mask(u, expo);
        u = _mm512_mask_mov_epi32(_mm512_and_si512(u, sign), keep, u);
        _mm256_storeu_si256((__m256i *)(d + j), _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
    }
    return j;
}
#endif

void kr_bf16_rows(uint32_t *xb, const float *x, int n, int in, kr_simd simd) {
    int np = kr_bf16_pairs(in);
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * in;
        uint32_t *d = xb + (size_t)r * np;
        int j = 0;
#ifdef KR_X86
        if (simd >= KR_SIMD_AVX512)
            j = rows_avx512(d, xr, in);
        else if (simd >= KR_SIMD_AVX2)
            j = rows_avx2(d, xr, in);
#else
        (void)simd;
#endif
        rows_c(d, xr, j, np, in);
    }
}

/* ---- portable kernel ---------------------------------------------------------------------- */

static void tile_c(const kr_tile_out *t, const uint32_t *xb, int in, int rn, int p, int cb,
                   const kr_linear *l) {
    int np = kr_bf16_pairs(in);
    for (int i = 0; i < rn; i++)
        for (int c = 0; c < cb; c++) {
            const uint16_t *w = l->wh + (size_t)(p + c) * np * PW;
            const uint32_t *xr = xb + (size_t)i * np;
            float acc[PANEL] = {0};
            for (int j = 0; j < np; j++) {
                float xe = kr_bf16_widen((uint16_t)xr[j]), xo = kr_bf16_widen(xr[j] >> 16);
                for (int o = 0; o < PANEL; o++) {
                    float we = kr_bf16_widen(w[j * PW + 2 * o]);
                    float wo = kr_bf16_widen(w[j * PW + 2 * o + 1]);
                    acc[o] = kr_bf16_add(kr_bf16_add(acc[o], xo, wo), xe, we);
                }
            }
            for (int o = 0; o < PANEL && c * PANEL + o < t->m; o++)
                kr_tile_put1(t, i, c * PANEL + o, acc[o]);
        }
}

#ifdef KR_X86
/* ---- AVX2: FMAs, a 16-column panel as two halves of 8 ------------------------------------- */

#define A2_RB 4 /* rows of a tile, one panel */
#define A2_CB 4 /* panels of a single row's tile */

/* The lanes of r = fma(x, w, acc) within FLT_MIN of zero, redone by kr_bf16_add_tiny */
__attribute__((target("avx2,fma"), noinline)) static __m256 fix256(__m256 r, float x, __m256 w,
                                                                   __m256 acc, int lanes) {
    float rv[8], wv[8], av[8];
    _mm256_storeu_ps(rv, r), _mm256_storeu_ps(wv, w), _mm256_storeu_ps(av, acc);
    for (int i = 0; i < 8; i++)
        if (lanes >> i & 1) rv[i] = kr_bf16_add_tiny(av[i], x, wv[i], rv[i]);
    return _mm256_loadu_ps(rv);
}

/* acc + x w as vdpbf16ps adds (kr_bf16_add) */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256
dp_add256(__m256 acc, float x, __m256 w, __m256 abs_mask) {
    __m256 r = _mm256_fmadd_ps(_mm256_set1_ps(x), w, acc);
    int tiny = _mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_and_ps(r, abs_mask), _mm256_set1_ps(FLT_MIN), _CMP_LE_OQ));
    return tiny ? fix256(r, x, w, acc, tiny) : r;
}
#define WIDE_KC 128 /* pairs of the rows widened at a time */

/* Each 32-bit lane's low BF16 as a float: its two bytes moved up, zeros below (a byte shuffle,
 * which runs on a port the FMAs do not use on Intel's cores, where a shift takes one of theirs) */
__attribute__((target("avx2"), always_inline)) static inline __m256 widen_even256(__m256i v) {
    const __m256i up =
        _mm256_setr_epi8(-128, -128, 0, 1, -128, -128, 4, 5, -128, -128, 8, 9, -128, -128, 12, 13,
                         -128, -128, 0, 1, -128, -128, 4, 5, -128, -128, 8, 9, -128, -128, 12, 13);
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(v, up));
}

/* Rows' pairs [j0, j0 + kc) widened into odd and even floats (the FMAs of both widths
 * broadcast them from memory: a load, not a shuffle); xo and xe 32-byte aligned */
__attribute__((target("avx2"), always_inline)) static inline void
widen_rows(int RN, float (*xo)[WIDE_KC], float (*xe)[WIDE_KC], const uint32_t *xb, int np, int j0,
           int kc) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    for (int i = 0; i < RN; i++) {
        const uint32_t *r = xb + (size_t)i * np + j0;
        int j = 0;
        for (; j + 8 <= kc; j += 8) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(r + j));
            _mm256_store_ps(&xo[i][j], _mm256_castsi256_ps(_mm256_and_si256(v, hi)));
            _mm256_store_ps(&xe[i][j], _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; j < kc; j++)
            xo[i][j] = kr_bf16_widen((uint16_t)(r[j] >> 16)),
            xe[i][j] = kr_bf16_widen((uint16_t)r[j]);
    }
}

/* One pair's step of a chain, the odd product then the even: plain FMAs under FTZ, else each
 * add checked by dp_add256 */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256
pair_add256(int FTZ, __m256 acc, const float *xo, const float *xe, __m256 wo, __m256 we,
            __m256 abs_mask) {
    if (FTZ)
        return _mm256_fmadd_ps(_mm256_broadcast_ss(xe), we,
                               _mm256_fmadd_ps(_mm256_broadcast_ss(xo), wo, acc));
    return dp_add256(dp_add256(acc, *xo, wo, abs_mask), *xe, we, abs_mask);
}

/* Every accumulator of a tile pinned (KR_PIN): the FTZ window's edges */
__attribute__((target("avx2"), always_inline)) static inline void
pin_acc256(int RN, int CB, __m256 (*acc)[A2_CB][2]) {
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++) {
            KR_PIN(acc[i][c][0]);
            KR_PIN(acc[i][c][1]);
        }
}

/* RN rows x CB panels: 4 rows x 1 panel for many rows, a single row x 4 panels (8 chains in
 * flight, as float32's row4_256, where one panel's 2 chains of dependent adds would wait on
 * their latency). FTZ: the chain as plain FMAs under MXCSR's FTZ|DAZ, where the CPU's flush is
 * the contract's (kr_bf16_fma_ftz_exact), as the avx512 FMA tiles below; else each add checked. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
micro_avx2(int RN, int CB, int FTZ, const kr_tile_out *t, const uint32_t *xb, int np, int p,
           const kr_linear *l) {
    const uint16_t *w = l->wh + (size_t)p * np * PW;
    const size_t ps = (size_t)np * PW; /* BF16 values from one panel to the next */
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i hi_mask = _mm256_set1_epi32((int)0xffff0000u);
    __m256 acc[A2_RB][A2_CB][2];
    unsigned csr = FTZ ? _mm_getcsr() : 0;
    if (FTZ) _mm_setcsr(csr | KR_BF16_FTZ_DAZ);
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++)
            acc[i][c][0] = acc[i][c][1] = _mm256_setzero_ps();
    if (FTZ) pin_acc256(RN, CB, acc);
    _Alignas(32) float xo[A2_RB][WIDE_KC], xe[A2_RB][WIDE_KC];
    for (int j0 = 0; j0 < np; j0 += WIDE_KC) {
        int kc = np - j0 < WIDE_KC ? np - j0 : WIDE_KC;
        widen_rows(RN, xo, xe, xb, np, j0, kc);
        for (int j = 0; j < kc; j++) {
            const uint16_t *wj = w + (size_t)(j0 + j) * PW;
#pragma GCC unroll 4
            for (int c = 0; c < CB; c++) {
                __m256 wo[2], we[2];
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(wj + c * ps + 16 * h));
                    wo[h] = _mm256_castsi256_ps(_mm256_and_si256(v, hi_mask));
                    we[h] = widen_even256(v);
                }
#pragma GCC unroll 4
                for (int i = 0; i < RN; i++)
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++)
                        acc[i][c][h] = pair_add256(FTZ, acc[i][c][h], &xo[i][j], &xe[i][j], wo[h],
                                                   we[h], abs_mask);
            }
        }
    }
    if (FTZ) {
        pin_acc256(RN, CB, acc);
        _mm_setcsr(csr);
        pin_acc256(RN, CB, acc);
    }
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++) {
            kr_tile_put8(t, i, c * PANEL, acc[i][c][0]);
            kr_tile_put8(t, i, c * PANEL + 8, acc[i][c][1]);
        }
}

typedef void (*micro_fn)(const kr_tile_out *, const uint32_t *, int, int, const kr_linear *);
#define MA2(RN, CB)                                                                                \
    __attribute__((target("avx2,fma"))) static void micro_avx2_##RN##_##CB(                        \
        const kr_tile_out *t, const uint32_t *xb, int np, int p, const kr_linear *l) {             \
        micro_avx2(RN, CB, 0, t, xb, np, p, l);                                                    \
    }                                                                                              \
    __attribute__((target("avx2,fma"))) static void micro_avx2_ftz_##RN##_##CB(                    \
        const kr_tile_out *t, const uint32_t *xb, int np, int p, const kr_linear *l) {             \
        micro_avx2(RN, CB, 1, t, xb, np, p, l);                                                    \
    }
MA2(1, 1)
MA2(2, 1)
MA2(3, 1)
MA2(4, 1)
MA2(1, 4)
/* [ftz][rows - 1]: one panel; [ftz]: a single row's four */
static const micro_fn micro_avx2_table[2][A2_RB] = {
    {micro_avx2_1_1, micro_avx2_2_1, micro_avx2_3_1, micro_avx2_4_1},
    {micro_avx2_ftz_1_1, micro_avx2_ftz_2_1, micro_avx2_ftz_3_1, micro_avx2_ftz_4_1}};
static const micro_fn micro_avx2_row4[2] = {micro_avx2_1_4, micro_avx2_ftz_1_4};

static void tile_avx2(const kr_tile_out *t, const uint32_t *xb, int in, int rn, int p, int cb,
                      const kr_linear *l, int ftz) {
    int np = kr_bf16_pairs(in), c = 0;
    if (rn == 1) /* a single path: four panels at a time */
        for (; c + A2_CB <= cb; c += A2_CB) {
            kr_tile_out s = kr_tile_sub(t, 0, c * PANEL);
            micro_avx2_row4[ftz](&s, xb, np, p + c, l);
        }
    for (; c < cb; c++)
        for (int i = 0; i < rn; i += A2_RB) {
            int n = rn - i < A2_RB ? rn - i : A2_RB;
            kr_tile_out s = kr_tile_sub(t, i, c * PANEL);
            micro_avx2_table[ftz][n - 1](&s, xb + (size_t)i * np, np, p + c, l);
        }
}

/* ---- AVX512-BF16: vdpbf16ps ------------------------------------------------------------------ */

#define DP_RB     6 /* rows x 4 panels for many rows (24 accumulators) */
#define DP_CB_MAX 8 /* panels for one or two rows (a decode step: 8 or 16 chains) */

#define DP_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* PF (a decode step's few rows): fetch into L2, while these run, one panel (PF 1) or CB panels
 * (PF 2) from pf values past w: the panels read next, a line a step of j */
DP_TARGET __attribute__((always_inline)) static inline void
micro_dp(int RN, int CB, int PF, const kr_tile_out *t, const uint32_t *xb, int np, int p,
         const kr_linear *l, size_t pf) {
    const uint16_t *w = l->wh + (size_t)p * np * PW;
    size_t ps = (size_t)np * PW; /* values from one panel to the next */
    __m512 acc[DP_RB][DP_CB_MAX];
#pragma GCC unroll 8
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++)
            acc[i][c] = _mm512_setzero_ps();
    for (int j = 0; j < np; j++) {
        __m512bh wv[DP_CB_MAX];
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++) {
            wv[c] = (__m512bh)_mm512_loadu_si512((const void *)(w + c * ps + (size_t)j * PW));
            if (PF == 2)
                _mm_prefetch((const char *)(w + pf + c * ps + (size_t)j * PW), _MM_HINT_T1);
        }
        if (PF == 1) _mm_prefetch((const char *)(w + pf + (size_t)j * PW), _MM_HINT_T1);
#pragma GCC unroll 8
        for (int i = 0; i < RN; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)xb[(size_t)i * np + j]);
#pragma GCC unroll 8
            for (int c = 0; c < CB; c++)
                acc[i][c] = _mm512_dpbf16_ps(acc[i][c], a, wv[c]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++)
            kr_tile_put16(t, i, c * PANEL, acc[i][c]);
}

typedef void (*dp_fn)(const kr_tile_out *, const uint32_t *, int, int, const kr_linear *, size_t);
#define MDP(RN, CB)                                                                                \
    DP_TARGET static void micro_dp_##RN##_##CB(const kr_tile_out *t, const uint32_t *xb, int np,   \
                                               int p, const kr_linear *l, size_t pf) {             \
        micro_dp(RN, CB, 0, t, xb, np, p, l, pf);                                                  \
    }                                                                                              \
    DP_TARGET static void micro_dp_pf1_##RN##_##CB(const kr_tile_out *t, const uint32_t *xb,       \
                                                   int np, int p, const kr_linear *l, size_t pf) { \
        micro_dp(RN, CB, 1, t, xb, np, p, l, pf);                                                  \
    }                                                                                              \
    DP_TARGET static void micro_dp_pf2_##RN##_##CB(const kr_tile_out *t, const uint32_t *xb,       \
                                                   int np, int p, const kr_linear *l, size_t pf) { \
        micro_dp(RN, CB, 2, t, xb, np, p, l, pf);                                                  \
    }
#define MDP_ROW(RN) MDP(RN, 1) MDP(RN, 2) MDP(RN, 4)
MDP_ROW(1)
MDP_ROW(2)
MDP_ROW(3)
MDP_ROW(4)
MDP_ROW(5)
MDP_ROW(6)
MDP(1, 8)
MDP(2, 8)
/* [prefetch][rows - 1][log2 panels] */
#define MDP_ENTRY(PF, RN)                                                                          \
    { micro_dp_##PF##RN##_1, micro_dp_##PF##RN##_2, micro_dp_##PF##RN##_4, NULL }
#define MDP_TABLE(PF)                                                                              \
    {                                                                                              \
        {micro_dp_##PF##1_1, micro_dp_##PF##1_2, micro_dp_##PF##1_4, micro_dp_##PF##1_8},          \
            {micro_dp_##PF##2_1, micro_dp_##PF##2_2, micro_dp_##PF##2_4, micro_dp_##PF##2_8},      \
            MDP_ENTRY(PF, 3), MDP_ENTRY(PF, 4), MDP_ENTRY(PF, 5), MDP_ENTRY(PF, 6)                 \
    }
static const dp_fn micro_dp_table[3][DP_RB][4] = {MDP_TABLE(), MDP_TABLE(pf1_), MDP_TABLE(pf2_)};

/* ---- AVX-512 FMAs under FTZ: the contract where vdpbf16ps is missing or slow ---------------- */

/* With MXCSR's FTZ (a result tiny after rounding, as x86 detects it, gives a zero of its sign)
 * and DAZ, an FMA of the widened BF16 factors is the contract's add as it stands: no compare,
 * no fix-up (tests/test_precision_bf16.c checks it lane by lane against its emulation). The
 * weights' halves are widened once a load (odd: the high half masked; even: shifted up) for
 * all the rows; the rows' pairs are widened a chunk at a time into odd and even floats on the
 * stack, which the FMAs broadcast from memory. */

#define FM_RB 12 /* rows x 2 panels for many rows */

#define FM_TARGET __attribute__((target("avx512f")))

/* micro_dp's tile (prefetch alike) as FMAs, many rows in blocks of 12 by 2 panels: 24
 * accumulators, the panels' 4 widened weight vectors shared by 12 rows (the widening's vector
 * ops, which compete with the FMAs, 1 for 12 FMAs), a row's 2 broadcasts used by 4 FMAs. */
FM_TARGET __attribute__((always_inline)) static inline void
micro_fma(int RN, int CB, int PF, const kr_tile_out *t, const uint32_t *xb, int np, int p,
          const kr_linear *l, size_t pf) {
    const uint16_t *w = l->wh + (size_t)p * np * PW;
    size_t ps = (size_t)np * PW;
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    _Alignas(64) float xo[FM_RB][WIDE_KC], xe[FM_RB][WIDE_KC];
    __m512 acc[FM_RB][DP_CB_MAX];
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | KR_BF16_FTZ_DAZ);
#pragma GCC unroll 12
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++) {
            acc[i][c] = _mm512_setzero_ps();
            KR_PIN(acc[i][c]);
        }
    for (int j0 = 0; j0 < np; j0 += WIDE_KC) {
        int kc = np - j0 < WIDE_KC ? np - j0 : WIDE_KC;
        widen_rows(RN, xo, xe, xb, np, j0, kc);
        for (int j = 0; j < kc; j++) {
            const uint16_t *wj = w + (size_t)(j0 + j) * PW;
            if (PF == 1) _mm_prefetch((const char *)(wj + pf), _MM_HINT_T1);
            if (CB > 2) { /* a decode step's 1 or 2 rows by 4 or 8 panels: a panel at a time */
#pragma GCC unroll 8
                for (int c = 0; c < CB; c++) {
                    __m512i v = _mm512_loadu_si512((const void *)(wj + c * ps));
                    __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(v, hi));
                    __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
                    if (PF == 2) _mm_prefetch((const char *)(wj + pf + c * ps), _MM_HINT_T1);
#pragma GCC unroll 2
                    for (int i = 0; i < RN; i++) /* the odd product, then the even */
                        acc[i][c] = _mm512_fmadd_ps(
                            _mm512_set1_ps(xe[i][j]), we,
                            _mm512_fmadd_ps(_mm512_set1_ps(xo[i][j]), wo, acc[i][c]));
                }
                continue;
            }
            __m512 wo[DP_CB_MAX], we[DP_CB_MAX];
#pragma GCC unroll 8
            for (int c = 0; c < CB; c++) {
                __m512i v = _mm512_loadu_si512((const void *)(wj + c * ps));
                wo[c] = _mm512_castsi512_ps(_mm512_and_si512(v, hi));
                we[c] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
                if (PF == 2) _mm_prefetch((const char *)(wj + pf + c * ps), _MM_HINT_T1);
            }
            /* each accumulator: the odd product, then the even */
#pragma GCC unroll 12
            for (int i = 0; i < RN; i++) {
                __m512 bo = _mm512_set1_ps(xo[i][j]), be = _mm512_set1_ps(xe[i][j]);
#pragma GCC unroll 8
                for (int c = 0; c < CB; c++)
                    acc[i][c] = _mm512_fmadd_ps(be, we[c], _mm512_fmadd_ps(bo, wo[c], acc[i][c]));
            }
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++)
            KR_PIN(acc[i][c]);
    _mm_setcsr(csr);
#pragma GCC unroll 12
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++) {
            KR_PIN(acc[i][c]);
            kr_tile_put16(t, i, c * PANEL, acc[i][c]);
        }
}

#define MFM(RN, CB)                                                                                \
    FM_TARGET static void micro_fma_##RN##_##CB(const kr_tile_out *t, const uint32_t *xb, int np,  \
                                                int p, const kr_linear *l, size_t pf) {            \
        micro_fma(RN, CB, 0, t, xb, np, p, l, pf);                                                 \
    }                                                                                              \
    FM_TARGET static void micro_fma_pf1_##RN##_##CB(                                               \
        const kr_tile_out *t, const uint32_t *xb, int np, int p, const kr_linear *l, size_t pf) {  \
        micro_fma(RN, CB, 1, t, xb, np, p, l, pf);                                                 \
    }                                                                                              \
    FM_TARGET static void micro_fma_pf2_##RN##_##CB(                                               \
        const kr_tile_out *t, const uint32_t *xb, int np, int p, const kr_linear *l, size_t pf) {  \
        micro_fma(RN, CB, 2, t, xb, np, p, l, pf);                                                 \
    }
#define MFM_ROW(RN) MFM(RN, 1) MFM(RN, 2)
MFM_ROW(1)
MFM_ROW(2)
MFM_ROW(3)
MFM_ROW(4)
MFM_ROW(5)
MFM_ROW(6)
MFM_ROW(7)
MFM_ROW(8)
MFM_ROW(9)
MFM_ROW(10)
MFM_ROW(11)
MFM_ROW(12)
MFM(1, 4)
MFM(2, 4)
MFM(1, 8)
MFM(2, 8)
#define MFM_ENTRY(PF, RN)                                                                          \
    { micro_fma_##PF##RN##_1, micro_fma_##PF##RN##_2, NULL, NULL }
#define MFM_TABLE(PF)                                                                              \
    {                                                                                              \
        {micro_fma_##PF##1_1, micro_fma_##PF##1_2, micro_fma_##PF##1_4, micro_fma_##PF##1_8},      \
            {micro_fma_##PF##2_1, micro_fma_##PF##2_2, micro_fma_##PF##2_4, micro_fma_##PF##2_8},  \
            MFM_ENTRY(PF, 3), MFM_ENTRY(PF, 4), MFM_ENTRY(PF, 5), MFM_ENTRY(PF, 6),                \
            MFM_ENTRY(PF, 7), MFM_ENTRY(PF, 8), MFM_ENTRY(PF, 9), MFM_ENTRY(PF, 10),               \
            MFM_ENTRY(PF, 11), MFM_ENTRY(PF, 12)                                                   \
    }
static const dp_fn micro_fma_table[3][FM_RB][4] = {MFM_TABLE(), MFM_TABLE(pf1_), MFM_TABLE(pf2_)};

/* Rows in blocks of rb by groups of 2^many panels (one or two rows: 8 panels), each block's
 * tile from table [prefetch][rows - 1][log2 panels]. few: the product's rows are a decode step's
 * few, which read each panel from memory once: while a group of panels is read, the next group (the
 * next call's, or the next tile's) is fetched into L2, a panel by each of the first row blocks (the
 * fetches spread over the group's time, not bunched into its first block), or all by the first when
 * fewer blocks. */
static void tile_blocks(const dp_fn *table, int rb, int many, const kr_tile_out *t,
                        const uint32_t *xb, int in, int rn, int p, int cb, const kr_linear *l,
                        int few) {
    int np = kr_bf16_pairs(in), wide = rn <= 2 ? 3 : many, panels = (l->out + PANEL - 1) / PANEL;
    for (int c = 0; c < cb;) {
        int lg = wide;
        while (c + (1 << lg) > cb)
            lg--;
        int g = 1 << lg, blocks = (rn + rb - 1) / rb;
        int pf = few && p + c + 2 * g <= panels; /* a whole next group */
        size_t ps = (size_t)np * PW;
        for (int i = 0, b = 0; i < rn; i += rb, b++) {
            int n = rn - i < rb ? rn - i : rb;
            int mode = !pf ? 0 : blocks >= g ? (b < g) : 2 * (b == 0);
            kr_tile_out s = kr_tile_sub(t, i, c * PANEL);
            table[((size_t)mode * rb + n - 1) * 4 + lg](&s, xb + (size_t)i * np, np, p + c, l,
                                                        (size_t)(mode == 1 ? g + b : g) * ps);
        }
        c += 1 << lg;
    }
}

#endif

void kr_bf16_tile(const kr_tile_out *t, const uint32_t *xb, int in, int rn, int p, int cb,
                  const kr_linear *l, kr_simd simd, int few) {
#ifdef KR_X86
    kr_bf16_run run = kr_bf16_run_at(simd);
    switch (run) {
    case KR_BF16_RUN_DOT:
        tile_blocks(&micro_dp_table[0][0][0], DP_RB, 2, t, xb, in, rn, p, cb, l, few);
        return;
    case KR_BF16_RUN_FMA512:
        tile_blocks(&micro_fma_table[0][0][0], FM_RB, 1, t, xb, in, rn, p, cb, l, few);
        return;
    case KR_BF16_RUN_FMA256:
    case KR_BF16_RUN_CHECKED:
        tile_avx2(t, xb, in, rn, p, cb, l, run == KR_BF16_RUN_FMA256);
        return;
    case KR_BF16_RUN_C:
        break;
    }
#else
    (void)simd;
#endif
    (void)few;
    tile_c(t, xb, in, rn, p, cb, l);
}
