/* fp_rates.h — one core's rate of attention's terms (a multiply and an add, each rounded)
 * against the products' (a fused multiply-add), at one of kronosd's kernel levels. */
#ifndef KB_FP_RATES_H
#define KB_FP_RATES_H

typedef struct {
    double fma_gflops;    /* fused multiply-adds, 2 flops each */
    double muladd_gflops; /* a multiply then an add, 2 flops a pair */
} kb_fp_rates;

/* Measures both on the calling thread at level (1 AVX2, 2 and 3 AVX-512; the values of kr_simd):
 * register-only loops, the fastest of a few alternating calls (about 0.3 s). Returns -1 for
 * the portable level and on CPUs other than x86-64 (nothing measured), else 0. */
int kb_fp_rates_measure(int level, kb_fp_rates *out);

/* The share of the yardstick a phase of `flops` reaches when its products run at the
 * yardstick and its `attn_flops` of attention at attn_rate times that (muladd / fma): 1 when
 * the rates match, lower the more of its work is attention. NAN for a rate outside (0, 1]
 * or counts that are not 0 <= attn_flops <= flops, flops > 0. */
double kb_phase_ceiling(double flops, double attn_flops, double attn_rate);

#endif
