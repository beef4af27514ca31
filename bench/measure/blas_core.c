/* blas_core.c — the OpenBLAS core the bench's yardstick runs on, and the best one for this
 * CPU. OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so the bench measures the
 * best core in a child process started with the variable set (bench.c). A DYNAMIC_ARCH
 * OpenBLAS that does not know the CPU (Debian 12's 0.3.21 on recent Xeons) falls back to a
 * generic core such as Prescott, and an environment may name a lower core on purpose (this
 * project's machines set Haswell on AVX-512 CPUs). */
#include "blas_core.h"

#include <cblas.h>
#include <stddef.h>
#include <strings.h>

const char *kb_blas_core(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

/* The widest vector instructions an OpenBLAS core of this name uses: 2 AVX-512, 1 AVX2,
 * 0 older ones (and names this table does not know: better to leave them alone). */
static int core_level(const char *core, int *known) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator", "SkylakeX"};
    static const char *const older[] = {"Prescott",     "Core2",       "Penryn", "Dunnington",
                                        "Nehalem",      "Sandybridge", "Atom",   "Katmai",
                                        "Coppermine",   "Northwood",   "Banias", "Opteron",
                                        "Opteron_SSE3", "Barcelona",   "Bobcat", "Bulldozer",
                                        "Piledriver",   "Steamroller", "Nano",   "Generic"};
    *known = 1;
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (strcasecmp(core, avx512[i]) == 0) return 2;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (strcasecmp(core, avx2[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof older / sizeof *older; i++)
        if (strcasecmp(core, older[i]) == 0) return 0;
    *known = 0;
    return 0;
}

const char *kb_blas_better_core(const char *current, int cpu_avx512, int cpu_avx512bf16,
                                int cpu_avx2, int cpu_amd) {
    int known, have = core_level(current, &known);
    int cpu = cpu_avx512 ? 2 : cpu_avx2 ? 1 : 0;
    if (!known || have >= cpu) return NULL;
    if (cpu == 2) return cpu_avx512bf16 ? "Cooperlake" : "SkylakeX";
    return cpu_amd ? "Zen" : "Haswell";
}

int kb_blas_yardstick_cores(int level, int cpu_avx512, int cpu_avx512bf16, int cpu_avx2,
                            const char *cores[2]) {
    int cpu = cpu_avx512 ? 2 : cpu_avx2 ? 1 : 0;
    if (level == 0 || level > cpu) level = cpu;
    if (level == 2) {
        cores[0] = "SkylakeX";
        if (!cpu_avx512bf16) return 1;
        cores[1] = "Cooperlake"; /* SkylakeX's kernels with BF16 extras: either may win */
        return 2;
    }
    if (level == 1) {
        cores[0] = "Haswell";
        cores[1] = "Zen"; /* Haswell's kernels with AMD's blocking */
        return 2;
    }
    return 0; /* no vector core to ask for: the loaded one is the yardstick */
}

/* The CPU's features as blas_core.h's functions take them. */
static void cpu_features(int *avx512, int *bf16, int *avx2, int *amd) {
    *avx512 = *bf16 = *avx2 = *amd = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    *avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    *avx512 = *avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#if defined(__GNUC__) && (__GNUC__ >= 12)
    *bf16 = *avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    *amd = __builtin_cpu_is("amd");
#endif
}

const char *kb_blas_better_core_here(void) {
    int avx512, bf16, avx2, amd;
    cpu_features(&avx512, &bf16, &avx2, &amd);
    return kb_blas_better_core(kb_blas_core(), avx512, bf16, avx2, amd);
}

int kb_blas_yardstick_cores_here(int level, const char *cores[2]) {
    int avx512, bf16, avx2, amd;
    cpu_features(&avx512, &bf16, &avx2, &amd);
    return kb_blas_yardstick_cores(level, avx512, bf16, avx2, cores);
}
