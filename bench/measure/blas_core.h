/* blas_core.h — which OpenBLAS core the bench's sgemm yardstick runs on, and the best one
 * OpenBLAS has for this CPU. OpenBLAS belongs to the bench alone: kronosd computes with its
 * own kernels (core/kernels/matmul/matmul.c says why). */
#ifndef KB_BLAS_CORE_H
#define KB_BLAS_CORE_H

/* The name of the core OpenBLAS loaded, e.g. "Haswell" ("unknown" if it does not say). */
const char *kb_blas_core(void);
/* The core to use instead of `current` on a CPU with these features, or NULL when `current`
 * already uses the widest vectors the CPU has (or is a name not known here). */
const char *kb_blas_better_core(const char *current, int cpu_avx512, int cpu_avx512bf16,
                                int cpu_avx2, int cpu_amd);
/* kb_blas_better_core for this CPU and the loaded core. */
const char *kb_blas_better_core_here(void);

/* The OpenBLAS cores whose sgemm is the yardstick for kronosd's kernels at `level` (0
 * portable, 1 AVX2, 2 AVX-512) on a CPU with these features: every core OpenBLAS has for
 * that vector width (the bench measures each and keeps the fastest); the portable kernels
 * are held to the widest the CPU has. Writes up to 2 names to cores; returns how many. */
int kb_blas_yardstick_cores(int level, int cpu_avx512, int cpu_avx512bf16, int cpu_avx2,
                            const char *cores[2]);
/* kb_blas_yardstick_cores for this CPU. */
int kb_blas_yardstick_cores_here(int level, const char *cores[2]);

#endif
