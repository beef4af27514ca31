/* fp_rates.c — how fast one core runs attention's arithmetic against the products'.
 *
 * A product's term is one fused multiply-add (matmul.c); attention's is a multiply and an
 * add, each rounded (attention.c). Some cores run the two kinds at the same rate per term:
 * AMD's Zen cores have add pipes beside their multiply-add pipes. Others issue both on the
 * same pipes, so a term of attention takes two of them: an Intel Xeon's AVX-512 units, where
 * attention can reach only half the FLOP rate of the products. The bench measures the ratio
 * with register-only loops at kronosd's kernel level, so each phase's ceiling can be stated
 * for the CPU it runs on. Built with the project's -ffp-contract=off: the compiler does not
 * fuse the loop's multiplies and adds.
 */
#include "fp_rates.h"

#include <math.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KB_X86 1
#endif

#define CHAINS 12      /* independent sums: more than the pipes' latency x width */
#define ITERS  4000000 /* steps of every chain a timed call (about 30 ms a call) */
#define ROUNDS 5       /* alternating calls of each loop; the fastest counts */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#ifdef KB_X86
/* Each loop returns a sum of its chains, so that the compiler keeps them. The empty asm
 * statements make the factors values it cannot see through: no product is folded, shared
 * between chains that hold equal factors, or hoisted out of the loop. */

__attribute__((target("avx512f"))) static float fma_512(long iters) {
    __m512 a[CHAINS], x[CHAINS], y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++) {
        a[i] = _mm512_set1_ps((float)i);
        x[i] = _mm512_set1_ps(1e-3f * (float)(i + 1));
        __asm__ volatile("" : "+v"(x[i]));
    }
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm512_fmadd_ps(x[i], y, a[i]);
        __asm__ volatile("" : "+v"(y));
    }
    __m512 s = a[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f"))) static float muladd_512(long iters) {
    __m512 a[CHAINS], x[CHAINS], y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++) {
        a[i] = _mm512_set1_ps((float)i);
        x[i] = _mm512_set1_ps(1e-3f * (float)(i + 1));
        __asm__ volatile("" : "+v"(x[i]));
    }
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm512_add_ps(a[i], _mm512_mul_ps(x[i], y));
        __asm__ volatile("" : "+v"(y));
    }
    __m512 s = a[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2"))) static float sum_256(const __m256 *a, int n) {
    __m256 s = a[0];
    for (int i = 1; i < n; i++)
        s = _mm256_add_ps(s, a[i]);
    float out[8], t = 0.0f;
    _mm256_storeu_ps(out, s);
    for (int i = 0; i < 8; i++)
        t += out[i];
    return t;
}

/* AVX2 has 16 registers: the multiply-adds' 12 chains share one multiplier (14 registers);
 * attention's terms each need their own product, so its loop runs 7 chains of 7 multipliers
 * (15, and one for a product in flight): enough to keep the pipes of the cores measured busy. */
#define CHAINS_256 7

__attribute__((target("avx2,fma"))) static float fma_256(long iters) {
    __m256 a[CHAINS], x = _mm256_set1_ps(1e-3f), y = _mm256_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++)
        a[i] = _mm256_set1_ps((float)i);
    __asm__ volatile("" : "+v"(x));
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm256_fmadd_ps(x, y, a[i]);
        __asm__ volatile("" : "+v"(y));
    }
    return sum_256(a, CHAINS);
}

__attribute__((target("avx2,fma"))) static float muladd_256(long iters) {
    __m256 a[CHAINS_256], x[CHAINS_256], y = _mm256_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS_256; i++) {
        a[i] = _mm256_set1_ps((float)i);
        x[i] = _mm256_set1_ps(1e-3f * (float)(i + 1));
        __asm__ volatile("" : "+v"(x[i]));
    }
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 7
        for (int i = 0; i < CHAINS_256; i++)
            a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(x[i], y));
        __asm__ volatile("" : "+v"(y));
    }
    return sum_256(a, CHAINS_256);
}
#endif

volatile float kb_fp_rates_sink; /* the loops' sums, kept */

int kb_fp_rates_measure(int level, kb_fp_rates *out) {
#ifdef KB_X86
    float (*fma_fn)(long), (*muladd_fn)(long);
    double fma_terms, muladd_terms; /* vector lanes x chains: the terms of one step */
    if (level >= 2) {               /* amx: the avx512 loops */
        fma_fn = fma_512, muladd_fn = muladd_512, fma_terms = muladd_terms = 16.0 * CHAINS;
    } else if (level == 1) {
        fma_fn = fma_256, muladd_fn = muladd_256;
        fma_terms = 8.0 * CHAINS, muladd_terms = 8.0 * CHAINS_256;
    } else {
        return -1; /* the portable products call libm's fmaf: no vector rate to hold them to */
    }
    double best_fma = INFINITY, best_muladd = INFINITY;
    for (int r = 0; r < ROUNDS; r++) { /* alternating: a neighbour's load hits both alike */
        double t0 = now_s();
        kb_fp_rates_sink = fma_fn(ITERS);
        double t1 = now_s();
        kb_fp_rates_sink = muladd_fn(ITERS);
        double t2 = now_s();
        if (t1 - t0 < best_fma) best_fma = t1 - t0;
        if (t2 - t1 < best_muladd) best_muladd = t2 - t1;
    }
    /* a term is two flops either way */
    out->fma_gflops = 2.0 * fma_terms * ITERS / best_fma / 1e9;
    out->muladd_gflops = 2.0 * muladd_terms * ITERS / best_muladd / 1e9;
    return 0;
#else
    (void)level, (void)out;
    return -1;
#endif
}

double kb_phase_ceiling(double flops, double attn_flops, double attn_rate) {
    if (!(flops > 0 && attn_flops >= 0 && attn_flops <= flops && attn_rate > 0 && attn_rate <= 1))
        return NAN;
    return flops / (flops - attn_flops + attn_flops / attn_rate);
}
