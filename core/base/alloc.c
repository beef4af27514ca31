/* alloc.c — kr_alloc_large: 2 MiB-aligned buffers on transparent huge pages for the
 * weights (model/loader.c) and the KV pool (decode/pool.c); kr_zalloc: a zeroed object or
 * an error that says which; kr_free_each: KR_FREE_ALL's list of pointers freed. */
#include "base.h"

#include <stdlib.h>
#include <sys/mman.h>

void *kr_alloc_large(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    size_t rounded = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE); /* advice only: without it, plain pages */
#endif
    return p;
}

void *kr_zalloc(size_t bytes, kr_error *err, const char *what) {
    void *p = calloc(1, bytes);
    if (!p) kr_fail_code(err, KR_E_NO_MEMORY, "%s", what);
    return p;
}

void kr_free_each(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}
