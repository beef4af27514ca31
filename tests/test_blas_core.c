/* test_blas_core.c — the bench's choice of OpenBLAS core: a core below the CPU's widest
 * vectors is replaced by the best one; a core that already uses them, or a name not known,
 * is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "blas_core.h"

#include <stdio.h>
#include <string.h>

static void expect(const char *what, const char *got, const char *want) {
    if (got && want ? strcmp(got, want) != 0 : got != want)
        fail_msg("%s: got %s, want %s", what, got ? got : "(none)", want ? want : "(none)");
}

/* A core below the CPU's widest vectors is replaced by the best one; one that uses them, or
 * an unknown name, is left alone. */
static void test_better_core(void **state) {
    (void)state;
    expect("Prescott, AVX-512", kb_blas_better_core("Prescott", 1, 0, 1, 0), "SkylakeX");
    expect("Prescott, AVX-512 BF16", kb_blas_better_core("Prescott", 1, 1, 1, 0), "Cooperlake");
    expect("Sandybridge, AVX2", kb_blas_better_core("Sandybridge", 0, 0, 1, 0), "Haswell");
    expect("Core2, AVX2 AMD", kb_blas_better_core("Core2", 0, 0, 1, 1), "Zen");
    expect("Haswell, AVX-512", kb_blas_better_core("Haswell", 1, 0, 1, 0), "SkylakeX");
    expect("Haswell, AVX-512 BF16 AMD", kb_blas_better_core("Haswell", 1, 1, 1, 1), "Cooperlake");
    expect("SkylakeX, AVX-512", kb_blas_better_core("SkylakeX", 1, 0, 1, 0), NULL);
    expect("Cooperlake, AVX-512 BF16", kb_blas_better_core("Cooperlake", 1, 1, 1, 0), NULL);
    expect("Zen, AVX2 AMD", kb_blas_better_core("Zen", 0, 0, 1, 1), NULL);
    expect("Prescott, SSE only", kb_blas_better_core("Prescott", 0, 0, 0, 0), NULL);
    expect("an unknown name", kb_blas_better_core("SomeFutureCore", 1, 1, 1, 0), NULL);
}

/* The cores a yardstick is measured on, for each kernel level and CPU. */
static void test_yardstick_cores(void **state) {
    (void)state;
    const char *c[2];
    int n = kb_blas_yardstick_cores(2, 1, 1, 1, c);
    expect("yardstick of AVX-512 kernels, BF16 CPU", n == 2 ? c[1] : NULL, "Cooperlake");
    expect("... and the other AVX-512 core", n == 2 ? c[0] : NULL, "SkylakeX");
    n = kb_blas_yardstick_cores(2, 1, 0, 1, c);
    expect("yardstick of AVX-512 kernels, no BF16", n == 1 ? c[0] : NULL, "SkylakeX");
    n = kb_blas_yardstick_cores(1, 1, 1, 1, c);
    expect("yardstick of AVX2 kernels on an AVX-512 CPU", n == 2 ? c[0] : NULL, "Haswell");
    expect("... and the other AVX2 core", n == 2 ? c[1] : NULL, "Zen");
    n = kb_blas_yardstick_cores(0, 1, 1, 1, c);
    expect("yardstick of the portable kernels: the CPU's widest", n == 2 ? c[1] : NULL,
           "Cooperlake");
    n = kb_blas_yardstick_cores(2, 0, 0, 1, c);
    expect("AVX-512 kernels asked of an AVX2 CPU: its AVX2 cores", n == 2 ? c[0] : NULL, "Haswell");
    n = kb_blas_yardstick_cores(1, 0, 0, 0, c);
    expect("no vector unit: no core to ask for", n == 0 ? "none" : NULL, "none");
    print_message("# loaded core: %s\n", kb_blas_core());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_better_core),
        cmocka_unit_test(test_yardstick_cores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
