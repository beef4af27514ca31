/* calib_online.c — online calibration of a live series (kr_calib_online, kronos.h): the
 * forecasts kept until their candles arrive, each outcome resolved (PIT, coverage, P(up)),
 * the conformal scores of a window per step and level, adaptive conformal inference of each
 * level, and the current object those give. The arithmetic is calib_math.c's. */
#include "evaluate_impl.h"
#include "base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long origin;
    int next;              /* the first step not yet resolved */
    double last;           /* the close before the forecast */
    double *raw, *shift;   /* [P][G]: the paths' grid, the shifts it was issued with */
    double *p_raw, *p_cal; /* [P] */
    unsigned char *aci;    /* [P]: issued past the warm-up (its outcome moves tau_t) */
} kept;

struct kr_calib_online {
    bool has_start, shaped;
    kr_calibration start, cur;
    int P, S, G, W;
    double *tau;           /* [P][G]: tau_t */
    int *count, *win_n;    /* [P]: outcomes seen, in the window */
    int *win_at;           /* [P]: the ring's next slot */
    double *ring, *sorted; /* [P][G][W]: scores by arrival, the same sorted */
    int *up_n;             /* [P]: distinct raw P(up) values seen */
    double *ux, *uw, *us;  /* [P][S + 1] */
    double *fit_scratch;   /* 3 (S + 1) */
    kept *kept;
    int n_kept, cap_kept;
    /* the running statistics */
    int n_pairs, pair_lo[KR_MAX_QUANTILES / 2], pair_hi[KR_MAX_QUANTILES / 2]; /* grid indexes */
    double pair_level_lo[KR_MAX_QUANTILES / 2], pair_level_hi[KR_MAX_QUANTILES / 2];
    long resolved, within[KR_MAX_QUANTILES / 2];
    double brier_sum;
    double *pits; /* [resolved], ascending */
    long pits_cap;
};

static void kept_free(kept *k) {
    free(k->raw);
    memset(k, 0, sizeof *k);
}

void kr_calib_online_free(kr_calib_online *o) {
    if (!o) return;
    for (int i = 0; i < o->n_kept; i++)
        kept_free(&o->kept[i]);
    free(o->kept);
    kr_calibration_free(&o->start);
    kr_calibration_free(&o->cur);
    free(o->tau); /* and the rest of state_layout's */
    free(o->pits);
    free(o);
}

/* The symmetric pairs of c's levels (lo + hi = 1), outermost first, as grid indexes. */
static void find_pairs(kr_calib_online *o) {
    const kr_calibration *c = &o->cur;
    o->n_pairs = 0;
    for (int i = 0; i < c->n_levels; i++)
        for (int j = 0; j < c->n_levels; j++) {
            const double lo = c->levels[i], hi = c->levels[j];
            if (!(lo < hi && fabs(lo + hi - 1.0) < 1e-9)) continue;
            int at = o->n_pairs++;
            while (at > 0 && o->pair_level_lo[at - 1] > lo) {
                o->pair_lo[at] = o->pair_lo[at - 1];
                o->pair_hi[at] = o->pair_hi[at - 1];
                o->pair_level_lo[at] = o->pair_level_lo[at - 1];
                o->pair_level_hi[at] = o->pair_level_hi[at - 1];
                at--;
            }
            o->pair_lo[at] = kr_calib_level_index(c, lo);
            o->pair_hi[at] = kr_calib_level_index(c, hi);
            o->pair_level_lo[at] = lo;
            o->pair_level_hi[at] = hi;
        }
}

/* The state's arrays, one allocation headed by tau (kr_carve's layout; base NULL: only the
 * size is summed). */
static size_t state_layout(kr_calib_online *o, char *base) {
    const size_t P = (size_t)o->P, G = (size_t)o->G, U = (size_t)o->S + 1, W = (size_t)o->W;
    size_t at = kr_carve(base, 0, (void **)&o->tau, P * G * sizeof *o->tau);
    at = kr_carve(base, at, (void **)&o->count, P * sizeof *o->count);
    at = kr_carve(base, at, (void **)&o->win_n, P * sizeof *o->win_n);
    at = kr_carve(base, at, (void **)&o->win_at, P * sizeof *o->win_at);
    at = kr_carve(base, at, (void **)&o->ring, P * G * W * sizeof *o->ring);
    at = kr_carve(base, at, (void **)&o->sorted, P * G * W * sizeof *o->sorted);
    at = kr_carve(base, at, (void **)&o->up_n, P * sizeof *o->up_n);
    at = kr_carve(base, at, (void **)&o->ux, P * U * sizeof *o->ux);
    at = kr_carve(base, at, (void **)&o->uw, P * U * sizeof *o->uw);
    at = kr_carve(base, at, (void **)&o->us, P * U * sizeof *o->us);
    return kr_carve(base, at, (void **)&o->fit_scratch, 3 * U * sizeof *o->fit_scratch);
}

/* The state's arrays for cur's shape (cur made already), zeroed: no outcome seen. */
static int shape(kr_calib_online *o, kr_error *err) {
    const kr_calibration *c = &o->cur;
    o->P = c->horizon;
    o->S = c->samples;
    o->G = c->n_grid;
    o->W = KR_ONLINE_WINDOW;
    const size_t P = (size_t)o->P, G = (size_t)o->G;
    char *mem = calloc(1, state_layout(o, NULL));
    if (!mem)
        return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory for %d steps", o->P);
    state_layout(o, mem);
    for (size_t h = 0; h < P; h++)
        for (size_t g = 0; g < G; g++)
            o->tau[h * G + g] = c->grid[g];
    find_pairs(o);
    o->shaped = true;
    return 0;
}

kr_calib_online *kr_calib_online_new(const kr_calibration *start, kr_error *err) {
    kr_calib_online *o = kr_zalloc(sizeof *o, err, "calibration: out of memory");
    if (!o) return NULL;
    if (!start) return o;
    o->has_start = true;
    if (kr_calibration_check(start, err) || kr_calibration_copy(&o->start, start, err) ||
        kr_calibration_init(&o->cur, start->model, start->horizon, start->samples, start->levels,
                            start->n_levels, err)) {
        kr_calib_online_free(o);
        return NULL;
    }
    /* the start's maps in an object with room for every P(up) point the steps can learn */
    kr_calibration *c = &o->cur;
    c->fitted = start->fitted;
    memcpy(c->shift, start->shift, (size_t)c->horizon * c->n_grid * sizeof *c->shift);
    for (int h = 0; h < c->horizon; h++) {
        c->up_n[h] = start->up_n[h];
        memcpy(c->up_x + (size_t)h * c->up_cap, start->up_x + (size_t)h * start->up_cap,
               (size_t)start->up_n[h] * sizeof *c->up_x);
        memcpy(c->up_y + (size_t)h * c->up_cap, start->up_y + (size_t)h * start->up_cap,
               (size_t)start->up_n[h] * sizeof *c->up_y);
    }
    if (shape(o, err)) {
        kr_calib_online_free(o);
        return NULL;
    }
    return o;
}

bool kr_calib_online_shaped(const kr_calib_online *o) {
    return o->shaped;
}

const kr_calibration *kr_calib_online_current(const kr_calib_online *o) {
    return o->shaped ? &o->cur : NULL;
}

int kr_calib_online_fit(kr_calib_online *o, const char *model, int horizon, int samples,
                        const double *levels, int n_levels, kr_error *err) {
    if (!o->shaped) {
        if (kr_calibration_init(&o->cur, model, horizon, samples, levels, n_levels, err)) return -1;
        o->cur.fitted = 1;
        return shape(o, err);
    }
    const kr_calibration *c = &o->cur;
    if (model && strcmp(c->model, model) != 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "calibration: this session's calibration is of model \"%s\"; this "
                            "model is \"%s\"",
                            c->model, model);
    if (horizon != c->horizon)
        return kr_fail_code(err, KR_E_INVALID,
                            "horizon: must be %d (this session's calibration forecasts %d steps), "
                            "got %d",
                            c->horizon, c->horizon, horizon);
    if (samples != c->samples)
        return kr_fail_code(err, KR_E_INVALID,
                            "samples: must be %d (this session's calibration's), got %d",
                            c->samples, samples);
    bool same = n_levels == c->n_levels;
    for (int q = 0; same && q < n_levels; q++)
        same = (float)levels[q] == (float)c->levels[q];
    if (!same)
        return kr_fail_code(err, KR_E_INVALID,
                            "quantiles: must be this session's calibration's %d levels (leave "
                            "quantiles out for them)",
                            c->n_levels);
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void kr_forecast_sorted_close(const kr_forecast_result *res, double *out) {
    const int P = res->horizon, S = res->samples;
    for (int h = 0; h < P; h++) {
        double *row = out + (size_t)h * S;
        for (int p = 0; p < S; p++)
            row[p] = res->paths[((size_t)p * KR_D_IN + KR_CLOSE) * P + h];
        qsort(row, (size_t)S, sizeof *row, cmp_double);
    }
}

int kr_calib_online_keep(kr_calib_online *o, long origin, double last_close, const double *sorted,
                         const double *p_up, kr_error *err) {
    if (!o->shaped) return kr_fail(err, "calibration: no forecast shape set");
    const int P = o->P, G = o->G;
    int at = -1;
    for (int i = 0; i < o->n_kept; i++)
        if (o->kept[i].origin == origin && o->kept[i].next == 0) at = i;
    if (at < 0 && o->n_kept == o->cap_kept) {
        const int cap = o->cap_kept ? 2 * o->cap_kept : 8;
        kept *grown = realloc(o->kept, (size_t)cap * sizeof *grown);
        if (!grown) return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
        o->kept = grown;
        o->cap_kept = cap;
    }
    kept k = {.origin = origin, .last = last_close};
    const size_t PG = (size_t)P * G;
    k.raw = malloc((2 * PG + 2 * (size_t)P) * sizeof *k.raw + (size_t)P);
    if (!k.raw) return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
    k.shift = k.raw + PG;
    k.p_raw = k.shift + PG;
    k.p_cal = k.p_raw + P;
    k.aci = (unsigned char *)(k.p_cal + P);
    double cal[KR_CALIB_MAX_GRID];
    for (int h = 0; h < P; h++) {
        kr_calib_step(&o->cur, h, sorted + (size_t)h * o->S, o->S, last_close, p_up[h],
                      k.raw + (size_t)h * G, cal, &k.p_cal[h]);
        memcpy(k.shift + (size_t)h * G, o->cur.shift + (size_t)h * G, (size_t)G * sizeof *k.shift);
        k.p_raw[h] = p_up[h];
        k.aci[h] = o->count[h] >= KR_ONLINE_WARMUP;
    }
    if (at >= 0) {
        kept_free(&o->kept[at]);
        o->kept[at] = k;
    } else {
        o->kept[o->n_kept++] = k;
    }
    return 0;
}

/* ---- an outcome ------------------------------------------------------------------------ */

/* v into the ascending a[n] (room for one more). */
static void sorted_insert(double *a, int n, double v) {
    const int lo = kr_upper_bound(a, n, v);
    memmove(a + lo + 1, a + lo, (size_t)(n - lo) * sizeof *a);
    a[lo] = v;
}

/* One value equal to v out of the ascending a[n]. */
static void sorted_remove(double *a, int n, double v) {
    const int lo = kr_lower_bound(a, n, v);
    if (lo < n) memmove(a + lo, a + lo + 1, (size_t)(n - lo - 1) * sizeof *a);
}

/* Step h's scores of one outcome into its window, and tau_t moved. */
static void learn_quantiles(kr_calib_online *o, const kept *k, int h, double y) {
    const int G = o->G, W = o->W;
    const double *raw = k->raw + (size_t)h * G, *shift = k->shift + (size_t)h * G;
    const int n = o->win_n[h], slot = o->win_at[h];
    for (int g = 0; g < G; g++) {
        double *ring = o->ring + ((size_t)h * G + g) * W,
               *srt = o->sorted + ((size_t)h * G + g) * W;
        const double e = (y - raw[g]) / k->last;
        if (n == W) sorted_remove(srt, n, ring[slot]);
        sorted_insert(srt, n == W ? W - 1 : n, e);
        ring[slot] = e;
        if (k->aci[h]) {
            const double issued = raw[g] + k->last * shift[g];
            o->tau[(size_t)h * G + g] += KR_ONLINE_GAMMA * (o->cur.grid[g] - (y <= issued));
        }
    }
    o->win_n[h] = n < W ? n + 1 : W;
    o->win_at[h] = (slot + 1) % W;
    o->count[h]++;
}

/* One P(up) outcome among the distinct raw values of step h (at most samples + 1). */
static void learn_up(kr_calib_online *o, int h, double x, double up) {
    const size_t U = (size_t)o->S + 1;
    /* a value that is not a share of the paths finds no room (U): left out */
    o->up_n[h] =
        kr_up_points_add(o->ux + h * U, o->uw + h * U, o->us + h * U, o->up_n[h], (int)U, x, up);
}

/* Step h of the current object from what it has seen. */
static void refit_step(kr_calib_online *o, int h) {
    kr_calibration *c = &o->cur;
    const int G = o->G, n = o->win_n[h];
    const size_t U = (size_t)o->S + 1;
    if (o->count[h] < KR_ONLINE_WARMUP) return; /* the starting object's, as made */
    for (int g = 0; g < G; g++) {
        const double *srt = o->sorted + ((size_t)h * G + g) * o->W;
        c->shift[(size_t)h * G + g] = srt[kr_conformal_rank(n, o->tau[(size_t)h * G + g]) - 1];
    }
    c->up_n[h] = kr_isotonic_fit(o->ux + h * U, o->uw + h * U, o->us + h * U, o->up_n[h],
                                 c->up_x + h * (size_t)c->up_cap, c->up_y + h * (size_t)c->up_cap,
                                 o->fit_scratch);
    int least = o->count[0];
    for (int s = 1; s < o->P; s++)
        least = o->count[s] < least ? o->count[s] : least;
    c->fitted = least > 1 ? least : 1;
}

static int note_pit(kr_calib_online *o, double u, kr_error *err) {
    if (o->resolved == o->pits_cap) {
        const long cap = o->pits_cap ? 2 * o->pits_cap : 256;
        double *grown = realloc(o->pits, (size_t)cap * sizeof *grown);
        if (!grown) return kr_fail_code(err, KR_E_NO_MEMORY, "calibration: out of memory");
        o->pits = grown;
        o->pits_cap = cap;
    }
    sorted_insert(o->pits, (int)o->resolved, u);
    return 0;
}

/* Kept forecast k's step h resolved by close y. */
static int resolve_step(kr_calib_online *o, const kept *k, int h, double y, kr_online_outcome *out,
                        kr_error *err) {
    const int G = o->G;
    double cal[KR_CALIB_MAX_GRID];
    kr_calib_shifted(k->raw + (size_t)h * G, G, k->last, k->shift + (size_t)h * G, cal);
    const double u = kr_pit_in_grid(cal, o->cur.grid, G, y);
    if (note_pit(o, u, err)) return -1;
    unsigned outside = 0;
    for (int j = 0; j < o->n_pairs; j++) {
        const double lo = cal[o->pair_lo[j]], hi = cal[o->pair_hi[j]];
        if (lo <= y && y <= hi)
            o->within[j]++;
        else
            outside |= 1u << j;
    }
    const double up = y > k->last, d = k->p_cal[h] - up;
    o->brier_sum += d * d;
    o->resolved++;
    if (!out->covered || h < out->step) *out = (kr_online_outcome){true, h, u, outside};
    learn_quantiles(o, k, h, y);
    learn_up(o, h, k->p_raw[h], up);
    refit_step(o, h);
    return 0;
}

int kr_calib_online_resolve(kr_calib_online *o, long index, double close, kr_online_outcome *out,
                            kr_error *err) {
    *out = (kr_online_outcome){0};
    if (!o->shaped) return 0;
    int live = 0;
    for (int i = 0; i < o->n_kept; i++) {
        kept *k = &o->kept[i];
        if (k->origin + k->next == index) {
            if (resolve_step(o, k, k->next, close, out, err)) return -1;
            k->next++;
        }
        if (k->next >= o->P || k->origin + k->next < index) { /* done, or passed by */
            kept_free(k);
            continue;
        }
        o->kept[live++] = *k;
    }
    o->n_kept = live;
    return 0;
}

void kr_calib_online_stats_get(const kr_calib_online *o, kr_calib_online_stats *st) {
    memset(st, 0, sizeof *st);
    st->shaped = o->shaped;
    st->resolved = o->resolved;
    st->n_pairs = o->n_pairs;
    for (int j = 0; j < o->n_pairs; j++) {
        st->pair_lo[j] = o->pair_level_lo[j];
        st->pair_hi[j] = o->pair_level_hi[j];
        st->coverage[j] = o->resolved ? (double)o->within[j] / (double)o->resolved : NAN;
    }
    st->pit_ks = NAN;
    if (o->resolved) { /* the PITs are kept ascending: the KS distance in one pass */
        double d = 0;
        const long n = o->resolved;
        for (long i = 0; i < n; i++) {
            const double above = (i + 1.0) / n - o->pits[i], below = o->pits[i] - (double)i / n;
            d = above > d ? above : d;
            d = below > d ? below : d;
        }
        st->pit_ks = d;
    }
    st->brier = o->resolved ? o->brier_sum / (double)o->resolved : NAN;
    size_t b = sizeof *o + (size_t)o->pits_cap * sizeof(double);
    if (o->shaped) {
        const size_t P = (size_t)o->P, G = (size_t)o->G, U = (size_t)o->S + 1;
        b += P * G * (2 * (size_t)o->W + 1) * sizeof(double) + 3 * P * U * sizeof(double) +
             (size_t)o->n_kept * (2 * P * G + 2 * P) * sizeof(double);
    }
    st->bytes = b;
}
