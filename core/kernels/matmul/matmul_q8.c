/* matmul_q8.c — the arithmetic of int8 weights (weights = int8), as llama.cpp's Q8_0: blocks
 * of 32 along the input, one float32 scale each, for the weights (at load) and for each row of
 * activations (once a product).
 *
 * Each block's dot product is a sum of 32 products of integers in [-127, 127]: exact in int32
 * on every level (AMX-INT8's tdpbsud, AVX512-VNNI's vpdpbusd, at the avx2 level AVX-VNNI's
 * vpdpbusd or vpmaddubsw + vpmaddwd (matmul_q8_avx2.c), or C). The float part is one
 * expression in one order: per block, in order, acc = fma(dx * dw, isum, acc). So every level
 * computes the same bits, and a row's bits depend on that row alone.
 *
 * The tiles are register-blocked: several rows by several panels of 16 columns per inner
 * loop, each weight vector loaded once for all the rows. vpdpbusd multiplies unsigned by
 * signed bytes, so the weights are packed as q + 128 and each accumulator starts at -128
 * times its row's block sum (kr_q8_rows.neg). */
#include "matmul_q8.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define KR_X86 1
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_REQ_XCOMP_PERM 0x1023 /* asm/prctl.h */
#define XFEATURE_XTILEDATA  18
#endif
#endif

#define QB    KR_Q8_BLOCK
#define PB    (KR_Q8_PANEL * QB) /* bytes of one panel's block */
#define PANEL KR_Q8_PANEL

static int block_len(int in, int b) {
    return in - b * QB < QB ? in - b * QB : QB;
}

/* ---- packing ------------------------------------------------------------------------------ */

size_t kr_q8_scales(int out, int in) {
    return (size_t)((out + PANEL - 1) / PANEL) * PANEL * kr_q8_blocks(in);
}

float kr_q8_quantise(int8_t *q, const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < QB; i++)
        q[i] = i < n ? (int8_t)roundf(x[i] * id) : 0;
    return d;
}

/* byte of column c (in its panel), input j (in its block) */
static size_t at_in_block(int c, int j) {
    return (size_t)(j / 4) * (PANEL * 4) + (size_t)c * 4 + j % 4;
}

void kr_q8_pack(int8_t *wq, float *ws, const float *w, int out, int in) {
    int nb = kr_q8_blocks(in), panels = (out + PANEL - 1) / PANEL;
    for (int p = 0; p < panels; p++)
        for (int b = 0; b < nb; b++) {
            int8_t *dst = wq + ((size_t)p * nb + b) * PB;
            for (int c = 0; c < PANEL; c++) {
                int o = p * PANEL + c;
                int8_t q[QB] = {0};
                float d = 0.0f;
                if (o < out) d = kr_q8_quantise(q, w + (size_t)o * in + b * QB, block_len(in, b));
                ws[((size_t)p * nb + b) * PANEL + c] = d;
                for (int j = 0; j < QB; j++)
                    dst[at_in_block(c, j)] = (int8_t)((uint8_t)q[j] ^ 0x80u);
            }
        }
}

int kr_q8_weight(const kr_linear *l, int o, int k) {
    int nb = kr_q8_blocks(l->in), b = k / QB;
    const int8_t *blk = l->wq + ((size_t)(o / PANEL) * nb + b) * PB;
    return (int8_t)((uint8_t)blk[at_in_block(o % PANEL, k % QB)] ^ 0x80u);
}

float kr_q8_scale(const kr_linear *l, int o, int b) {
    return l->ws[((size_t)(o / PANEL) * kr_q8_blocks(l->in) + b) * PANEL + o % PANEL];
}

/* ---- the activations ---------------------------------------------------------------------- */

#ifdef KR_X86
/* kr_q8_quantise of a whole block: the same IEEE operations (max, a divide, a multiply), and
 * roundf as trunc, then one away from zero where the exact remainder is at least a half */
__attribute__((target("avx2,fma"))) static float quant32_avx2(int8_t *q, int32_t *sum,
                                                              const float *x) {
    __m256 sign = _mm256_set1_ps(-0.0f), v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float amax = _mm_cvtss_f32(h), d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    __m256i r[4];
    for (int i = 0; i < 4; i++) {
        __m256 t = _mm256_mul_ps(v[i], _mm256_set1_ps(id));
        __m256 tr = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 half = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(t, tr)),
                                    _mm256_set1_ps(0.5f), _CMP_GE_OQ);
        __m256 one = _mm256_or_ps(_mm256_and_ps(t, sign), _mm256_set1_ps(1.0f));
        r[i] = _mm256_cvttps_epi32(_mm256_add_ps(tr, _mm256_and_ps(half, one)));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
    __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0x4e));
    h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0xb1));
    *sum = _mm_cvtsi128_si32(h4);
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
    return d;
}

/* quant32_avx2 on 16 lanes: the same operations, so the same bits */
__attribute__((target("avx512f"))) static float quant32_avx512(int8_t *q, int32_t *sum,
                                                               const float *x) {
    __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    __m512i r[2];
    for (int i = 0; i < 2; i++) {
        __m512 t = _mm512_mul_ps(v[i], _mm512_set1_ps(id));
        __m512 tr = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __mmask16 half = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(t, tr)),
                                            _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        __m512 one = _mm512_castsi512_ps(
            _mm512_or_epi32(_mm512_and_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(INT32_MIN)),
                            _mm512_castps_si512(_mm512_set1_ps(1.0f))));
        r[i] = _mm512_cvttps_epi32(_mm512_mask_add_ps(tr, half, tr, one));
        _mm_storeu_si128((__m128i *)(q + 16 * i), _mm512_cvtsepi32_epi8(r[i]));
    }
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(r[0], r[1]));
    return d;
}
#endif

void kr_q8_quantise_rows(const kr_q8_rows *xq, const float *x, int n, int in, kr_simd simd) {
    int nb = xq->nb;
    for (int r = 0; r < n; r++)
        for (int b = 0; b < nb; b++) {
            size_t i = (size_t)r * nb + b;
            int8_t *q = xq->q + i * QB;
            const float *src = x + (size_t)r * in + b * QB;
            int len = block_len(in, b);
            int32_t s = 0;
#ifdef KR_X86
            if (simd >= KR_SIMD_AVX512 && len == QB) {
                xq->d[i] = quant32_avx512(q, &s, src);
                xq->neg[i] = -128 * s;
                continue;
            }
            if (simd >= KR_SIMD_AVX2 && len == QB) {
                xq->d[i] = quant32_avx2(q, &s, src);
                xq->neg[i] = -128 * s;
                continue;
            }
#endif
            xq->d[i] = kr_q8_quantise(q, src, len);
            for (int j = 0; j < QB; j++)
                s += q[j];
            xq->neg[i] = -128 * s;
        }
    (void)simd;
}

/* ---- portable tile ------------------------------------------------------------------------ */

static void tile_c(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                   const kr_linear *l) {
    int nb = xq->nb, ld = cb * PANEL < t->m ? cb * PANEL : t->m;
    for (int i = 0; i < rn; i++)
        for (int c = 0; c < ld; c++) {
            int pp = p + c / PANEL, cc = c % PANEL;
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const int8_t *w = l->wq + ((size_t)pp * nb + b) * PB;
                const int8_t *a = xq->q + ((size_t)(r + i) * nb + b) * QB;
                int32_t s = 0;
                for (int j = 0; j < QB; j++)
                    s += (int8_t)((uint8_t)w[at_in_block(cc, j)] ^ 0x80u) * a[j];
                float dw = l->ws[((size_t)pp * nb + b) * PANEL + cc];
                acc = fmaf(xq->d[(size_t)(r + i) * nb + b] * dw, (float)s, acc);
            }
            kr_tile_put1(t, i, c, acc);
        }
}

#ifdef KR_X86
/* ---- AVX512-VNNI: RN rows x CB panels, RN x CB <= 8 ------------------------------------- */

#define VN_RB 4
#define VN_CB 4

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

VNNI_TARGET __attribute__((always_inline)) static inline void
micro_vnni(int RN, int CB, int PF, const kr_tile_out *t, const kr_q8_rows *xq, int r, int p,
           const kr_linear *l, size_t pf) {
    int nb = xq->nb;
    size_t ps = (size_t)nb * PB; /* bytes from one panel to the next */
    __m512 f[VN_RB][VN_CB];
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++)
            f[i][c] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const int8_t *w = l->wq + ((size_t)p * nb + b) * PB;
        __m512i s[VN_RB][VN_CB];
#pragma GCC unroll 4
        for (int i = 0; i < RN; i++) {
            __m512i n0 = _mm512_set1_epi32(xq->neg[(size_t)(r + i) * nb + b]);
#pragma GCC unroll 4
            for (int c = 0; c < CB; c++)
                s[i][c] = n0;
        }
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            __m512i wv[VN_CB];
#pragma GCC unroll 4
            for (int c = 0; c < CB; c++) {
                wv[c] = _mm512_loadu_si512((const void *)(w + c * ps + q * 64));
                if (PF == 2) _mm_prefetch((const char *)(w + pf + c * ps + q * 64), _MM_HINT_T1);
            }
            if (PF == 1) _mm_prefetch((const char *)(w + pf + q * 64), _MM_HINT_T1);
#pragma GCC unroll 4
            for (int i = 0; i < RN; i++) {
                __m512i a =
                    _mm512_set1_epi32(kr_q8_quad(xq->q + ((size_t)(r + i) * nb + b) * QB + 4 * q));
#pragma GCC unroll 4
                for (int c = 0; c < CB; c++)
                    s[i][c] = _mm512_dpbusd_epi32(s[i][c], wv[c], a);
            }
        }
        __m512 dw[VN_CB];
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++)
            dw[c] = _mm512_loadu_ps(l->ws + ((size_t)(p + c) * nb + b) * PANEL);
#pragma GCC unroll 4
        for (int i = 0; i < RN; i++) {
            __m512 dx = _mm512_set1_ps(xq->d[(size_t)(r + i) * nb + b]);
#pragma GCC unroll 4
            for (int c = 0; c < CB; c++)
                f[i][c] =
                    _mm512_fmadd_ps(_mm512_mul_ps(dx, dw[c]), _mm512_cvtepi32_ps(s[i][c]), f[i][c]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++)
            kr_tile_put16(t, i, c * PANEL, f[i][c]);
}

/* PF: fetch into L2 meanwhile one panel (1) or CB panels (2) from pf bytes past w (tile_vnni) */
#define MVN(RN, CB)                                                                                \
    VNNI_TARGET static void micro_vnni_##RN##_##CB(const kr_tile_out *t, const kr_q8_rows *xq,     \
                                                   int r, int p, const kr_linear *l, size_t pf) {  \
        micro_vnni(RN, CB, 0, t, xq, r, p, l, pf);                                                 \
    }                                                                                              \
    VNNI_TARGET static void micro_vnni_pf1_##RN##_##CB(                                            \
        const kr_tile_out *t, const kr_q8_rows *xq, int r, int p, const kr_linear *l, size_t pf) { \
        micro_vnni(RN, CB, 1, t, xq, r, p, l, pf);                                                 \
    }                                                                                              \
    VNNI_TARGET static void micro_vnni_pf2_##RN##_##CB(                                            \
        const kr_tile_out *t, const kr_q8_rows *xq, int r, int p, const kr_linear *l, size_t pf) { \
        micro_vnni(RN, CB, 2, t, xq, r, p, l, pf);                                                 \
    }
MVN(1, 1)
MVN(1, 2)
MVN(1, 4)
MVN(2, 1)
MVN(2, 2)
MVN(2, 4)
MVN(3, 1)
MVN(3, 2)
MVN(4, 1)
MVN(4, 2)
typedef void (*vnni_fn)(const kr_tile_out *, const kr_q8_rows *, int, int, const kr_linear *,
                        size_t);
/* [prefetch][rows - 1][log2 panels]: 4 rows x 2 panels for many rows, 1-2 rows x 4 panels
 * (8 chains in flight) for a decode step's one or two */
#define MVN_TABLE(PF)                                                                              \
    {                                                                                              \
        {micro_vnni_##PF##1_1, micro_vnni_##PF##1_2, micro_vnni_##PF##1_4},                        \
            {micro_vnni_##PF##2_1, micro_vnni_##PF##2_2, micro_vnni_##PF##2_4},                    \
            {micro_vnni_##PF##3_1, micro_vnni_##PF##3_2, NULL},                                    \
            {micro_vnni_##PF##4_1, micro_vnni_##PF##4_2, NULL},                                    \
    }
static const vnni_fn micro_vnni_table[3][VN_RB][3] = {MVN_TABLE(), MVN_TABLE(pf1_),
                                                      MVN_TABLE(pf2_)};

static int has_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw");
}

/* A few rows (a decode step's paths) read each panel from memory once and again from L1 for
 * each row block: the next group of panels (the next call's) is fetched into L2 meanwhile, a
 * panel by each of the first row blocks (spread over the group's time), or all by the first
 * when fewer blocks. Many rows find most panels in L2 already. */
static void tile_vnni(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                      const kr_linear *l) {
    int wide = rn <= 2 ? 2 : 1; /* log2 of the panels a call takes */
    int few = xq->prefetch, panels = (l->out + PANEL - 1) / PANEL;
    for (int c = 0; c < cb;) {
        int lg = wide;
        while (c + (1 << lg) > cb)
            lg--;
        int g = 1 << lg, blocks = (rn + VN_RB - 1) / VN_RB, pf = few && p + c + 2 * g <= panels;
        size_t ps = (size_t)xq->nb * PB;
        for (int i = 0, b = 0; i < rn; i += VN_RB, b++) {
            int n = rn - i < VN_RB ? rn - i : VN_RB;
            int mode = !pf ? 0 : blocks >= g ? (b < g) : 2 * (b == 0);
            kr_tile_out s = kr_tile_sub(t, i, c * PANEL);
            micro_vnni_table[mode][n - 1][lg](&s, xq, r + i, p + c, l,
                                              (size_t)(mode == 1 ? g + b : g) * ps);
        }
        c += g;
    }
}

/* ---- AMX-INT8: groups of up to 16 rows x 1 panel, one TDPBSUD a block ------------------ */

/* A group of fewer rows stays on vpdpbusd: a tile's loads, product and store cost the same
 * for any row count, and below this many rows vpdpbusd is faster */
#define AMX_MIN_ROWS 8
#define AMX_ROWS     16

#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni")))
/* the tile intrinsics' asm does not tell the compiler which memory the tiles read */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) amx_config;

/* Tiles for g rows, in sets so that blocks' products run while earlier blocks' floats are
 * summed (tiles are not renamed): C 0, 1, 6 and 7 (int32 sums, 16 columns), A 2 and 3 (the
 * rows' bytes of a block), B 4 and 5 (the panel's block: 8 quads x 16 columns x 4 bytes) */
static void amx_configure(amx_config *c, int g) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    for (int t = 0; t < 8; t++) {
        c->rows[t] = (uint8_t)(t == 4 || t == 5 ? QB / 4 : g);
        c->colsb[t] = (uint16_t)(t == 2 || t == 3 ? QB : 64);
    }
}

/* The group's scales and neg by block, [block][16 rows]: one base for a block's rows */
typedef struct {
    float d[KR_Q8_MAX_IN / QB * AMX_ROWS];
    int32_t neg[KR_Q8_MAX_IN / QB * AMX_ROWS];
} amx_rows;

/* One block's sums s[row][16] into the rows' chains: isum = s + neg, acc = fma(dx*dw, isum, acc) */
AMX_TARGET __attribute__((always_inline)) static inline void
amx_chain(int G, __m512 *f, const int32_t *s, const amx_rows *g, int b, __m512 dw) {
    const float *d = g->d + (size_t)b * AMX_ROWS;
    const int32_t *neg = g->neg + (size_t)b * AMX_ROWS;
#pragma GCC unroll 16
    for (int i = 0; i < G; i++) {
        __m512i v = _mm512_add_epi32(_mm512_load_si512((const void *)(s + 16 * i)),
                                     _mm512_set1_epi32(neg[i]));
        f[i] =
            _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(d[i]), dw), _mm512_cvtepi32_ps(v), f[i]);
    }
}

/* Block b's product of the group's bytes and the panel's into tile C, stored at s */
#define AMX_BLOCK(C, A, B, s, b)                                                                   \
    do {                                                                                           \
        _tile_loadd(A, xq->q + ((size_t)r * nb + (b)) * QB, (long)nb * QB);                        \
        _tile_loadd(B, w + (size_t)(b)*PB, 64);                                                    \
        _tile_zero(C);                                                                             \
        _tile_dpbsud(C, A, B);                                                                     \
        _tile_stored(C, s, 64);                                                                    \
        AMX_BARRIER(); /* the floats read s after the store */                                     \
    } while (0)

/* Rows r .. r + G - 1 (G <= 16, the tiles configured for G) x panel p */
AMX_TARGET __attribute__((always_inline)) static inline void amx_group(int G, const kr_tile_out *t,
                                                                       const kr_q8_rows *xq,
                                                                       const amx_rows *g, int r,
                                                                       int p, const kr_linear *l) {
    int nb = xq->nb;
    const int8_t *w = l->wq + (size_t)p * nb * PB;
    const float *ws = l->ws + (size_t)p * nb * PANEL;
    int32_t s[4][AMX_ROWS * 16] __attribute__((aligned(64)));
    __m512 f[AMX_ROWS];
#pragma GCC unroll 16
    for (int i = 0; i < G; i++)
        f[i] = _mm512_setzero_ps();
    AMX_BARRIER();
    /* blocks b + 2 and b + 3 multiplied while b's and b + 1's floats are summed */
    AMX_BLOCK(0, 2, 4, s[0], 0);
    if (1 < nb) AMX_BLOCK(1, 3, 5, s[1], 1);
    for (int b = 0; b < nb; b += 4) {
        if (b + 2 < nb) AMX_BLOCK(6, 2, 4, s[2], b + 2);
        if (b + 3 < nb) AMX_BLOCK(7, 3, 5, s[3], b + 3);
        amx_chain(G, f, s[0], g, b, _mm512_loadu_ps(ws + (size_t)b * PANEL));
        if (b + 1 < nb)
            amx_chain(G, f, s[1], g, b + 1, _mm512_loadu_ps(ws + (size_t)(b + 1) * PANEL));
        if (b + 4 < nb) AMX_BLOCK(0, 2, 4, s[0], b + 4);
        if (b + 5 < nb) AMX_BLOCK(1, 3, 5, s[1], b + 5);
        if (b + 2 < nb)
            amx_chain(G, f, s[2], g, b + 2, _mm512_loadu_ps(ws + (size_t)(b + 2) * PANEL));
        if (b + 3 < nb)
            amx_chain(G, f, s[3], g, b + 3, _mm512_loadu_ps(ws + (size_t)(b + 3) * PANEL));
    }
#pragma GCC unroll 16
    for (int i = 0; i < G; i++)
        kr_tile_put16(t, i, 0, f[i]);
}

#define MAMX(G)                                                                                    \
    AMX_TARGET static void amx_group_##G(const kr_tile_out *t, const kr_q8_rows *xq,               \
                                         const amx_rows *g, int r, int p, const kr_linear *l) {    \
        amx_group(G, t, xq, g, r, p, l);                                                           \
    }
MAMX(8)
MAMX(9)
MAMX(10)
MAMX(11)
MAMX(12)
MAMX(13)
MAMX(14)
MAMX(15)
MAMX(16)
typedef void (*amx_fn)(const kr_tile_out *, const kr_q8_rows *, const amx_rows *, int, int,
                       const kr_linear *);
static const amx_fn amx_group_table[AMX_ROWS - AMX_MIN_ROWS + 1] = {
    amx_group_8,  amx_group_9,  amx_group_10, amx_group_11, amx_group_12,
    amx_group_13, amx_group_14, amx_group_15, amx_group_16};

AMX_TARGET static void tile_amx(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p,
                                int cb, const kr_linear *l) {
    amx_config cfg;
    amx_rows g;
    int nb = xq->nb;
    for (int i = 0, rows = 0; i < rn; i += AMX_ROWS) {
        int n = rn - i < AMX_ROWS ? rn - i : AMX_ROWS;
        if (n < AMX_MIN_ROWS) {
            kr_tile_out s = kr_tile_sub(t, i, 0);
            tile_vnni(&s, xq, r + i, n, p, cb, l);
            break;
        }
        for (int b = 0; b < nb; b++)
            for (int k = 0; k < n; k++) {
                g.d[b * AMX_ROWS + k] = xq->d[(size_t)(r + i + k) * nb + b];
                g.neg[b * AMX_ROWS + k] = xq->neg[(size_t)(r + i + k) * nb + b];
            }
        if (n != rows) { /* a last, shorter group */
            amx_configure(&cfg, rows = n);
            AMX_BARRIER();
            _tile_loadconfig(&cfg);
        }
        for (int c = 0; c < cb; c++) {
            kr_tile_out s = kr_tile_sub(t, i, c * PANEL);
            amx_group_table[n - AMX_MIN_ROWS](&s, xq, &g, r + i, p + c, l);
        }
    }
    _tile_release();
}

/* CPUID's AMX-TILE and AMX-INT8, and the tile state enabled in XCR0 (by CPUID, not
 * __builtin_cpu_supports: clang 14 does not know the AMX names) */
static int has_amx_int8(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return 0; /* OSXSAVE: xgetbv */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo >> 17 & 3) == 3; /* XTILECFG and XTILEDATA */
}

/* The CPU has the tiles and the OS grants their state to this process (asked once) */
int kr_q8_amx_ready(void) {
    static atomic_int ready = -1;
    int ok = atomic_load(&ready);
    if (ok < 0) {
        ok = 0;
#ifdef __linux__
        if (has_vnni() && has_amx_int8())
            ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
        atomic_store(&ready, ok);
    }
    return ok;
}

#else
int kr_q8_amx_ready(void) {
    return 0;
}
#endif

kr_q8_run kr_q8_run_at(kr_simd level) {
#ifdef KR_X86
    if (level == KR_SIMD_AMX) return KR_Q8_RUN_AMX;
    if (level >= KR_SIMD_AVX512 && has_vnni()) return KR_Q8_RUN_VNNI512;
    if (level >= KR_SIMD_AVX2)
        return kr_q8_avx2_product_get() == KR_Q8_AVX_VNNI ? KR_Q8_RUN_VNNI256 : KR_Q8_RUN_MADDUBS;
#else
    (void)level;
#endif
    return KR_Q8_RUN_C;
}

const char *kr_q8_product_name(kr_simd level) {
    static const char *const names[] = {"tdpbsud", "vpdpbusd", "avx-vnni", "vpmaddubsw", "c"};
    return names[kr_q8_run_at(level)];
}

void kr_q8_tile(const kr_tile_out *t, const kr_q8_rows *xq, int r, int rn, int p, int cb,
                const kr_linear *l, kr_simd simd) {
    switch (kr_q8_run_at(simd)) {
#ifdef KR_X86
    case KR_Q8_RUN_AMX:
        if (rn >= AMX_MIN_ROWS) { /* else a single path's rows and the like: vpdpbusd */
            tile_amx(t, xq, r, rn, p, cb, l);
            return;
        }
        tile_vnni(t, xq, r, rn, p, cb, l);
        return;
    case KR_Q8_RUN_VNNI512:
        tile_vnni(t, xq, r, rn, p, cb, l);
        return;
    case KR_Q8_RUN_VNNI256:
    case KR_Q8_RUN_MADDUBS:
        kr_q8_tile_avx2(t, xq, r, rn, p, cb, l);
        return;
#endif
    default:
        tile_c(t, xq, r, rn, p, cb, l);
        return;
    }
}
