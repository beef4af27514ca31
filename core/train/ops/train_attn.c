/* train_attn.c — causal attention in training and its gradient, one window and head an item.
 * Each item gathers its head's columns into zero-padded blocks on the worker's scratch and
 * runs every product (scores, the weights times v, and the five products of the backward)
 * as blocks of 8 rows x 16 columns: each element one chain of multiply-then-add over the
 * reduction index in ascending order, vectorised across its 16 columns. The blocks and the
 * padding depend on the shape alone, so the bits depend neither on the thread count nor on
 * the SIMD level (without contraction every level performs each element's operations in the
 * same order). */
#include "train_ops.h"

#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RB 8  /* rows of a block */
#define CW 16 /* columns of a block */

/* rounded up to a multiple of m */
static int up(int n, int m) {
    return (n + m - 1) / m * m;
}

/* an item's shape and its scratch: rows padded to RB (Tr), key columns to CW (Tp), head
 * columns to CW (hp) */
typedef struct {
    int T, Tr, Tp, hd, hp;
    float *a, *b, *c, *tr, *s1, *s2, *s3; /* [Tr][hp] x 3, [hp][Tp], [Tr][Tp] x 3 */
} geom;

static size_t geom_floats(int T, int hd) {
    size_t Tr = (size_t)up(T, RB), Tp = (size_t)up(T, CW), hp = (size_t)up(hd, CW);
    return 3 * Tr * hp + hp * Tp + 3 * Tr * Tp;
}

static void geom_init(geom *g, int T, int hd, float *mem) {
    g->T = T, g->Tr = up(T, RB), g->Tp = up(T, CW), g->hd = hd, g->hp = up(hd, CW);
    size_t th = (size_t)g->Tr * g->hp, tt = (size_t)g->Tr * g->Tp;
    g->a = mem, g->b = g->a + th, g->c = g->b + th, g->tr = g->c + th;
    g->s1 = g->tr + (size_t)g->hp * g->Tp, g->s2 = g->s1 + tt, g->s3 = g->s2 + tt;
}

/* dst[Tr][hp] = the head's columns of src (rows d apart), zero-padded */
static void gather(float *dst, const float *src, const geom *g, int d) {
    memset(dst, 0, (size_t)g->Tr * g->hp * sizeof(float));
    for (int i = 0; i < g->T; i++)
        memcpy(dst + (size_t)i * g->hp, src + (size_t)i * d, (size_t)g->hd * sizeof(float));
}

/* dst[hp][Tp] = the transpose of the head's columns of src, zero-padded */
static void gather_t(float *dst, const float *src, const geom *g, int d) {
    memset(dst, 0, (size_t)g->hp * g->Tp * sizeof(float));
    for (int i = 0; i < g->T; i++)
        for (int c = 0; c < g->hd; c++)
            dst[(size_t)c * g->Tp + i] = src[(size_t)i * d + c];
}

typedef struct {
    const tr_attn_shape *s;
    float *out, *P, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
    float *tmp; /* per worker: geom_floats */
    size_t per;
} attn_job;

#define KR_LANES_TEMPLATE "train_attn_lanes.h"
#include "lanes.h"

KR_DISPATCH(attn_fwd, (void *ctx, int item, int worker), (ctx, item, worker))
KR_DISPATCH(attn_bwd, (void *ctx, int item, int worker), (ctx, item, worker))

/* the job's scratch: a worker's blocks each */
static int attn_run(attn_job *j, bool backward) {
    j->per = geom_floats(j->s->T, j->s->d / j->s->H);
    j->tmp = malloc((size_t)kr_parallel_threads() * j->per * sizeof(float));
    if (!j->tmp) return -1;
    if (backward)
        kr_parallel_for(j->s->B * j->s->H, attn_bwd, j);
    else
        kr_parallel_for(j->s->B * j->s->H, attn_fwd, j);
    free(j->tmp);
    return 0;
}

int tr_attn_fwd(float *out, float *P, const float *q, const float *k, const float *v,
                const tr_attn_shape *s) {
    attn_job j = {.s = s, .out = out, .P = P, .q = q, .k = k, .v = v};
    return attn_run(&j, false);
}

int tr_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *P, const float *q,
                const float *k, const float *v, const tr_attn_shape *s) {
    attn_job j = {.s = s,
                  .P = (float *)P,
                  .q = q,
                  .k = k,
                  .v = v,
                  .dout = dout,
                  .dq = dq,
                  .dk = dk,
                  .dv = dv};
    return attn_run(&j, true);
}
