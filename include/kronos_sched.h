/* kronos_sched.h — the step scheduler (continuous batching): jobs of several models share
 * each model's decode steps. Part of the API kronos.h gathers; its conventions are there. */
#ifndef KRONOS_SCHED_H
#define KRONOS_SCHED_H

#include "kronos_forecast.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the step scheduler (continuous batching) ------------------------------------------- */

/* Model work advances in steps. Each step runs one product per weight matrix for the rows
 * of every active job: one token of every forecast path and every generating request,
 * plus chunks of prefills and window recomputes under a per-step token budget, so a long
 * prefill never stalls the others' decoding. A job added between steps joins at the next
 * one and leaves when it ends. Every row's arithmetic is its own: a job's result is the
 * one kr_forecast / kr_generate gives it alone, whatever else shares its steps.
 *
 * Not thread-safe: one thread adds jobs and steps (the server's scheduler thread). */
typedef struct kr_sched kr_sched;

typedef struct {
    int step_tokens; /* prefill and recompute rows per step and model, over its jobs; 0: 256 */
    int max_rows;    /* decode rows (paths, generating requests) active at once; 0: 512 */
    /* Light jobs (planned work at most light_flops; 0: 20 GFLOP) are latency-sensitive: they
     * fill their windows before the others, and while one is active a step's other window
     * rows are bounded in time, so that the step takes at most light_step_factor (0: 1.5)
     * times what it would take without them, by the step cost the scheduler measures
     * (milliseconds = fixed + per row x rows, fitted over the recent steps). */
    double light_flops, light_step_factor;
    /* a step's fixed cost counted in rows (its time with no rows over a row's time); 0: from
     * the measured step cost (until measured, an eighth of step_tokens goes to the others) */
    double step_fixed_rows;
    /* While a light job is active the other jobs sit steps out (no decode rows, no window
     * rows), so that the light job's steps cost about what they cost alone; each joins a step
     * again once it has sat out sit_out_steps steps in a row (0: 8; negative: none sit out)
     * or sit_out_ms milliseconds have passed since its last step (0: 40), so it still
     * advances. Nothing sits out while a job waits for pool memory. */
    int sit_out_steps;
    double sit_out_ms;
    /* While a light job has started within the last light_recent_ms milliseconds (0: 10000;
     * negative: never), a step without light jobs holds at most the window rows that keep it
     * within light_wait (0: 0.5) times what a light job costs alone (the step cost of the
     * rows recent light jobs had, step by step), so that a light job that comes mid-step
     * waits for it at most that long. */
    double light_wait, light_recent_ms;
    /* a job left the waiting line and joins the next step (light: its class); called on the
     * stepping thread; NULL: not told */
    void (*started)(void *tag, bool light, void *ctx);
    /* a job ended, err->code KR_OK when it succeeded; called on the stepping thread, which
     * may add jobs from it (kr_sched_add_*: they join the end of the waiting line) */
    void (*done)(void *tag, const kr_error *err, void *ctx);
    /* the pool ran dry mid-step: free some of it (an idle session) and return true, or
     * return false; the jobs that then cannot go on end with KR_E_POOL_EXHAUSTED */
    bool (*make_room)(void *ctx);
    /* with several models, make_room for the pool that ran dry (a model's), asked instead of
     * make_room when set: room made in another pool would not help */
    bool (*make_room_in)(kr_pool *pool, void *ctx);
    void *ctx;
} kr_sched_config;

/* The defaults of every knob above (step_fixed_rows 0: measured; no callbacks, ctx NULL):
 * an embedder starts from them and sets what it changes and its callbacks. A knob left 0
 * in a config given to kr_sched_create takes the same default. */
kr_sched_config kr_sched_config_default(void);

/* m and pool: the model and pool of kr_sched_add_forecast (m may be NULL when every
 * forecast names its own, kr_sched_add_forecast_on). pool NULL: every forecast gets a
 * private pool sized by its plan (the one-shot command).
 *
 * One scheduler runs jobs of several models: each job carries its model and pool (a
 * forecast's as added, a series' and a generation's cache's own), a step appends each
 * model's rows in one call and draws each model's s2 in one call, and the rules that order
 * the work (light before heavy, the window budget, sitting out) are the same over all
 * models' jobs. A job's answer does not depend on which other models share its steps. */
kr_sched *kr_sched_create(const kr_model *m, kr_pool *pool, const kr_sched_config *cfg,
                          kr_error *err);
/* Ends every job still held, as cancelled (done is called for each), and frees s. */
void kr_sched_free(kr_sched *s);

/* Queues a forecast after checking its plan (-1 and nothing queued when it is invalid).
 * res is filled when it ends; req and the arrays it points to must live until then. */
int kr_sched_add_forecast(kr_sched *s, const kr_forecast_request *req, kr_forecast_result *res,
                          void *tag, kr_error *err);
/* kr_sched_add_forecast on model m and its pool (NULL: a private pool), whatever model the
 * scheduler was created with. */
int kr_sched_add_forecast_on(kr_sched *s, const kr_model *m, kr_pool *pool,
                             const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                             kr_error *err);
/* Queues a forecast from a series (on the series' model and pool): req as kr_series_request
 * fills it, plus the forecast's
 * own fields. Its first step forks the series' predictor cache (when the series holds one)
 * instead of prefilling. The
 * series must not change until done is called. */
int kr_sched_add_forecast_series(kr_sched *s, const kr_series *series,
                                 const kr_forecast_request *req, kr_forecast_result *res, void *tag,
                                 kr_error *err);
/* Queues token generation on cache c (what kr_generate does, on c's model); out_s1, out_s2:
 * [n_new]. The
 * cache, req and its arrays must live until done is called. */
int kr_sched_add_generate(kr_sched *s, kr_cache *c, const kr_generate_request *req, int32_t *out_s1,
                          int32_t *out_s2, void *tag, kr_error *err);

/* One step; returns the jobs still held (waiting and active). */
int kr_sched_step(kr_sched *s);

typedef struct {
    int waiting, active;
    int rows_last_step, prefill_rows_last_step;
    /* candles of context the starting forecasts encoded, and their cost in rows */
    int encoded_last_step, encode_rows_last_step;
    unsigned long long steps, rows;
    unsigned long long preempted; /* forecasts restarted to let the others finish (pool) */
    double waiting_flops;         /* planned compute of the jobs not yet started */
    /* the measured step cost: ms = step_ms_fixed + step_ms_per_row x rows (0 until fitted) */
    double step_ms_fixed, step_ms_per_row;
    int light_active; /* light jobs in the steps */
    /* what the recent light jobs cost alone, in rows of the step cost (fixed + their rows,
     * step by step; a moving average; 0: none seen), and whether that bounds the steps
     * without light jobs now (light_wait) */
    double light_alone_rows;
    bool light_recent;
    unsigned long long sat_out; /* steps that jobs sat out beside a light one (job-steps) */
} kr_sched_stats;

void kr_sched_stats_get(const kr_sched *s, kr_sched_stats *st);

/* What one model's rows took in the steps, since the scheduler was made: the steps that ran
 * any of its rows, those rows (decode, prefill and recompute), and the milliseconds of its
 * forward passes there (its rows' append and its s2 heads; the shared parts of a step, the
 * draws and the tokenizer's encodes, are no model's). */
typedef struct {
    const kr_model *m;
    unsigned long long steps, rows;
    double ms;
} kr_sched_model_stats;

/* Every model the steps ran so far, in the order each first ran: up to max of them into
 * out; returns how many there are. */
int kr_sched_model_stats_get(const kr_sched *s, kr_sched_model_stats *out, int max);
/* Model m's figures dropped (a model freed: one loaded later at its address starts from
 * zero). Between steps, with no job of m in the scheduler. */
void kr_sched_model_stats_forget(kr_sched *s, const kr_model *m);

#ifdef __cplusplus
}
#endif
#endif
