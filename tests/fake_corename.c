/* fake_corename.c — preloaded by tests/blas_reexec.sh: an OpenBLAS that, like Debian 12's
 * 0.3.21 on CPUs it does not know, reports the generic Prescott core unless OPENBLAS_CORETYPE
 * names one (which it then reports, as the real library does after loading that core). */
#include <stdlib.h>

char *openblas_get_corename(void);

char *openblas_get_corename(void) {
    char *forced = getenv("OPENBLAS_CORETYPE");
    return forced ? forced : "Prescott";
}
