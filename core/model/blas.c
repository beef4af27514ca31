/* blas.c — which OpenBLAS core is loaded, whether it is the right one for this CPU, and the
 * fix when it is not.
 *
 * kronosd's own products do not go through OpenBLAS (matmul.c says why); OpenBLAS stays the
 * bench's reference for the machine's sgemm peak and is reported next to kronosd's own
 * kernel level. A DYNAMIC_ARCH OpenBLAS that does not know the CPU model (Debian 12's 0.3.21
 * on recent Xeons) silently falls back to a generic core such as Prescott (SSE3), several
 * times slower. It reads OPENBLAS_CORETYPE only when it is loaded, so the fix is to set the
 * variable and re-execute the program, once.
 */
#include "kronos.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define REEXEC_GUARD "KRONOS_BLAS_REEXEC"

const char *kr_blas_core(void) {
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

const char *kr_blas_wanted_core(const char *current, int cpu_avx512, int cpu_avx512bf16,
                                int cpu_avx2, int cpu_amd) {
    int known, have = core_level(current, &known);
    int cpu = cpu_avx512 ? 2 : cpu_avx2 ? 1 : 0;
    if (!known || have >= cpu) return NULL;
    if (cpu == 2) return cpu_avx512bf16 ? "Cooperlake" : "SkylakeX";
    return cpu_amd ? "Zen" : "Haswell";
}

static const char *wanted_here(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    int bf16 = 0;
#if defined(__GNUC__) && (__GNUC__ >= 12)
    bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    return kr_blas_wanted_core(kr_blas_core(), avx512, bf16, avx2, __builtin_cpu_is("amd"));
#else
    return NULL;
#endif
}

void kr_blas_ensure(char **argv, const char *prog) {
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice always wins */
    const char *want = wanted_here();
    if (!want) return;
    const char *current = kr_blas_core();
    if (getenv(REEXEC_GUARD)) { /* already tried once: say so, go on with what there is */
        fprintf(stderr, "%s: OpenBLAS still uses the %s core after re-executing; continuing\n",
                prog, current);
        return;
    }
    fprintf(stderr,
            "%s: OpenBLAS chose the generic %s core on a CPU with %s; re-executing with "
            "OPENBLAS_CORETYPE=%s\n",
            prog, current, strcmp(want, "Haswell") && strcmp(want, "Zen") ? "AVX-512" : "AVX2",
            want);
    fflush(NULL);
    if (setenv("OPENBLAS_CORETYPE", want, 1) || setenv(REEXEC_GUARD, "1", 1)) return;
    execv("/proc/self/exe", argv);
    fprintf(stderr, "%s: re-executing /proc/self/exe failed; continuing on the %s core\n", prog,
            current); /* execv returns only on failure */
    unsetenv("OPENBLAS_CORETYPE");
}
