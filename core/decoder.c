/* decoder.c — incremental decoding on KV caches: batched chunk append (prefill and
 * single-token decode are the same call), s2 logits from the cached dependency-layer keys,
 * and token-level generation. */
#include "cache.h"
#include "predictor.h"

#include <stdlib.h>
#include <string.h>

/* Rows per GEMM batch: bounds the scratch of a long prefill over many caches. */
#define KR_MAX_BATCH_ROWS 2048

typedef struct {
    kr_block_scratch blk;
    float *x, *pair, *last;
    kr_kv_view *views;
    kr_seq *seqs;
} append_scratch;

static void append_scratch_free(append_scratch *a) {
    kr_block_scratch_free(&a->blk);
    free(a->x);
    free(a->pair);
    free(a->last);
    free(a->views);
    free(a->seqs);
}

static int append_scratch_init(append_scratch *a, const kr_model *m, int S, int rows, int max_keys,
                               kr_error *err) {
    int d = m->pc.d_model;
    memset(a, 0, sizeof *a);
    if (kr_block_scratch_init(&a->blk, rows, max_keys, d, m->pc.ff_dim, m->pc.n_heads, err))
        return -1;
    a->x = malloc((size_t)rows * d * sizeof(float));
    a->pair = malloc((size_t)rows * 2 * d * sizeof(float));
    a->last = malloc((size_t)S * d * sizeof(float));
    a->views = malloc((size_t)S * sizeof *a->views);
    a->seqs = malloc((size_t)S * sizeof *a->seqs);
    if (!a->x || !a->pair || !a->last || !a->views || !a->seqs) {
        append_scratch_free(a);
        return kr_fail_code(err, KR_E_NO_MEMORY, "decoder: out of memory for a batch of %d rows",
                            rows);
    }
    return 0;
}

/* Rows [S][T] taken from columns t0 .. t0+T-1 of inputs laid out [S][T_total]. */
static void gather(const int32_t *s1, const int32_t *s2, const kr_stamp *stamps, int S, int T_total,
                   int t0, int T, int32_t *g1, int32_t *g2, kr_stamp *gs) {
    for (int i = 0; i < S; i++)
        for (int t = 0; t < T; t++) {
            size_t src = (size_t)i * T_total + t0 + t, dst = (size_t)i * T + t;
            g1[dst] = s1[src];
            g2[dst] = s2[src];
            gs[dst] = stamps[src];
        }
}

/* One chunk: T rows per cache, blocks already reserved. */
static void append_chunk(kr_cache *const *caches, int S, const int32_t *s1, const int32_t *s2,
                         const kr_stamp *stamps, int T, float *s1_logits, append_scratch *a) {
    const kr_model *m = caches[0]->m;
    const kr_predictor_weights *w = &m->pred;
    int d = m->pc.d_model, R = S * T, dep = m->pc.n_layers;

    kr_predictor_embed(m, s1, s2, stamps, R, a->x, a->pair);
    for (int i = 0; i < S; i++) {
        a->views[i] = kr_cache_view(caches[i]);
        a->seqs[i] = (kr_seq){&a->views[i], caches[i]->len, caches[i]->raw_kv};
    }
    for (int l = 0; l < w->n_layers; l++)
        kr_block_forward(&w->blocks[l], l, a->x, S, T, a->seqs, &a->blk);
    kr_rmsnorm(a->x, a->x, w->norm, R, d);

    /* the dependency layer's keys and values of the new positions (no RoPE there) */
    kr_linear_forward(a->blk.k, a->x, R, &w->dep_k);
    kr_linear_forward(a->blk.v, a->x, R, &w->dep_v);
    for (int i = 0; i < S; i++) {
        kr_cache *c = caches[i];
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)i * T + t;
            kr_kv_put_k(&a->views[i], dep, c->len + t, a->blk.k + row * d);
            memcpy(kr_kv_v(&a->views[i], dep, c->len + t), a->blk.v + row * d,
                   (size_t)d * sizeof(float));
        }
        memcpy(c->h_last, a->x + ((size_t)i * T + T - 1) * d, (size_t)d * sizeof(float));
        memcpy(a->last + (size_t)i * d, c->h_last, (size_t)d * sizeof(float));
        c->len += T;
    }
    /* only the last position of each cache is projected to the vocabulary */
    if (s1_logits) kr_linear_forward(s1_logits, a->last, S, &w->proj_s1);
}

int kr_cache_append(kr_cache *const *caches, int S, const int32_t *s1, const int32_t *s2,
                    const kr_stamp *stamps, int T, float *s1_logits, kr_error *err) {
    if (S < 1 || T < 1) return kr_fail(err, "append: nothing to append (S = %d, T = %d)", S, T);
    const kr_model *m = caches[0]->m;
    for (int i = 1; i < S; i++)
        if (caches[i]->m != m) return kr_fail(err, "append: caches of different models");
    if (kr_predictor_check_inputs(m, s1, s2, stamps, S * T, err)) return -1;
    int max_len = 0;
    for (int i = 0; i < S; i++) {
        if (kr_cache_reserve(caches[i], T, err)) {
            for (int j = 0; j <= i; j++)
                kr_cache_trim(caches[j]);
            return -1;
        }
        if (caches[i]->len > max_len) max_len = caches[i]->len;
    }
    int chunk = KR_MAX_BATCH_ROWS / S;
    if (chunk < 1) chunk = 1;
    if (chunk > T) chunk = T;
    append_scratch a;
    int32_t *g1 = malloc((size_t)S * chunk * sizeof *g1),
            *g2 = malloc((size_t)S * chunk * sizeof *g2);
    kr_stamp *gs = malloc((size_t)S * chunk * sizeof *gs);
    int rc = -1;
    if (!g1 || !g2 || !gs) {
        kr_fail_code(err, KR_E_NO_MEMORY, "append: out of memory");
        memset(&a, 0, sizeof a);
        goto out;
    }
    if (append_scratch_init(&a, m, S, S * chunk, max_len + T, err)) goto out;
    for (int t0 = 0; t0 < T; t0 += chunk) {
        int n = T - t0 < chunk ? T - t0 : chunk;
        gather(s1, s2, stamps, S, T, t0, n, g1, g2, gs);
        append_chunk(caches, S, g1, g2, gs, n, t0 + n == T ? s1_logits : NULL, &a);
    }
    rc = 0;
out:
    if (rc)
        for (int i = 0; i < S; i++)
            kr_cache_trim(caches[i]);
    append_scratch_free(&a);
    free(g1);
    free(g2);
    free(gs);
    return rc;
}

int kr_cache_s1_logits(const kr_cache *c, float *s1_logits, kr_error *err) {
    if (c->len < 1) return kr_fail(err, "cache: empty, there is no last position");
    kr_linear_forward(s1_logits, c->h_last, 1, &c->m->pred.proj_s1);
    return 0;
}

int kr_cache_s2_logits(kr_cache *const *caches, int S, const int32_t *s1, float *s2_logits,
                       kr_error *err) {
    if (S < 1) return kr_fail(err, "s2 logits: no caches");
    const kr_model *m = caches[0]->m;
    int v1 = 1 << m->pc.s1_bits;
    for (int i = 0; i < S; i++) {
        if (caches[i]->len < 1) return kr_fail(err, "s2 logits: cache %d is empty", i);
        if (s1[i] < 0 || s1[i] >= v1)
            return kr_fail(err, "s2 logits: s1 = %d is outside [0, %d)", (int)s1[i], v1);
    }
    kr_kv_view *views = malloc((size_t)S * sizeof *views);
    kr_attn_row *rows = malloc((size_t)S * sizeof *rows);
    const float **h_last = malloc((size_t)S * sizeof *h_last);
    int rc = -1;
    if (!views || !rows || !h_last) {
        kr_fail_code(err, KR_E_NO_MEMORY, "s2 logits: out of memory for %d caches", S);
    } else {
        for (int i = 0; i < S; i++) {
            views[i] = kr_cache_view(caches[i]);
            rows[i] = (kr_attn_row){&views[i], caches[i]->len};
            h_last[i] = caches[i]->h_last;
        }
        rc = kr_predictor_s2_rows(m, rows, m->pc.n_layers, h_last, s1, S, s2_logits, err);
    }
    free(views);
    free(rows);
    free(h_last);
    return rc;
}

/* What one generation request needs checked, and its blocks taken, before it starts, so
 * that it cannot fail half way. */
static int generate_prepare(kr_cache *c, const kr_generate_request *r, kr_error *err) {
    const kr_model *m = c->m;
    if (r->n_append < 0 || r->n_new < 0) return kr_fail(err, "generate: negative token counts");
    if (kr_sampling_check(&r->sampling, err)) return -1;
    long need = (long)c->len + r->n_append + r->n_new;
    if (need > c->capacity)
        return kr_fail_code(
            err, KR_E_CAPACITY,
            "generate: %d cached + %d appended + %d new tokens = %ld exceed "
            "max_context %d; the window would slide, which this endpoint does not do",
            c->len, r->n_append, r->n_new, need, c->capacity);
    if (r->n_new > 0 && c->len + r->n_append == 0)
        return kr_fail(err, "generate: no context to generate from; append tokens first");
    if (r->n_append > 0 && kr_predictor_check_inputs(m, r->s1, r->s2, r->stamps, r->n_append, err))
        return -1;
    for (int k = 0; k < r->n_new; k++) {
        kr_error e;
        if (kr_stamp_check(&r->new_stamps[k], &e))
            return kr_fail(err, "generate: new token %d: time stamp: %s", k, e.msg);
    }
    return kr_cache_reserve(c, r->n_append + r->n_new, err);
}

typedef struct {
    bool *ok;
    float *l1, *l2, *step_l1;
    kr_rng *rng;
    kr_cache **active;
    int32_t *a, *b;
    kr_stamp *st;
    int *idx;
} generate_state;

static void generate_state_free(generate_state *g) {
    free(g->ok);
    free(g->l1);
    free(g->l2);
    free(g->step_l1);
    free(g->rng);
    free(g->active);
    free(g->a);
    free(g->b);
    free(g->st);
    free(g->idx);
}

static void fail_all(generate_state *g, int n, kr_error *errs, const kr_error *e) {
    for (int i = 0; i < n; i++)
        if (g->ok[i]) {
            errs[i] = *e;
            g->ok[i] = false;
        }
}

int kr_generate_batch(kr_cache *const *caches, const kr_generate_request *reqs, int n,
                      int32_t *const *out_s1, int32_t *const *out_s2, kr_error *errs) {
    const kr_model *m = caches[0]->m;
    int v1 = 1 << m->pc.s1_bits, v2 = 1 << m->pc.s2_bits, max_new = 0, failed = 0;
    generate_state g = {
        .ok = calloc((size_t)n, sizeof *g.ok),
        .l1 = malloc((size_t)n * v1 * sizeof(float)),
        .l2 = malloc((size_t)n * v2 * sizeof(float)),
        .step_l1 = malloc((size_t)n * v1 * sizeof(float)),
        .rng = malloc((size_t)n * sizeof(kr_rng)),
        .active = malloc((size_t)n * sizeof(kr_cache *)),
        .a = malloc((size_t)n * sizeof(int32_t)),
        .b = malloc((size_t)n * sizeof(int32_t)),
        .st = malloc((size_t)n * sizeof(kr_stamp)),
        .idx = malloc((size_t)n * sizeof(int)),
    };
    if (!g.ok || !g.l1 || !g.l2 || !g.step_l1 || !g.rng || !g.active || !g.a || !g.b || !g.st ||
        !g.idx) {
        for (int i = 0; i < n; i++)
            kr_fail_code(&errs[i], KR_E_NO_MEMORY, "generate: out of memory for a batch of %d", n);
        generate_state_free(&g);
        return n;
    }
    /* each request's checks and context on its own (their lengths differ) */
    for (int i = 0; i < n; i++) {
        kr_cache *c = caches[i];
        const kr_generate_request *r = &reqs[i];
        float *l1 = g.l1 + (size_t)i * v1;
        errs[i].code = 0;
        errs[i].msg[0] = '\0';
        g.ok[i] = generate_prepare(c, r, &errs[i]) == 0 &&
                  (r->n_append > 0 ? kr_cache_append(&c, 1, r->s1, r->s2, r->stamps, r->n_append,
                                                     r->n_new ? l1 : NULL, &errs[i]) == 0
                   : r->n_new > 0  ? kr_cache_s1_logits(c, l1, &errs[i]) == 0
                                   : true);
        kr_rng_seed(&g.rng[i], r->seed);
        if (g.ok[i] && r->n_new > max_new) max_new = r->n_new;
    }
    /* then the new tokens in lockstep: one batch of every request still generating */
    for (int k = 0; k < max_new; k++) {
        int na = 0;
        for (int i = 0; i < n; i++) {
            if (!g.ok[i] || k >= reqs[i].n_new) continue;
            int stop = reqs[i].cancel.check ? reqs[i].cancel.check(reqs[i].cancel.ctx) : 0;
            if (stop) { /* the tokens so far stay in the cache; the request fails */
                kr_fail_code(&errs[i], stop == KR_E_DEADLINE ? KR_E_DEADLINE : KR_E_CANCELLED,
                             "generate: %s after %d of %d new tokens",
                             stop == KR_E_DEADLINE ? "the deadline passed" : "cancelled", k,
                             reqs[i].n_new);
                g.ok[i] = false;
                continue;
            }
            g.idx[na++] = i;
        }
        if (na == 0) break;
        for (int j = 0; j < na; j++) {
            int i = g.idx[j];
            g.active[j] = caches[i];
            g.a[j] = kr_sample(g.l1 + (size_t)i * v1, v1, &reqs[i].sampling, &g.rng[i]);
        }
        kr_error e;
        if (kr_cache_s2_logits(g.active, na, g.a, g.l2, &e)) {
            fail_all(&g, n, errs, &e);
            break;
        }
        for (int j = 0; j < na; j++) {
            int i = g.idx[j];
            g.b[j] = kr_sample(g.l2 + (size_t)j * v2, v2, &reqs[i].sampling, &g.rng[i]);
            out_s1[i][k] = g.a[j];
            out_s2[i][k] = g.b[j];
            g.st[j] = reqs[i].new_stamps[k];
        }
        if (kr_cache_append(g.active, na, g.a, g.b, g.st, 1, g.step_l1, &e)) {
            fail_all(&g, n, errs, &e);
            break;
        }
        for (int j = 0; j < na; j++)
            memcpy(g.l1 + (size_t)g.idx[j] * v1, g.step_l1 + (size_t)j * v1,
                   (size_t)v1 * sizeof(float));
    }
    for (int i = 0; i < n; i++) {
        kr_cache_trim(caches[i]);
        failed += errs[i].code != 0;
    }
    generate_state_free(&g);
    return failed;
}

int kr_generate(kr_cache *c, const kr_generate_request *r, int32_t *out_s1, int32_t *out_s2,
                kr_error *err) {
    kr_error e;
    if (kr_generate_batch(&c, r, 1, &out_s1, &out_s2, &e) == 0) return 0;
    if (err) *err = e;
    return -1;
}
