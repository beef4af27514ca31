/* eval_calibrated.c — the calibrated forecaster's side of an evaluation (kr_eval_calibrated,
 * kronos.h): each origin's sorted close paths kept as it is added; at the end, per step,
 * each origin's calibration (rolling: from the outcomes known before it, never after; given:
 * the object unchanged), its calibrated quantiles, P(up) and scores beside the raw model's on
 * the same origins, and the object fitted on every origin.
 *
 * Rolling without look-ahead, in O(G N log N) per step for G levels and N origins: origin
 * j's step-h score enters origin k's calibration when o_j + h < o_k, so each origin's set is
 * a prefix of the origins (they increase); the scores of a level are ranked once, the prefix
 * kept in a Fenwick tree over the ranks, and the conformal rank's score found by descending
 * it. P(up)'s isotonic map is refitted per origin over the distinct raw values seen (at most
 * samples + 1: a raw P(up) is a share of the paths). */
#include "evaluate_impl.h"

#include "base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double *sorted;     /* [origins][horizon][samples] */
    double *col_sorted; /* [KR_CALIB_COLS][origins][horizon][samples] with columns */
    double *col_actual; /* [KR_CALIB_COLS][origins][horizon] with columns, set at the end */
} cal_acc;

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void kr_eval_calibrated_free(kr_evaluation *ev) {
    kr_eval_calibrated *c = ev->calibrated;
    if (!c) return;
    cal_acc *a = c->acc;
    if (a) KR_FREE_ALL(a->sorted, a->col_sorted, a->col_actual);
    KR_FREE_ALL(a, c->col_coverage, c->col_quantiles, c->scores, c->coverage,
                c->crps_quantile_model, c->quantiles, c->prob_close_up, c->pit_at);
    kr_calibration_free(&c->fitted);
    free(c);
    ev->calibrated = NULL;
}

int kr_eval_calibrated_init(kr_evaluation *ev, const kr_evaluate_request *req, kr_error *err) {
    if (req->calibration_mode == KR_CALIB_NONE) return 0;
    const size_t N = (size_t)ev->origins, P = (size_t)ev->horizon, S = (size_t)ev->samples;
    const size_t H = P + 1, Q = (size_t)ev->n_quantiles, pairs = ev->n_pairs ? ev->n_pairs : 1;
    kr_eval_calibrated *c = ev->calibrated = calloc(1, sizeof *c);
    cal_acc *a = c ? c->acc = calloc(1, sizeof *a) : NULL;
    if (a) {
        a->sorted = malloc(N * P * S * sizeof(double));
        c->scores = malloc(2 * KR_EVAL_METRICS * H * sizeof(double));
        c->coverage = malloc(2 * pairs * H * sizeof(double));
        c->crps_quantile_model = malloc(H * sizeof(double));
        c->quantiles = malloc((Q ? Q : 1) * N * P * sizeof(double));
        c->prob_close_up = malloc(N * P * sizeof(double));
        c->pit_at = malloc(N * P * sizeof(double));
    }
    if (!a || !a->sorted || !c->scores || !c->coverage || !c->crps_quantile_model ||
        !c->quantiles || !c->prob_close_up || !c->pit_at) {
        kr_eval_calibrated_free(ev);
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "evaluate: out of memory calibrating %d origins of %d steps and %d "
                            "paths",
                            ev->origins, ev->horizon, ev->samples);
    }
    int rc = req->calibration_mode == KR_CALIB_GIVEN
                 ? kr_calibration_copy(&c->fitted, req->calibration, err)
                 : kr_calibration_init(&c->fitted, req->model_id, ev->horizon, ev->samples,
                                       ev->quantile_levels, ev->n_quantiles, err);
    if (rc == 0 && req->calibration_mode == KR_CALIB_ROLLING) {
        c->fitted.fitted = ev->origins;
        c->fitted.has_columns = true;
        c->fitted.col_shift = calloc(KR_CALIB_COLS * P * (size_t)c->fitted.n_grid, sizeof(double));
        if (!c->fitted.col_shift) rc = -1;
    }
    if (rc == 0 && c->fitted.has_columns) {
        a->col_sorted = malloc(KR_CALIB_COLS * N * P * S * sizeof(double));
        a->col_actual = malloc(KR_CALIB_COLS * N * P * sizeof(double));
        c->col_coverage = malloc(2 * KR_CALIB_COLS * pairs * H * sizeof(double));
        c->col_quantiles = malloc(KR_CALIB_COLS * N * (Q ? Q : 1) * P * sizeof(double));
        if (!a->col_sorted || !a->col_actual || !c->col_coverage || !c->col_quantiles) rc = -1;
    }
    if (rc) {
        kr_eval_calibrated_free(ev);
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "evaluate: out of memory calibrating the columns of %d origins",
                            ev->origins);
    }
    return 0;
}

void kr_eval_calibrated_add_columns(kr_evaluation *ev, int k, const kr_forecast_result *res) {
    cal_acc *a = ev->calibrated->acc;
    if (!a->col_sorted) return;
    const size_t N = (size_t)ev->origins, P = (size_t)ev->horizon, S = (size_t)ev->samples;
    for (int j = 0; j < KR_CALIB_COLS; j++)
        for (size_t h = 0; h < P; h++) {
            double *out = a->col_sorted + (((size_t)j * N + (size_t)k) * P + h) * S;
            for (size_t p = 0; p < S; p++)
                out[p] = res->paths[(p * KR_D_IN + (size_t)kr_calib_columns[j]) * P + h];
            qsort(out, S, sizeof *out, cmp_double);
        }
}

void kr_eval_calibrated_add(kr_evaluation *ev, int k, int h, const double *sorted) {
    cal_acc *a = ev->calibrated->acc;
    const size_t S = (size_t)ev->samples;
    memcpy(a->sorted + ((size_t)k * ev->horizon + h) * S, sorted, S * sizeof *sorted);
}

/* ---- rolling: each origin's shifts and P(up) from the earlier outcomes ---------------------- */

typedef struct {
    double e;
    int j;
} score;

static int cmp_score(const void *x, const void *y) {
    const score *a = x, *b = y;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

/* The 0-based rank of the k-th (1-based) smallest held in the Fenwick tree t[1..n]. */
static int fenwick_kth(const int *t, int n, int k) {
    int pos = 0, top = 1;
    while (top * 2 <= n)
        top *= 2;
    for (int b = top; b; b /= 2)
        if (pos + b <= n && t[pos + b] < k) {
            pos += b;
            k -= t[pos];
        }
    return pos;
}

static void fenwick_add(int *t, int n, int i) {
    for (i++; i <= n; i += i & -i)
        t[i]++;
}

/* Work space of the end, per step. */
typedef struct {
    int N, P, S, G, k0;
    const double *grid;
    int *known; /* [N]: origin k's earlier outcomes at this step */
    score *sc;  /* [N] */
    int *rank, *tree;
    double *vals, *shift;                     /* [N], [N][G] */
    double *p_cal;                            /* [N] */
    double *ux, *uw, *us, *fx, *fy, *scratch; /* the distinct raw P(up) values: [N] each, 3N */
} work;

/* One column's sorted paths [origins][horizon][samples] and actuals [origins][horizon]. */
typedef struct {
    const double *sorted, *actual;
} column;

static double score_of(const kr_evaluation *ev, const column *col, const work *w, int j, int h,
                       double tau) {
    const size_t at = (size_t)j * w->P + h;
    const double q = kr_quantile_linear(col->sorted + at * w->S, w->S, tau);
    return (col->actual[at] - q) / ev->last_close[j];
}

/* The shifts of level g at step h of a column: each scored origin's from its prefix, the
 * fitted one's (fitted: the step's shifts) from all. */
static void rolling_level(kr_evaluation *ev, work *w, const column *col, double *fitted, int h,
                          int g) {
    const int N = w->N;
    const double tau = w->grid[g];
    for (int j = 0; j < N; j++)
        w->sc[j] = (score){score_of(ev, col, w, j, h, tau), j};
    qsort(w->sc, (size_t)N, sizeof *w->sc, cmp_score);
    for (int r = 0; r < N; r++) {
        w->rank[w->sc[r].j] = r;
        w->vals[r] = w->sc[r].e;
    }
    fitted[g] = w->vals[kr_conformal_rank(N, tau) - 1];
    memset(w->tree, 0, (size_t)(N + 1) * sizeof *w->tree);
    for (int k = 0, in = 0; k < N; k++) {
        for (; in < w->known[k]; in++)
            fenwick_add(w->tree, N, w->rank[in]);
        if (k >= w->k0)
            w->shift[(size_t)k * w->G + g] =
                w->vals[fenwick_kth(w->tree, N, kr_conformal_rank(w->known[k], tau))];
    }
}

/* One outcome into the distinct raw values (ascending): its weight and its up. */
static void add_point(work *w, int *n, double x, double up) {
    *n = kr_up_points_add(w->ux, w->uw, w->us, *n, w->N, x, up);
}

static int rolling_up(kr_evaluation *ev, work *w, int h, kr_error *err) {
    const int N = w->N, P = w->P;
    int n = 0;
    for (int k = 0, in = 0; k < N; k++) {
        for (; in < w->known[k]; in++) {
            const size_t at = (size_t)in * P + h;
            add_point(w, &n, ev->prob_close_up[at], ev->actual[at] > ev->last_close[in]);
        }
        if (k >= w->k0) {
            kr_isotonic_fit(w->ux, w->uw, w->us, n, w->fx, w->fy, w->scratch);
            w->p_cal[k] = kr_isotonic_at(w->fx, w->fy, n, ev->prob_close_up[(size_t)k * P + h]);
        }
    }
    for (int j = w->known[N - 1]; j < N; j++) { /* the fitted object: every origin */
        const size_t at = (size_t)j * P + h;
        add_point(w, &n, ev->prob_close_up[at], ev->actual[at] > ev->last_close[j]);
    }
    kr_calibration *f = &ev->calibrated->fitted;
    if (n > f->up_cap)
        return kr_fail(err, "evaluate: step %d has %d distinct raw P(up) values, more than %d", h,
                       n, f->up_cap);
    f->up_n[h] = kr_isotonic_fit(w->ux, w->uw, w->us, n, f->up_x + (size_t)h * f->up_cap,
                                 f->up_y + (size_t)h * f->up_cap, w->scratch);
    return 0;
}

/* ---- the scores --------------------------------------------------------------------------- */

#define COL_TALLY (1 + 2 * (KR_MAX_QUANTILES / 2)) /* a column-step's counts */

/* Where the request's levels and symmetric pairs sit in the grid, and the fine grid's. */
typedef struct {
    int level[KR_MAX_QUANTILES], lo[KR_MAX_QUANTILES / 2], hi[KR_MAX_QUANTILES / 2];
    int fine[KR_CALIB_FINE], n_fine;
    double fine_levels[KR_CALIB_FINE];
} places;

typedef struct {
    kr_eval_sums *sums;        /* [2: model on the scored, calibrated][horizon + 1] */
    double *crps_q;            /* [horizon + 1] raw quantile-form CRPS sums */
    double *pit_raw, *pit_cal; /* [scored x horizon] */
    long n_pit;
    /* [KR_CALIB_COLS][horizon + 1][1 + 2 pairs]: origin-steps, then per pair raw, calibrated
     * covered */
    long *col_covered;
} tally;

static void reliability_add(kr_eval_calibrated *c, int kind, double p, double up) {
    int b = (int)floor(p * KR_EVAL_PIT_BINS);
    b = b < 0 ? 0 : b >= KR_EVAL_PIT_BINS ? KR_EVAL_PIT_BINS - 1 : b;
    c->rel_count[kind][b]++;
    c->rel_prob[kind][b] += p;
    c->rel_up[kind][b] += up;
}

/* Origin k at step h: its calibrated grid from shift (G) and P(up) p, scored. */
static void score_origin(kr_evaluation *ev, const work *w, const places *pl, tally *t, int k, int h,
                         const double *shift, double p, const double *crps, const double *pit) {
    kr_eval_calibrated *c = ev->calibrated;
    const cal_acc *a = c->acc;
    const int P = w->P, G = w->G, Q = ev->n_quantiles;
    const size_t at = (size_t)k * P + h;
    const double y = ev->actual[at], last = ev->last_close[k];
    double raw[KR_CALIB_MAX_GRID], cal[KR_CALIB_MAX_GRID], fr[KR_CALIB_FINE], fc[KR_CALIB_FINE];
    for (int g = 0; g < G; g++)
        raw[g] = kr_quantile_linear(a->sorted + at * w->S, w->S, w->grid[g]);
    kr_calib_shifted(raw, G, last, shift, cal);
    double point = 0;
    for (int i = 0; i < pl->n_fine; i++) {
        fr[i] = raw[pl->fine[i]];
        fc[i] = cal[pl->fine[i]];
        point += fc[i];
    }
    point /= pl->n_fine;
    double cov_c[KR_MAX_QUANTILES / 2], cov_r[KR_MAX_QUANTILES / 2];
    for (int j = 0; j < ev->n_pairs; j++) {
        cov_c[j] = cal[pl->lo[j]] <= y && y <= cal[pl->hi[j]];
        const double lo = ev->quantiles[((size_t)k * Q + ev->pair_lo[j]) * P + h];
        const double hi = ev->quantiles[((size_t)k * Q + ev->pair_hi[j]) * P + h];
        cov_r[j] = lo <= y && y <= hi;
    }
    for (int q = 0; q < Q; q++)
        c->quantiles[((size_t)k * Q + q) * P + h] = cal[pl->level[q]];
    c->prob_close_up[at] = p;
    const double crps_c = kr_crps_quantile(fc, pl->fine_levels, pl->n_fine, y);
    const double crps_r = kr_crps_quantile(fr, pl->fine_levels, pl->n_fine, y);
    for (int s = 0; s < 2; s++) { /* the step's sums, then all steps' */
        const int i = s ? P : h;
        kr_eval_sums_add(&t->sums[i], ev->mean[at], last, y, ev->prob_close_up[at], crps[at], cov_r,
                         ev->n_pairs);
        kr_eval_sums_add(&t->sums[(P + 1) + i], point, last, y, p, crps_c, cov_c, ev->n_pairs);
        t->crps_q[i] += crps_r;
    }
    const double u = c->pit_at[at] = kr_pit_in_grid(cal, w->grid, G, y);
    int bin = (int)floor(u * KR_EVAL_PIT_BINS);
    c->pit[bin < KR_EVAL_PIT_BINS ? bin : KR_EVAL_PIT_BINS - 1] += 1;
    t->pit_raw[t->n_pit] = pit[at];
    t->pit_cal[t->n_pit++] = u;
    reliability_add(c, KR_CAL_MODEL_SCORED, ev->prob_close_up[at], y > last);
    reliability_add(c, KR_CAL_CALIBRATED, p, y > last);
}

static void find_places(const kr_evaluation *ev, const kr_calibration *f, places *pl) {
    for (int q = 0; q < ev->n_quantiles; q++)
        pl->level[q] = kr_calib_level_index(f, f->levels[q]); /* matched in order */
    for (int j = 0; j < ev->n_pairs; j++) {
        pl->lo[j] = pl->level[ev->pair_lo[j]];
        pl->hi[j] = pl->level[ev->pair_hi[j]];
    }
    pl->n_fine = 0;
    for (int g = 0; g < f->n_grid; g++)
        if (kr_calib_is_fine(f->grid[g])) {
            pl->fine_levels[pl->n_fine] = f->grid[g];
            pl->fine[pl->n_fine++] = g;
        }
}

/* Column j at step h: its shifts (rolling: each scored origin's from the outcomes before it,
 * the fitted object's from all), then each scored origin's raw and calibrated coverage. */
static void one_column(kr_evaluation *ev, bool rolling, work *w, const places *pl, tally *t, int j,
                       int h) {
    const cal_acc *a = ev->calibrated->acc;
    kr_calibration *f = &ev->calibrated->fitted;
    const size_t N = (size_t)w->N, P = (size_t)w->P, S = (size_t)w->S, G = (size_t)w->G;
    const column col = {a->col_sorted + (size_t)j * N * P * S, a->col_actual + (size_t)j * N * P};
    double *fitted = f->col_shift + ((size_t)j * P + (size_t)h) * G;
    for (int g = 0; rolling && g < w->G; g++)
        rolling_level(ev, w, &col, fitted, h, g);
    double raw[KR_CALIB_MAX_GRID], cal[KR_CALIB_MAX_GRID];
    for (int k = w->k0; k < w->N; k++) {
        const size_t at = (size_t)k * P + (size_t)h;
        const double *shift = rolling ? w->shift + (size_t)k * G : fitted;
        const double y = col.actual[at], *sorted = col.sorted + at * S;
        for (int g = 0; g < w->G; g++)
            raw[g] = kr_quantile_linear(sorted, w->S, w->grid[g]);
        kr_calib_shifted(raw, w->G, ev->last_close[k], shift, cal);
        for (int q = 0; q < ev->n_quantiles; q++)
            ev->calibrated->col_quantiles[(((size_t)j * N + (size_t)k) * ev->n_quantiles + q) * P +
                                          (size_t)h] = cal[pl->level[q]];
        for (int i = 0; i < 2; i++) { /* the step's counts, then all steps' */
            long *n = t->col_covered + ((size_t)j * (P + 1) + (i ? P : (size_t)h)) * COL_TALLY;
            n[0]++;
            for (int p = 0; p < ev->n_pairs; p++) {
                n[1 + 2 * p] += raw[pl->lo[p]] <= y && y <= raw[pl->hi[p]];
                n[2 + 2 * p] += cal[pl->lo[p]] <= y && y <= cal[pl->hi[p]];
            }
        }
    }
}

/* known[k]: the origins whose step-h outcome precedes origin k (o_j + h < o_k). */
static void known_before(const kr_evaluation *ev, int h, int *known) {
    for (int k = 0, j = 0; k < ev->origins; k++) {
        while (j < ev->origins && ev->origin_index[j] + h < ev->origin_index[k])
            j++;
        known[k] = j;
    }
}

static int one_step(kr_evaluation *ev, const kr_evaluate_request *req, work *w, const places *pl,
                    tally *t, int h, const double *crps, const double *pit, kr_error *err) {
    kr_calibration *f = &ev->calibrated->fitted;
    const bool rolling = req->calibration_mode == KR_CALIB_ROLLING;
    if (rolling) {
        const column close = {((const cal_acc *)ev->calibrated->acc)->sorted, ev->actual};
        known_before(ev, h, w->known);
        for (int g = 0; g < w->G; g++)
            rolling_level(ev, w, &close, f->shift + (size_t)h * w->G, h, g);
        if (rolling_up(ev, w, h, err)) return -1;
    }
    for (int k = w->k0; k < w->N; k++) {
        const size_t at = (size_t)k * w->P + h;
        const double *shift = rolling ? w->shift + (size_t)k * w->G : f->shift + (size_t)h * w->G;
        const double p = rolling ? w->p_cal[k]
                                 : kr_isotonic_at(f->up_x + (size_t)h * f->up_cap,
                                                  f->up_y + (size_t)h * f->up_cap, f->up_n[h],
                                                  ev->prob_close_up[at]);
        score_origin(ev, w, pl, t, k, h, shift, p, crps, pit);
    }
    for (int j = 0; f->has_columns && j < KR_CALIB_COLS; j++)
        one_column(ev, rolling, w, pl, t, j, h);
    return 0;
}

/* The first origin with at least warmup earlier outcomes at every step (the last step's are
 * the fewest). */
static int first_scored(const kr_evaluation *ev, int warmup, int *known) {
    known_before(ev, ev->horizon - 1, known);
    for (int k = 0; k < ev->origins; k++)
        if (known[k] >= warmup) return k;
    return ev->origins;
}

/* The tallies into the answer: scores, histograms, KS distances, reliability. */
static void write_out(kr_evaluation *ev, const tally *t, const double *pit) {
    kr_eval_calibrated *c = ev->calibrated;
    const int P = ev->horizon, H = P + 1, NP = ev->n_pairs ? ev->n_pairs : 1;
    const unsigned all = KR_SUMS_DIRECTION | KR_SUMS_BRIER | KR_SUMS_COVERAGE;
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < H; h++)
            kr_eval_sums_write(&t->sums[(size_t)i * H + h], all, ev->n_pairs, H, h,
                               c->scores + (size_t)i * KR_EVAL_METRICS * H,
                               c->coverage + (size_t)i * NP * H);
    for (int h = 0; h < H; h++)
        c->crps_quantile_model[h] = t->crps_q[h] / (double)t->sums[h].n;
    for (int b = 0; b < KR_EVAL_PIT_BINS; b++)
        c->pit[b] = t->n_pit ? c->pit[b] / (double)t->n_pit : NAN;
    c->pit_ks[KR_CAL_MODEL_SCORED] = kr_ks_uniform(t->pit_raw, (int)t->n_pit);
    c->pit_ks[KR_CAL_CALIBRATED] = kr_ks_uniform(t->pit_cal, (int)t->n_pit);
    /* the raw model on every origin: its PIT (t->pit_raw reused) and reliability */
    const long NPall = (long)ev->origins * P;
    for (long i = 0; i < NPall; i++) {
        t->pit_raw[i] = pit[i];
        reliability_add(c, KR_CAL_MODEL, ev->prob_close_up[i],
                        ev->actual[i] > ev->last_close[i / P]);
    }
    c->pit_ks[KR_CAL_MODEL] = kr_ks_uniform(t->pit_raw, (int)NPall);
    for (int kind = 0; kind < KR_CAL_KINDS; kind++)
        for (int b = 0; b < KR_EVAL_PIT_BINS; b++) {
            const long n = c->rel_count[kind][b];
            c->rel_prob[kind][b] = n ? c->rel_prob[kind][b] / n : NAN;
            c->rel_up[kind][b] = n ? c->rel_up[kind][b] / n : NAN;
        }
}

static void work_free(work *w, tally *t) {
    KR_FREE_ALL(w->known, w->sc, w->rank, w->tree, w->vals, w->shift, w->p_cal, w->ux);
    KR_FREE_ALL(t->sums, t->crps_q, t->pit_raw, t->col_covered);
}

/* Each column's coverage from its counts, and its actuals before: the request's candles. */
static void column_actuals(kr_evaluation *ev, const kr_evaluate_request *req) {
    cal_acc *a = ev->calibrated->acc;
    const size_t N = (size_t)ev->origins, P = (size_t)ev->horizon;
    for (int j = 0; j < KR_CALIB_COLS; j++)
        for (size_t k = 0; k < N; k++)
            for (size_t h = 0; h < P; h++)
                a->col_actual[((size_t)j * N + k) * P + h] =
                    req->candles.columns[kr_calib_columns[j]][(size_t)ev->origin_index[k] + h];
}

static void column_coverage(kr_evaluation *ev, const tally *t) {
    kr_eval_calibrated *c = ev->calibrated;
    const size_t H = (size_t)ev->horizon + 1, NP = ev->n_pairs ? (size_t)ev->n_pairs : 1;
    for (size_t j = 0; j < KR_CALIB_COLS; j++)
        for (size_t h = 0; h < H; h++) {
            const long *n = t->col_covered + (j * H + h) * COL_TALLY;
            for (size_t p = 0; p < (size_t)ev->n_pairs; p++)
                for (size_t i = 0; i < 2; i++)
                    c->col_coverage[((i * KR_CALIB_COLS + j) * NP + p) * H + h] =
                        n[0] ? (double)n[1 + 2 * p + i] / (double)n[0] : NAN;
        }
}

int kr_eval_calibrated_finish(kr_evaluation *ev, const kr_evaluate_request *req, const double *crps,
                              const double *pit, kr_error *err) {
    kr_eval_calibrated *c = ev->calibrated;
    if (!c) return 0;
    const size_t N = (size_t)ev->origins, P = (size_t)ev->horizon, H = P + 1;
    kr_calibration *f = &c->fitted;
    work w = {
        .N = ev->origins, .P = ev->horizon, .S = ev->samples, .G = f->n_grid, .grid = f->grid};
    tally t = {0};
    const bool rolling = req->calibration_mode == KR_CALIB_ROLLING;
    w.known = malloc(N * sizeof *w.known);
    w.ux = malloc(5 * N * sizeof *w.ux); /* ux, uw, us, fx, fy: N each */
    w.scratch = malloc(3 * N * sizeof *w.scratch);
    if (rolling) {
        w.sc = malloc(N * sizeof *w.sc);
        w.rank = malloc(N * sizeof *w.rank);
        w.tree = malloc((N + 1) * sizeof *w.tree);
        w.vals = malloc(N * sizeof *w.vals);
        w.shift = malloc(N * (size_t)w.G * sizeof *w.shift);
        w.p_cal = malloc(N * sizeof *w.p_cal);
    }
    t.sums = calloc(2 * H, sizeof *t.sums);
    t.crps_q = calloc(H, sizeof *t.crps_q);
    t.pit_raw = malloc(2 * N * P * sizeof *t.pit_raw);
    if (f->has_columns) t.col_covered = calloc(KR_CALIB_COLS * H * COL_TALLY, sizeof(long));
    int rc = -1;
    if (!w.known || !w.ux || !w.scratch || !t.sums || !t.crps_q || !t.pit_raw ||
        (f->has_columns && !t.col_covered) ||
        (rolling && (!w.sc || !w.rank || !w.tree || !w.vals || !w.shift || !w.p_cal))) {
        kr_fail_code(err, KR_E_NO_MEMORY, "evaluate: out of memory calibrating %d origins",
                     ev->origins);
        goto out;
    }
    w.uw = w.ux + N;
    w.us = w.ux + 2 * N;
    w.fx = w.ux + 3 * N;
    w.fy = w.ux + 4 * N;
    t.pit_cal = t.pit_raw + N * P;
    w.k0 = rolling ? first_scored(ev, req->calibration_warmup, w.known) : 0;
    c->first_scored = w.k0;
    c->scored = ev->origins - w.k0;
    for (size_t i = 0; i < N * P; i++)
        c->prob_close_up[i] = c->pit_at[i] = NAN;
    for (size_t i = 0; i < N * P * (size_t)ev->n_quantiles; i++)
        c->quantiles[i] = NAN;
    memset(c->pit, 0, sizeof c->pit);
    places pl;
    find_places(ev, f, &pl);
    if (f->has_columns) {
        column_actuals(ev, req);
        for (size_t i = 0; i < KR_CALIB_COLS * N * P * (size_t)ev->n_quantiles; i++)
            c->col_quantiles[i] = NAN;
    }
    rc = 0;
    for (int h = 0; rc == 0 && h < ev->horizon; h++)
        rc = one_step(ev, req, &w, &pl, &t, h, crps, pit, err);
    if (rc == 0) write_out(ev, &t, pit);
    if (rc == 0 && f->has_columns) column_coverage(ev, &t);
out:
    free(w.scratch);
    work_free(&w, &t);
    return rc;
}
