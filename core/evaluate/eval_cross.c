/* eval_cross.c — cross-sectional scores of many series evaluated at the same origin times
 * (kr_cross_section in kronos.h): the alignment rule, checked before any model work, and
 * per origin and step the Pearson IC, the Spearman RankIC, the hit rate and the top-k minus
 * bottom-k spread of realised returns across the series, then their summaries over origins. */
#include "evaluate_impl.h"
#include "base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- alignment ------------------------------------------------------------------------------ */

static int default_k(int n) {
    return n / 5 > 1 ? n / 5 : 1;
}

/* Series i against series 0 at origin k: the same timestamps over [o - 1, o + horizon). */
static int check_origin(const kr_evaluate_request *reqs, const kr_evaluate_plan *plans, int i,
                        int k, kr_error *err) {
    const int o0 = plans[0].first_origin + k * plans[0].stride;
    const int oi = plans[i].first_origin + k * plans[i].stride;
    const int64_t *t0 = reqs[0].candles.timestamps, *ti = reqs[i].candles.timestamps;
    for (int d = -1; d < reqs[i].horizon; d++)
        if (ti[oi + d] != t0[o0 + d])
            return kr_fail_code(err, KR_E_INVALID,
                                "series[%d].candles.timestamps[%d]: %lld, where series[0] has "
                                "%lld (its candles[%d]), among the candles of origin %d "
                                "(number %d of %d); every series must give the same origins at "
                                "the same timestamps (the last candle before each origin and the "
                                "horizon candles after it)",
                                i, oi + d, (long long)ti[oi + d], (long long)t0[o0 + d], o0 + d, oi,
                                k + 1, plans[0].origins);
    if (reqs[i].candles.columns[KR_CLOSE][oi - 1] == 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "series[%d].candles.close[%d]: 0 is the last close before origin %d; "
                            "a return needs it non-zero",
                            i, oi - 1, oi);
    return 0;
}

int kr_cross_section_check(const kr_evaluate_request *reqs, const kr_evaluate_plan *plans, int n,
                           int top_k, kr_error *err) {
    if (n < 2)
        return kr_fail_code(err, KR_E_INVALID,
                            "series: cross-sectional scores need at least 2 series, got %d", n);
    if (top_k < 0 || top_k > n / 2)
        return kr_fail_code(err, KR_E_INVALID,
                            "cross_section.top_k: must be an integer in 1..%d (half of the %d "
                            "series, so that the top and the bottom do not overlap), got %d",
                            n / 2, n, top_k);
    for (int i = 0; i < n; i++) {
        if (reqs[i].horizon != reqs[0].horizon)
            return kr_fail_code(err, KR_E_INVALID, "series[%d]: horizon %d, where series[0] has %d",
                                i, reqs[i].horizon, reqs[0].horizon);
        if (plans[i].origins != plans[0].origins)
            return kr_fail_code(err, KR_E_INVALID,
                                "series[%d]: %d origins, where series[0] has %d; every series "
                                "must give the same origins at the same timestamps (the same "
                                "candles' timestamps over the evaluated range)",
                                i, plans[i].origins, plans[0].origins);
        for (int k = 0; k < plans[0].origins; k++)
            if (check_origin(reqs, plans, i, k, err)) return -1;
    }
    return 0;
}

/* ---- one origin and step -------------------------------------------------------------------- */

typedef kr_keyed keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* x[n] ordered ascending, ties by index, into order[n]. */
static void sort_keyed(const double *x, int n, keyed *order) {
    for (int i = 0; i < n; i++)
        order[i] = (keyed){x[i], i};
    qsort(order, (size_t)n, sizeof *order, cmp_keyed);
}

void kr_average_ranks(const double *x, int n, kr_keyed *order, double *rank) {
    sort_keyed(x, n, order);
    for (int a = 0; a < n;) {
        int b = a + 1;
        while (b < n && order[b].v == order[a].v)
            b++;
        const double r = (a + 1 + b) / 2.0; /* the mean of ranks a + 1 .. b */
        for (int c = a; c < b; c++)
            rank[order[c].i] = r;
        a = b;
    }
}

static bool constant(const double *x, int n) {
    for (int i = 1; i < n; i++)
        if (x[i] != x[0]) return false;
    return true;
}

double kr_pearson(const double *x, const double *y, int n) {
    if (n < 2 || constant(x, n) || constant(y, n)) return NAN;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / sqrt(sxx * syy);
}

/* ---- the scores ----------------------------------------------------------------------------- */

void kr_cross_section_free(kr_cross_section *cs) {
    if (!cs) return;
    free(cs->ic); /* and the rest of scores_layout's */
    memset(cs, 0, sizeof *cs);
}

/* The scores' arrays, one allocation headed by ic (kr_carve's layout; base NULL: only the
 * size is summed): per origin and step, then per step and over all. */
static size_t scores_layout(kr_cross_section *cs, char *base) {
    const size_t NP = (size_t)cs->origins * cs->horizon, H = (size_t)cs->horizon + 1;
    double **per[] = {&cs->ic, &cs->rank_ic, &cs->hit, &cs->spread};
    double **sum[] = {&cs->ic_mean,     &cs->ic_std,     &cs->ic_ir,    &cs->rank_ic_mean,
                      &cs->rank_ic_std, &cs->rank_ic_ir, &cs->hit_rate, &cs->top_bottom_spread};
    size_t at = 0;
    for (size_t i = 0; i < sizeof per / sizeof *per; i++)
        at = kr_carve(base, at, (void **)per[i], (NP ? NP : 1) * sizeof(double));
    for (size_t i = 0; i < sizeof sum / sizeof *sum; i++)
        at = kr_carve(base, at, (void **)sum[i], H * sizeof(double));
    at = kr_carve(base, at, (void **)&cs->ic_count, H * sizeof(int));
    return kr_carve(base, at, (void **)&cs->rank_ic_count, H * sizeof(int));
}

/* The scores' arrays, the counts zeroed. */
static int alloc_scores(kr_cross_section *cs) {
    char *mem = calloc(1, scores_layout(cs, NULL));
    if (!mem) return -1;
    scores_layout(cs, mem);
    return 0;
}

static int sign(double x) {
    return (x > 0) - (x < 0);
}

/* Origin k, step h: the four scores across the series. */
static void score_one(const kr_evaluation *evs, kr_cross_section *cs, int k, int h, double *fr,
                      double *ar, double *rf, double *ra, keyed *order) {
    const int n = cs->series, P = cs->horizon, K = cs->top_k;
    const size_t at = (size_t)k * P + h;
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const double last = evs[i].last_close[k];
        fr[i] = evs[i].mean[at] / last - 1.0;
        ar[i] = evs[i].actual[at] / last - 1.0;
        hits += sign(fr[i]) == sign(ar[i]);
    }
    cs->ic[at] = kr_pearson(fr, ar, n);
    kr_average_ranks(fr, n, order, rf);
    kr_average_ranks(ar, n, order, ra);
    cs->rank_ic[at] = kr_pearson(rf, ra, n); /* ranks are constant where the values are */
    cs->hit[at] = (double)hits / n;
    sort_keyed(fr, n, order);
    double top = 0, bottom = 0;
    for (int j = 0; j < K; j++) {
        bottom += ar[order[j].i];
        top += ar[order[n - 1 - j].i];
    }
    cs->spread[at] = (top - bottom) / K;
}

/* Mean, sample sd and IR of the defined values of x at steps [h0, h1) of every origin. */
static void summarise(const kr_cross_section *cs, const double *x, int h0, int h1, double *mean,
                      double *sd, double *ir, int *count) {
    const int P = cs->horizon;
    double sum = 0, sq = 0;
    int n = 0;
    for (int k = 0; k < cs->origins; k++)
        for (int h = h0; h < h1; h++)
            if (!isnan(x[(size_t)k * P + h])) {
                sum += x[(size_t)k * P + h];
                n++;
            }
    const double m = n ? sum / n : NAN;
    for (int k = 0; k < cs->origins; k++)
        for (int h = h0; h < h1; h++)
            if (!isnan(x[(size_t)k * P + h]))
                sq += (x[(size_t)k * P + h] - m) * (x[(size_t)k * P + h] - m);
    *mean = m;
    if (sd) *sd = n > 1 ? sqrt(sq / (n - 1)) : NAN;
    if (ir) *ir = sd && *sd > 0 ? m / *sd : NAN;
    if (count) *count = n;
}

int kr_cross_section_score(const kr_evaluation *evs, int n, int top_k, kr_cross_section *cs,
                           kr_error *err) {
    memset(cs, 0, sizeof *cs);
    if (n < 2)
        return kr_fail_code(err, KR_E_INVALID,
                            "series: cross-sectional scores need at least 2 series, got %d", n);
    const int k_used = top_k ? top_k : default_k(n);
    if (k_used < 1 || k_used > n / 2)
        return kr_fail_code(err, KR_E_INVALID,
                            "cross_section.top_k: must be an integer in 1..%d, got %d", n / 2,
                            top_k);
    for (int i = 1; i < n; i++)
        if (evs[i].origins != evs[0].origins || evs[i].horizon != evs[0].horizon)
            return kr_fail(err,
                           "cross_section: series[%d]'s %d origins x %d steps differ from "
                           "series[0]'s %d x %d",
                           i, evs[i].origins, evs[i].horizon, evs[0].origins, evs[0].horizon);
    cs->series = n;
    cs->origins = evs[0].origins;
    cs->horizon = evs[0].horizon;
    cs->top_k = k_used;
    double *work = malloc(4 * (size_t)n * sizeof(double));
    keyed *order = malloc((size_t)n * sizeof *order);
    if (!work || !order || alloc_scores(cs)) {
        free(work);
        free(order);
        kr_cross_section_free(cs);
        return kr_fail_code(err, KR_E_NO_MEMORY, "cross_section: out of memory for %d series", n);
    }
    const int P = cs->horizon;
    for (int k = 0; k < cs->origins; k++)
        for (int h = 0; h < P; h++)
            score_one(evs, cs, k, h, work, work + n, work + 2 * n, work + 3 * n, order);
    free(work);
    free(order);
    for (int h = 0; h <= P; h++) { /* each step, then (h == P) every step */
        const int h0 = h < P ? h : 0, h1 = h < P ? h + 1 : P;
        summarise(cs, cs->ic, h0, h1, &cs->ic_mean[h], &cs->ic_std[h], &cs->ic_ir[h],
                  &cs->ic_count[h]);
        summarise(cs, cs->rank_ic, h0, h1, &cs->rank_ic_mean[h], &cs->rank_ic_std[h],
                  &cs->rank_ic_ir[h], &cs->rank_ic_count[h]);
        summarise(cs, cs->hit, h0, h1, &cs->hit_rate[h], NULL, NULL, NULL);
        summarise(cs, cs->spread, h0, h1, &cs->top_bottom_spread[h], NULL, NULL, NULL);
    }
    return 0;
}
