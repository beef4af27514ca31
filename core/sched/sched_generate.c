/* sched_generate.c — token generation on a cache (what POST /generate runs) as a job of the
 * step scheduler: its checks and its blocks taken when it starts, so it cannot fail half
 * way for want of memory; its appended tokens in chunks under the step's budget; then one
 * token a step: draw s1, draw s2, append the pair at the next step. */
#include "predictor.h"
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

static int gen_start(const kr_model *m, kr_pool *pool, sched_job *jb, kr_error *err) {
    (void)pool; /* the cache's own */
    gen_state *g = &jb->u.gen;
    const kr_generate_request *r = g->req;
    kr_cache *c = g->c;
    if (c->m != m) return kr_fail(err, "generate: the cache belongs to another model");
    if (r->n_append < 0 || r->n_new < 0)
        return kr_fail_code(err, KR_E_INVALID, "generate: negative token counts");
    if (kr_sampling_check(&r->sampling, err)) {
        err->code = KR_E_INVALID;
        return -1;
    }
    long need = (long)c->len + r->n_append + r->n_new;
    if (need > c->capacity)
        return kr_fail_code(err, KR_E_CAPACITY,
                            "generate: %d cached + %d appended + %d new tokens = %ld exceed "
                            "max_context %d; the window would slide, which this endpoint does "
                            "not do",
                            c->len, r->n_append, r->n_new, need, c->capacity);
    if (r->n_new > 0 && c->len + r->n_append == 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "generate: no context to generate from; append tokens first");
    if (r->n_append > 0 &&
        kr_predictor_check_inputs(m, r->s1, r->s2, r->stamps, r->n_append, err)) {
        err->code = KR_E_INVALID;
        return -1;
    }
    for (int k = 0; k < r->n_new; k++) {
        kr_error e;
        if (kr_stamp_check(&r->new_stamps[k], &e))
            return kr_fail_code(err, KR_E_INVALID, "generate: new token %d: time stamp: %s", k,
                                e.msg);
    }
    if (!g->l1) g->l1 = malloc(((size_t)1 << m->pc.s1_bits) * sizeof(float));
    if (!g->l2) g->l2 = malloc(((size_t)1 << m->pc.s2_bits) * sizeof(float));
    if (!g->l1 || !g->l2) return kr_fail_code(err, KR_E_NO_MEMORY, "generate: out of memory");
    jb->n_draw = 1;
    jb->draw_caches = &g->c;
    jb->draw_s1 = &g->a;
    jb->draw_l2 = g->l2;
    kr_rng_seed(&g->rng, r->seed);
    if (kr_cache_reserve(c, r->n_append + r->n_new, err)) return -1;
    if (r->n_append == 0 && r->n_new > 0) { /* draw from the cache's last position */
        if (kr_cache_s1_logits(c, g->l1, err)) return -1;
        jb->ready = true;
    }
    return 0;
}

static void gen_free(sched_job *jb, bool failed) {
    (void)failed; /* the tokens drawn so far stay in out_s1, out_s2 */
    gen_state *g = &jb->u.gen;
    kr_cache_trim(g->c); /* blocks reserved and not used */
    free(g->l1);
    free(g->l2);
}

static int gen_rows(const kr_model *m, sched_job *jb, step_batch *b, bool decode, int *budget) {
    (void)m;
    gen_state *g = &jb->u.gen;
    const kr_generate_request *r = g->req;
    if (decode) {
        g->chunk = 0;
        if (!g->pending) return 0;
        g->chunk = 1;
        return step_batch_add(b, jb, g->c, 1, &g->a, &g->b, &r->new_stamps[g->k - 1], 0,
                              g->k < r->n_new ? g->l1 : NULL);
    }
    if (g->pending || g->appended == r->n_append || *budget <= 0) return 0;
    int c = r->n_append - g->appended;
    if (c > *budget) c = *budget;
    bool last = g->appended + c == r->n_append && r->n_new > 0;
    if (step_batch_add(b, jb, g->c, c, r->s1 + g->appended, r->s2 + g->appended,
                       r->stamps + g->appended, 1, last ? g->l1 : NULL))
        return -1;
    g->chunk = c;
    *budget -= c;
    return 0;
}

static int gen_fill_left(const sched_job *jb) {
    const gen_state *g = &jb->u.gen;
    return g->pending ? 0 : g->req->n_append - g->appended;
}

static int gen_appended(const kr_model *m, sched_job *jb, kr_error *err) {
    (void)m;
    (void)err;
    gen_state *g = &jb->u.gen;
    const kr_generate_request *r = g->req;
    int c = g->chunk;
    g->chunk = 0;
    if (g->pending) {
        g->pending = false;
        if (g->k == r->n_new) return 1;
        jb->ready = true;
        return 0;
    }
    g->appended += c;
    if (g->appended < r->n_append) return 0;
    if (r->n_new == 0) return 1;
    if (c > 0) jb->ready = true; /* the last chunk's logits */
    return 0;
}

static void gen_draw_s1(const kr_model *m, sched_job *jb) {
    gen_state *g = &jb->u.gen;
    g->a = kr_sample(g->l1, 1 << m->pc.s1_bits, &g->req->sampling, &g->rng);
}

static int gen_drawn(const kr_model *m, sched_job *jb, kr_error *err) {
    (void)err;
    gen_state *g = &jb->u.gen;
    g->b = kr_sample(g->l2, 1 << m->pc.s2_bits, &g->req->sampling, &g->rng);
    g->out_s1[g->k] = g->a;
    g->out_s2[g->k] = g->b;
    g->k++;
    g->pending = true; /* appended at the next step, which ends the job after the last */
    return 0;
}

/* ---- the kind, and how it is queued ------------------------------------------------------ */

/* a generation takes its blocks when it starts: room is made for it while it can be */
const sched_ops sched_generate_ops = {SCHED_OPS("generate", gen), .start_makes_room = true};

int kr_sched_add_generate(kr_sched *s, kr_cache *c, const kr_generate_request *req, int32_t *out_s1,
                          int32_t *out_s2, void *tag, kr_error *err) {
    sched_job *j = sched_job_new(&sched_generate_ops, c->m, c->pool, tag, &req->cancel, err);
    if (!j) return -1;
    j->rows = 1;
    /* its planned work, by which it is light or not: every appended and new token's row */
    const kr_predictor_config *pc = &c->m->pc;
    double rows = (double)req->n_append + req->n_new;
    j->flops = kr_stack_flops(rows, c->len + rows, pc->n_layers, pc->d_model, pc->ff_dim);
    j->u.gen.c = c;
    j->u.gen.req = req;
    j->u.gen.out_s1 = out_s1;
    j->u.gen.out_s2 = out_s2;
    sched_enqueue(s, j);
    return 0;
}
