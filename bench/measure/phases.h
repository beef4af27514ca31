/* phases.h — the phases the bench times (forecasts, decode steps, a window's fill, the
 * tokenizer's decode) and its parity check, on a CSV's candles. Each runs once untimed first,
 * so that the timed calls find their pool blocks and scratch touched, as a server's are after
 * its first requests. */
#ifndef KB_PHASES_H
#define KB_PHASES_H

#include "kronos.h"

#include <stdbool.h>
#include <stdint.h>

/* A CSV's candles: timestamps (ms) and the KR_D_IN columns, n rows. */
typedef struct {
    int n;
    int64_t *wall;
    double *col[KR_D_IN];
} kb_series;

/* Tokens into a forecast's horizon where the bench times a 30-path step as well: near the middle
 * of a 112-token horizon, where each path attends over about as many keys of its own as it does
 * on average over the whole horizon (at the start it has none, and attention reads only the
 * shared prefix once for all paths). */
#define KB_MID_HORIZON 48
/* Steps a decode round times (their median position: KB_TIMED_STEPS / 2). */
#define KB_TIMED_STEPS 16

/* From now on the phases time with the process's CPU time (all its threads, the kernel's page
 * faults included: --phases-cpu), not the wall clock. */
void kb_phases_in_cpu_time(void);

/* Frees what kb_read_csv allocated. */
void kb_series_free(kb_series *s);

/* Reads timestamps,open,high,low,close,volume,amount rows (up to 4096, after a header) into
 * s: 0, or -1 after saying why on stderr. */
int kb_read_csv(const char *path, kb_series *s);

/* ms of one forecast (the best of reps), lookback L from row 0 of the series, its KV caches
 * in `pool` (kept across forecasts, as a server's: the first call touches its pages). */
double kb_forecast_ms(const kr_model *m, kr_pool *pool, const kb_series *s, int L, int P,
                      int samples, bool use_cache, int reps, kr_forecast_result *keep);

/* Whether a lookback of L, KB_MID_HORIZON more tokens and the timed steps fit the context
 * window mc (past it the window slides: no cached step to time). */
bool kb_mid_horizon_fits(int L, int mc);

/* Time per step of decoding S paths on caches holding `prefix` positions, each path `skip`
 * tokens into its horizon (its own keys past the shared prefix: skip, and one more each
 * step): the median of KB_TIMED_STEPS steps in each of `rounds` timed rounds, at least 4
 * (robust to a shared machine's hiccups).
 * Each round forks the paths from one prefilled cache and frees them after, on one pool;
 * an untimed round first touches the pool blocks the steps write, so the timed rounds run
 * on warm blocks the way a server's long-lived pool does after its first requests. */
double kb_decode_step_ms(const kr_model *m, const kb_series *s, int prefix, int S, int skip,
                         int rounds);

/* The two timed parts of filling a window: `prefix` context tokens into one cache (what
 * every path then forks), then each of S paths appending its own g tokens in one batch and
 * drawing its s2 logits. prefill_ms and own_ms get their times: the best of at least reps
 * rounds and 0.3 s of them (as with the yardstick, the fastest is what the machine does when
 * the neighbours let it), after an untimed round that first touches the pool blocks and the
 * threads' scratch (the steady state of a server, warm after its first requests). */
void kb_window_ms(const kr_model *m, const kb_series *s, int prefix, int g, int S, int reps,
                  double *prefill_ms, double *own_ms);

/* ms of decoding n token pairs to candles with the tokenizer: the best of at least reps
 * calls and 0.3 s of them (a call is short: as with the yardstick, the fastest call is what
 * the machine does when the neighbours let it), after an untimed call that first
 * touches the thread's scratch. */
double kb_detok_ms(const kr_model *m, int n, int reps);

/* The bench's parity check: one path, horizon 12 from lookback max_context - 6 (the window
 * slides for the last 6 steps), KV-cached against the plain reference path. The same tokens
 * give the same candles to the bit; returns the number of numbers that differ. */
int kb_parity_check(const kr_model *m, const kb_series *s, int mc);

#endif
