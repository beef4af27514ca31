/* sched_impl.h — the step scheduler's jobs, shared by sched.c (the step loop) and the two
 * kinds of job it runs: forecasts (sched_forecast.c) and token generation
 * (sched_generate.c). Internal to core/.
 *
 * A step is one ragged append over every job's rows (decode rows of every path and every
 * generating session; prefill and window-recompute chunks under the step's token budget),
 * then the s1 draws of every job that has fresh logits, one batched s2-logits call for all
 * of them, and the s2 draws. A job joins at the step after it is added and leaves when it
 * ends; no row's numbers depend on which others share its step.
 */
#ifndef KR_SCHED_IMPL_H
#define KR_SCHED_IMPL_H

#include "cache.h"
#include "forecast_impl.h"

typedef enum { JOB_FORECAST, JOB_GENERATE } job_kind;

/* A forecast's window is filled in two phases (its context part once into a prefix, then
 * each path's generated part), or served one cached token a path. */
typedef enum {
    FC_PREFIX,
    FC_PATHS,
    FC_DECODE,
    FC_FORKED
} fc_phase; /* FC_FORKED: the paths
             * forked from a series'
             * cache, logits ready */

typedef struct {
    const kr_forecast_request *req;
    const kr_series *series; /* or NULL: the context is normalised and encoded here */
    kr_forecast_result *res;
    fc_job job;
    fc_phase phase;
    int i;                     /* the step: token L + i is drawn next */
    kr_pool *pool, *own_pool;  /* own_pool: a private pool when the caller gave none */
    kr_cache *prefix, **paths; /* paths: [S] */
    float *l1, *l2;            /* [S][vocab] */
    int32_t *a, *b;            /* [S]: this step's draws */
    kr_rng *rng;               /* [S] */
    int32_t *t1, *t2;          /* [S][g]: each path's generated part of the window */
    kr_stamp *st;              /* [g] */
    int prefix_start, prefix_need, prefix_done, g, g_done, chunk;
} fc_state;

typedef struct {
    kr_cache *c;
    const kr_generate_request *req;
    int32_t *out_s1, *out_s2;
    int appended, chunk; /* of req->n_append; rows in this step's append */
    int k;               /* new tokens drawn */
    bool pending;        /* the last drawn token is appended at the next step */
    float *l1, *l2;
    kr_rng rng;
    int32_t a, b;
} gen_state;

typedef struct sched_job sched_job;
struct sched_job {
    job_kind kind;
    void *tag;
    kr_error err;
    bool ready;   /* s1 logits fresh this step: draw */
    bool failed;  /* its rows could not run this step: it ends with err */
    bool stalled; /* no pool memory for its rows this step: it tries again at the next */
    int rows;     /* decode rows it holds while active */
    double flops;
    size_t pool_bytes; /* a forecast's plan: the most pool memory it takes */
    sched_job *next;
    union {
        fc_state fc;
        gen_state gen;
    } u;
};

/* This step's rows: groups of consecutive rows of one cache, in the order they are
 * appended, and where each group's s1 logits go (NULL: not needed). */
typedef struct {
    int n_groups, cap_groups, n_rows, cap_rows;
    kr_cache **caches;
    int *T;
    float **l1;
    sched_job **owner;
    int32_t *s1, *s2;
    kr_stamp *st;
} step_batch;

int step_batch_add(step_batch *b, sched_job *owner, kr_cache *c, int n, const int32_t *s1,
                   const int32_t *s2, const kr_stamp *st, int st_stride, float *l1);

/* ---- forecast jobs (sched_forecast.c) ---- */
int fc_init(const kr_model *m, kr_pool *pool, sched_job *j, kr_error *err);
/* Adds this step's rows: decode rows (decode = true) or window rows under *budget. */
int fc_rows(const kr_model *m, sched_job *j, step_batch *b, bool decode, int *budget);
/* After the append: advances the phase; sets j->ready when the paths' s1 logits are fresh. */
int fc_appended(const kr_model *m, sched_job *j, kr_error *err);
void fc_draw_s1(const kr_model *m, sched_job *j);
/* After the s2 logits: draws s2, records the tokens, moves to the next step; returns 1 when
 * the forecast is complete (result filled), 0 to go on, -1 on error. */
int fc_drawn(const kr_model *m, sched_job *j, kr_error *err);
void fc_free(sched_job *j);

/* ---- generate jobs (sched_generate.c) ---- */
int gen_init(const kr_model *m, sched_job *j, kr_error *err);
int gen_rows(sched_job *j, step_batch *b, bool decode, int *budget);
/* After the append: 1 when the job is complete (nothing more to draw), else 0. */
int gen_appended(sched_job *j);
void gen_draw_s1(const kr_model *m, sched_job *j);
void gen_drawn(const kr_model *m, sched_job *j);
void gen_free(sched_job *j);

#endif
