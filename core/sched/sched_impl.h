/* sched_impl.h — the step scheduler's jobs, shared by sched.c (jobs in and out),
 * sched_step.c (one step) and the kinds of job it runs, each a table of operations
 * (sched_ops): forecasts and forecasts from a series (sched_forecast.c), token generation
 * (sched_generate.c). Internal to core/.
 *
 * A step is one ragged append over every job's rows (decode rows of every path and every
 * generating session; prefill and window-recompute chunks under the step's token budget),
 * the chunks of context that starting forecasts encode under the same budget, then the s1
 * draws of every job that has fresh logits, one batched s2-logits call for all
 * of them, and the s2 draws. A job joins at the step after it is added and leaves when it
 * ends; no row's numbers depend on which others share its step.
 */
#ifndef KR_SCHED_IMPL_H
#define KR_SCHED_IMPL_H

#include "cache.h"
#include "forecast_impl.h"
#include "step_batch.h"

/* What a kind of job does at each point of a step. Every operation gets the job's own model
 * (a scheduler runs jobs of several models); those that can fail set err and return -1. */
typedef struct {
    const char *what; /* "forecast", "generate": messages and cancel checks */
    /* Its state made ready when it leaves the waiting line (pool NULL: a private pool). */
    int (*start)(const kr_model *m, kr_pool *pool, sched_job *j, kr_error *err);
    /* Adds this step's rows: decode rows (decode = true) or window rows under *budget, a
     * forecast first encoding a chunk of its context under it (counted in side_rows);
     * forgets the rows of the step before (a stalled step's rows are added again). -1 with
     * its err set, or unset when out of memory. */
    int (*rows)(const kr_model *m, sched_job *j, step_batch *b, bool decode, int *budget);
    /* The window rows it still has to fill before its next draw (0: none): the cost by
     * which the step's budget is shared, smallest first. */
    int (*fill_left)(const sched_job *j);
    /* After the append: advances; sets j->ready when it has fresh s1 logits. 1 when the job
     * is complete, 0 to go on, -1 on error. */
    int (*appended)(const kr_model *m, sched_job *j, kr_error *err);
    /* Draws s1 from the fresh logits into j->draw_s1. */
    void (*draw_s1)(const kr_model *m, sched_job *j);
    /* After the s2 logits (in j->draw_l2): draws s2, records the tokens; 1 when the job is
     * complete (its result filled), 0 to go on, -1 on error. */
    int (*drawn)(const kr_model *m, sched_job *j, kr_error *err);
    /* Frees its state; failed: its result too (the caller gets nothing half filled). */
    void (*free)(sched_job *j, bool failed);
    /* Back to how it was when added, its memory returned (preemption); NULL: a job of this
     * kind is never preempted. */
    void (*reset)(sched_job *j);
    /* Whether its plan's pool bytes count against the pool at admission (a forecast with a
     * private pool or a series' cache does not). */
    bool plans_pool;
    /* Whether, when start fails for want of pool memory, room is made and it starts again
     * (a generation takes its blocks up front). */
    bool start_makes_room;
} sched_ops;

extern const sched_ops sched_forecast_ops, sched_series_ops, sched_generate_ops;

/* The operations every kind has, named prefix_start, prefix_rows, …: a kind's table is
 * {SCHED_OPS("what", prefix), and what is its own}. */
#define SCHED_OPS(name, prefix)                                                                    \
    .what = name, .start = prefix##_start, .rows = prefix##_rows, .fill_left = prefix##_fill_left, \
    .appended = prefix##_appended, .draw_s1 = prefix##_draw_s1, .drawn = prefix##_drawn,           \
    .free = prefix##_free

/* A forecast's context is encoded (FC_ENCODE, a chunk a step); its window is filled in two
 * phases (its context part once into a prefix, then each path's generated part), or served
 * one cached token a path. FC_FORKED: the paths forked from a series' cache, logits ready.
 * Once every token is drawn its summary is decoded (FC_SUMMARY, a part a step). */
typedef enum { FC_ENCODE, FC_PREFIX, FC_PATHS, FC_DECODE, FC_FORKED, FC_SUMMARY } fc_phase;

typedef struct {
    const kr_model *m;
    const kr_forecast_request *req;
    const kr_series *series; /* or NULL: the context is normalised and encoded here */
    kr_forecast_result *res;
    fc_state job;
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
    fc_summary sum;  /* FC_SUMMARY */
    bool summarised; /* its answer is complete: it ends after this step's append */
} sched_forecast;

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

struct sched_job {
    const sched_ops *ops;
    const kr_model *m; /* the model it runs on; its rows are appended with that model's others */
    kr_pool *pool;     /* where its caches come from (NULL: a private pool) */
    void *tag;
    const kr_cancel *cancel;
    kr_error err;
    bool ready;     /* s1 logits fresh this step: draw */
    bool drawing;   /* it was ready when the step's s2 calls began */
    bool failed;    /* its rows could not run this step: it ends with err */
    bool stalled;   /* no pool memory for its rows this step: it tries again at the next */
    int rows;       /* decode rows it holds while active */
    int starved;    /* steps in a row it had window rows to fill and got no budget */
    bool out;       /* it sits this step out (beside a light job): no rows, nothing after */
    int sat_out;    /* steps in a row it sat out */
    double last_ms; /* when the last step it joined began, or it started (0: not started) */
    bool light;     /* its class's planned work at most cfg.light_flops: latency-sensitive */
    double flops;
    double class_flops; /* the planned work of the request it is part of (0: its own) */
    int step_rows;      /* its rows in this step (window and decode rows, a context's encode) */
    int fill_rows;      /* the budget its window fill took in this step (add_window_rows) */
    double alone_rows;  /* a light job: its steps' cost alone so far, in rows (light_wait) */
    size_t pool_bytes;  /* a forecast's plan: the most pool memory it takes */
    /* what the batched s2-logits call needs once s1 is drawn, set by start: n_draw rows,
     * each a cache and its drawn s1, and where their s2 logits go ([n_draw][vocab]) */
    int n_draw;
    kr_cache *const *draw_caches;
    const int32_t *draw_s1;
    float *draw_l2;
    sched_job *next;
    union {
        sched_forecast fc;
        gen_state gen;
    } u;
};

/* ---- sched_model_stats.c: what each model's rows took in the steps ---- */

typedef struct {
    kr_sched_model_stats pub;
    unsigned long long last_step; /* the step it last counted (steps once a step) */
} sched_model_stat;

/* ms of model m's work in this step (s->stats.steps), rows of it. Not counted when out of
 * memory for m's entry: the figures are for metrics, the step goes on. */
void sched_model_time(kr_sched *s, const kr_model *m, int rows, double ms);

/* ---- sched.c: the scheduler, its waiting line and its active jobs ---- */

struct kr_sched {
    const kr_model *m; /* the model of kr_sched_add_forecast, on pool (kr_sched_create) */
    kr_pool *pool;
    kr_sched_config cfg;
    sched_job *wait_head, *wait_tail; /* FIFO */
    sched_job *active;                /* in admission order */
    int active_rows;
    bool stalled;    /* the last step had jobs waiting for pool memory */
    bool short_pool; /* a job waited for pool memory in the last step: none sits out */
    int sitting_out; /* jobs that sit this step out (beside a light one) */
    step_batch batch;
    step_batch regroup; /* the batch's groups regrouped by model when a step holds several */
    sched_job **order;  /* this step's window-fill order: light jobs first, and in each class
                           the aged, then the cheapest first */
    int order_cap;
    /* the step cost, ms = a + b x rows, fitted by least squares over the recent steps (each
     * step's weight decays by COST_DECAY a step): the sums of weight, rows, ms, rows^2 and
     * rows x ms */
    double cost_w, cost_n, cost_t, cost_nn, cost_nt;
    /* the s2 call: every drawing row's cache and s1, and its logits */
    kr_cache **s2_caches;
    int32_t *s2_a;
    float *s2_l2;
    int s2_cap;
    float *l1_buf;        /* the append's s1 logits when they cannot go straight to their groups */
    int l1_cap;           /* in groups */
    double light_seen_ms; /* when the last light job started (0: never) */
    kr_sched_stats stats;
    sched_model_stat *mstats; /* per model, in the order each first ran (sched_model_stats.c) */
    int n_mstats, mstats_cap;
};

/* Room made in pool (cfg.make_room_in, else cfg.make_room); whether some was. */
bool sched_make_room(kr_sched *s, kr_pool *pool);
/* A new job of a kind on model m and pool (NULL: a private pool), not yet queued (NULL and
 * err set when out of memory). */
sched_job *sched_job_new(const sched_ops *ops, const kr_model *m, kr_pool *pool, void *tag,
                         const kr_cancel *cancel, kr_error *err);
/* Queues j at the end of the waiting line. */
void sched_enqueue(kr_sched *s, sched_job *j);
/* Waiting jobs start, first come first served, while their decode rows fit max_rows and
 * the pool has room (one always may, when none is active); those whose caller gave up end. */
void sched_admit(kr_sched *s);
/* 0 to go on, else the job's error is set (cancelled or past its deadline). */
int sched_check_cancel(sched_job *j);
/* Ends an active job: out of the active list, its memory back, the caller's callback. */
void sched_end_active(kr_sched *s, sched_job *j);
/* An active forecast back to the head of the waiting line, its memory returned and its work
 * forgotten (it starts again from scratch, with the same answer). */
void sched_preempt(kr_sched *s, sched_job *j);
/* The fitted step cost (ms = *fixed + *per_row x rows); false while too few steps of
 * different sizes were measured to tell. */
bool sched_step_cost(const kr_sched *s, double *fixed, double *per_row);
/* A step's fixed cost in rows (cfg.step_fixed_rows, or the fitted cost's, at most an eighth
 * of step_tokens); -1 while unknown. */
double sched_fixed_rows(const kr_sched *s);

#endif
