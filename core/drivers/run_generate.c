/* run_generate.c — one-shot token generation: kr_generate and kr_generate_batch, thin calls
 * of kr_run on the caches' model (the caches bring their own pool). */
#include "cache.h"
#include "run.h"

#include <stdint.h>

typedef struct {
    kr_cache *const *caches;
    const kr_generate_request *reqs;
    int32_t *const *out_s1, *const *out_s2;
} generations;

static int add_generate(kr_sched *s, int i, void *ctx, kr_error *err) {
    generations *g = ctx;
    return kr_sched_add_generate(s, g->caches[i], &g->reqs[i], g->out_s1[i], g->out_s2[i],
                                 (void *)(intptr_t)i, err);
}

int kr_generate_batch(kr_cache *const *caches, const kr_generate_request *reqs, int n,
                      int32_t *const *out_s1, int32_t *const *out_s2, kr_error *errs) {
    generations g = {caches, reqs, out_s1, out_s2};
    return kr_run(n > 0 ? caches[0]->m : NULL, NULL, n, add_generate, &g, errs);
}

int kr_generate(kr_cache *c, const kr_generate_request *r, int32_t *out_s1, int32_t *out_s2,
                kr_error *err) {
    kr_error e;
    if (kr_generate_batch(&c, r, 1, &out_s1, &out_s2, &e) == 0) return 0;
    if (err) *err = e;
    return -1;
}
