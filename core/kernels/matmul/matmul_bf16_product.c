/* matmul_bf16_product.c — which product weights = bf16's tiles run: vdpbf16ps (avx512 and
 * amx), FMAs of the widened BF16 values under MXCSR's flush to zero (16 lanes at avx512, 8 at
 * avx2), or FMAs with each sum near zero checked (where the flush is not the contract's). Each
 * computes the contract's bits; the choice only moves the speed.
 *
 * The FMAs rest on the CPU's FTZ flushing exactly what the contract flushes: a result tiny
 * after rounding to 24 bits with the exponent unbounded, exact or not, to a zero of its sign.
 * Intel's manual says x86 detects tininess so; AMD's is less explicit. So the FMA path is
 * offered only where a check on this CPU finds it (fma_ftz_exact): the sums on either side of
 * each rule's boundary, and lanes of every kind, against the C level's add. */
#include "matmul_bf16_product.h"

#include "bf16.h"

#include <float.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <x86intrin.h>
#define KR_X86 1
#endif

#ifdef KR_X86

/* ---- the FTZ check ------------------------------------------------------------------------ */

#define CHECK_LANES 4096

/* out = the pairs' chain acc + x1 w1 + x0 w0, two FMAs under FTZ|DAZ, 8 lanes (AVX2: the
 * flush is MXCSR's at every width) */
__attribute__((target("avx2,fma"), noinline)) static void
pair8_ftz(float *out, const float *acc, const float *x1, const float *w1, const float *x0,
          const float *w0) {
    __m256 a1 = _mm256_loadu_ps(x1), b1 = _mm256_loadu_ps(w1), a0 = _mm256_loadu_ps(x0),
           b0 = _mm256_loadu_ps(w0), r = _mm256_loadu_ps(acc);
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | KR_BF16_FTZ_DAZ);
    KR_PIN(r);
    r = _mm256_fmadd_ps(a1, b1, r);
    r = _mm256_fmadd_ps(a0, b0, r);
    KR_PIN(r);
    _mm_setcsr(csr);
    KR_PIN(r);
    _mm256_storeu_ps(out, r);
}

static uint32_t next(uint32_t *s) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

/* A BF16 value (widened) of kind 0 near 1, 1 any normal exponent, 2 near the denormals */
static float some(uint32_t *s, int kind) {
    uint32_t e = kind == 0 ? 122 + next(s) % 11 : kind == 1 ? 1 + next(s) % 254 : 1 + next(s) % 14;
    return kr_bf16_widen((uint16_t)((next(s) & 1) << 15 | e << 7 | (next(s) & 0x7f)));
}

/* The boundaries: 24-bit rounding up to FLT_MIN (kept) against the denormal grid's (flushed),
 * an exact tiny sum (flushed), zeros' signs; then lanes near 1, of any exponent, near the
 * denormals, with acc 0, a product cancelled, near FLT_MIN, or any */
static void check_lane(int n, uint32_t *s, float *acc, float *x1, float *w1, float *x0, float *w0) {
    static const float fixed[][5] = {
        {FLT_MIN, 0x1p-75f, -0x1p-76f, 0, 0}, /* FLT_MIN - 2^-151: rounds to FLT_MIN, kept */
        {FLT_MIN, 0x1p-75f, -0x1p-75f, 0, 0}, /* FLT_MIN - 2^-150: tiny, flushed */
        {-FLT_MIN, 0x1p-75f, 0x1p-76f, 0, 0}, /* the same below zero */
        {-FLT_MIN, 0x1p-75f, 0x1p-75f, 0, 0},
        {0, 0x1p-65f, 0x1p-65f, 0, 0},                         /* 2^-130 exact: flushed */
        {0, -0x1p-65f, 0x1p-65f, 0, 0},                        /* to -0 */
        {0x1p-125f, -0x1p-63f, 0x1p-63f, 0x1p-70f, -0x1p-60f}, /* tiny after a normal step */
        {0x1p-120f, -0x1.8p-61f, 0x1p-60f, 0x1p-70f, 0x1p-56f},
    };
    int nf = (int)(sizeof fixed / sizeof fixed[0]);
    if (n < nf) {
        *acc = fixed[n][0], *x1 = fixed[n][1], *w1 = fixed[n][2], *x0 = fixed[n][3],
        *w0 = fixed[n][4];
        return;
    }
    int kind = n % 3, am = n / 3 % 5;
    *x1 = some(s, kind), *w1 = some(s, kind), *x0 = some(s, kind), *w0 = some(s, kind);
    float p1 = *x1 * *w1, ulp = 0x1p-12f * (float)(next(s) % 8);
    if (am == 0)
        *acc = 0.0f;
    else if (am == 1)
        *acc = -p1;
    else if (am == 2)
        *acc = -p1 * (1.0f + ulp);
    else if (am == 3)
        *acc = (next(s) & 1 ? -FLT_MIN : FLT_MIN) * (float)(1 + next(s) % 4);
    else
        *acc = some(s, 1);
    if (!(*acc - *acc == 0.0f) || !(p1 - p1 == 0.0f)) *acc = 0.0f; /* no infinities */
    if (*acc > -FLT_MIN && *acc < FLT_MIN) *acc = 0.0f; /* as the chain's sums: never denormal */
}

static int fma_ftz_exact(void) {
    float acc[8], x1[8], w1[8], x0[8], w0[8], out[8];
    uint32_t s = 12345u;
    for (int n = 0; n < CHECK_LANES; n += 8) {
        for (int i = 0; i < 8; i++)
            check_lane(n + i, &s, &acc[i], &x1[i], &w1[i], &x0[i], &w0[i]);
        pair8_ftz(out, acc, x1, w1, x0, w0);
        for (int i = 0; i < 8; i++) {
            float e = kr_bf16_add(kr_bf16_add(acc[i], x1[i], w1[i]), x0[i], w0[i]);
            if (memcmp(&e, &out[i], sizeof e) != 0) return 0;
        }
    }
    return 1;
}

/* ---- the rates ---------------------------------------------------------------------------- */

#define PROBE_STEPS 10000 /* of 12 independent chains: the rate, not the latency */

/* TSC ticks of PROBE_STEPS x 12 vdpbf16ps (dot) or FMAs, the chains in registers */
#define PROBE_12(OP)                                                                               \
    OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7) OP(a8) OP(a9) OP(a10) OP(a11)
#define PROBE_DOT(a)                                                                               \
    a = _mm512_dpbf16_ps(a, xb, xb);                                                               \
    KR_PIN(a);
#define PROBE_FMA(a)                                                                               \
    a = _mm512_fmadd_ps(x, y, a);                                                                  \
    KR_PIN(a);
#define PROBE_SUM(a) s = _mm512_add_ps(s, a);
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) static uint64_t
probe(int dot) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
           a8 = a0, a9 = a0, a10 = a0, a11 = a0, s = a0;
    __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(0x1p-30f);
    __m512bh xb = (__m512bh)_mm512_set1_epi32(0x3f803f80);
    uint64_t t0 = __rdtsc();
    if (dot)
        for (int k = 0; k < PROBE_STEPS; k++) {
            PROBE_12(PROBE_DOT)
        }
    else
        for (int k = 0; k < PROBE_STEPS; k++) {
            PROBE_12(PROBE_FMA)
        }
    uint64_t t = __rdtsc() - t0;
    PROBE_12(PROBE_SUM)
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return t;
}

/* vdpbf16ps unless the FMAs do more than 5/4 of its multiply-adds a second (a vdpbf16ps does
 * 32, an FMA 16): the FMA tiles also spend vector ops widening the weights (one for 12 FMAs of
 * many rows, one for each FMA of a single row), so a smaller lead would not show. Both probed
 * interleaved, the best of five each (the least disturbed by the neighbours). */
static kr_bf16_product choose(void) {
    uint64_t dot = UINT64_MAX, fma = UINT64_MAX;
    for (int r = 0; r < 5; r++) {
        uint64_t d = probe(1), f = probe(0);
        dot = d < dot ? d : dot;
        fma = f < fma ? f : fma;
    }
    /* multiply-adds per tick: 32 / dot against 16 / fma */
    return 4 * 16 * dot > 5 * 32 * fma ? KR_BF16_FMA : KR_BF16_DOT;
}
#endif

/* ---- the choice --------------------------------------------------------------------------- */

int kr_bf16_has_dot(void) {
#ifdef KR_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

int kr_bf16_fma_ftz_exact(void) {
#ifdef KR_X86
    static atomic_int exact = -1; /* checked once */
    int e = atomic_load(&exact);
    if (e < 0) {
        __builtin_cpu_init();
        e = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && fma_ftz_exact();
        atomic_store(&exact, e);
    }
    return e;
#else
    return 0;
#endif
}

static atomic_int product = -1; /* a kr_bf16_product once chosen */

static int can_run(kr_bf16_product p) {
    if (p == KR_BF16_DOT) return kr_bf16_has_dot();
    if (p == KR_BF16_FMA) return kr_bf16_fma_ftz_exact();
    return p == KR_BF16_AVX2;
}

int kr_bf16_product_set(kr_bf16_product p) {
    if (!can_run(p)) return -1;
    atomic_store(&product, (int)p);
    return 0;
}

kr_bf16_product kr_bf16_product_get(void) {
    int p = atomic_load(&product);
    if (p >= 0) return (kr_bf16_product)p;
    const char *force = getenv("KRONOS_BF16_PRODUCT");
    if (force && strcmp(force, "vdpbf16ps") == 0 && can_run(KR_BF16_DOT))
        p = KR_BF16_DOT;
    else if (force && strcmp(force, "fma") == 0 && can_run(KR_BF16_FMA))
        p = KR_BF16_FMA;
    else if (can_run(KR_BF16_DOT) && can_run(KR_BF16_FMA))
#ifdef KR_X86
        p = (int)choose();
#else
        p = KR_BF16_DOT;
#endif
    else if (can_run(KR_BF16_DOT))
        p = KR_BF16_DOT;
    else
        p = can_run(KR_BF16_FMA) ? KR_BF16_FMA : KR_BF16_AVX2;
    int none = -1; /* two threads deciding at once: the first one's answer stands */
    atomic_compare_exchange_strong(&product, &none, p);
    return (kr_bf16_product)atomic_load(&product);
}

kr_bf16_run kr_bf16_run_at(kr_simd s) {
    kr_bf16_product p = kr_bf16_product_get();
    if (s >= KR_SIMD_AVX512 && p == KR_BF16_DOT) return KR_BF16_RUN_DOT;
    if (s >= KR_SIMD_AVX512 && p == KR_BF16_FMA) return KR_BF16_RUN_FMA512;
    if (s < KR_SIMD_AVX2) return KR_BF16_RUN_C;
    return p != KR_BF16_AVX2 && kr_bf16_fma_ftz_exact() ? KR_BF16_RUN_FMA256 : KR_BF16_RUN_CHECKED;
}

const char *kr_bf16_product_name(kr_simd s) {
    static const char *const names[] = {"vdpbf16ps", "fma-ftz", "fma-ftz", "avx2-fma", "c"};
    return names[kr_bf16_run_at(s)];
}
