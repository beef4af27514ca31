/* calib_math.c — the arithmetic of calibration, each piece on its own so that the tests
 * check it on hand-computed cases: a level's conformal rank and shift, a sorted sample's
 * quantile grid, the rearranged (sorted) calibrated grid, the PIT within a grid, the
 * quantile-form CRPS, pool-adjacent-violators, its map and the distinct points it is fitted
 * on, the KS distance from uniform, and the binary searches they share.
 * kronos.h (kr_calibration) states the rules these implement. */
#include "evaluate_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kr_conformal_rank(int n, double tau) {
    /* (n + 1) tau rounded to 9 decimals, so that 100 x 0.9 = 90.00000000000001 is 90 */
    const double x = round((n + 1) * tau * 1e9) / 1e9;
    int k = tau < 0.5 ? (int)floor(x) : (int)ceil(x);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return k;
}

double kr_quantile_linear(const double *sorted, int n, double tau) {
    /* numpy's default rule, as the forecast's own quantiles (core/forecast/summary.c) */
    const double pos = tau * (n - 1);
    const int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void kr_calib_shifted(const double *raw, int G, double last, const double *shift, double *out) {
    for (int g = 0; g < G; g++)
        out[g] = raw[g] + last * shift[g];
    /* monotone rearrangement: the grid's values sorted, levels kept in place; nearly
     * always already sorted, so an insertion sort */
    for (int g = 1; g < G; g++) {
        const double v = out[g];
        int i = g;
        while (i > 0 && out[i - 1] > v) {
            out[i] = out[i - 1];
            i--;
        }
        out[i] = v;
    }
}

int kr_lower_bound(const double *a, int n, double v) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int kr_upper_bound(const double *a, int n, double v) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (a[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int kr_up_points_add(double *ux, double *uw, double *us, int n, int cap, double x, double up) {
    const int at = kr_lower_bound(ux, n, x);
    if (at == n || ux[at] != x) {
        if (n == cap) return n;
        memmove(ux + at + 1, ux + at, (size_t)(n - at) * sizeof *ux);
        memmove(uw + at + 1, uw + at, (size_t)(n - at) * sizeof *uw);
        memmove(us + at + 1, us + at, (size_t)(n - at) * sizeof *us);
        ux[at] = x;
        uw[at] = us[at] = 0;
        n++;
    }
    uw[at] += 1;
    us[at] += up;
    return n;
}

double kr_pit_in_grid(const double *q, const double *levels, int G, double y) {
    if (y < q[0]) return levels[0] / 2;
    if (y > q[G - 1]) return (1 + levels[G - 1]) / 2;
    const int lo = kr_lower_bound(q, G, y);
    if (q[lo] == y) { /* a run of equal quantiles: its middle level */
        int end = lo;
        while (end + 1 < G && q[end + 1] == y)
            end++;
        return (levels[lo] + levels[end]) / 2;
    }
    /* q[lo - 1] < y < q[lo] */
    const double t = (y - q[lo - 1]) / (q[lo] - q[lo - 1]);
    return levels[lo - 1] + (levels[lo] - levels[lo - 1]) * t;
}

double kr_crps_quantile(const double *q, const double *levels, int G, double y) {
    double sum = 0;
    for (int g = 0; g < G; g++) {
        const double d = y - q[g], tau = levels[g];
        sum += d >= 0 ? tau * d : (tau - 1) * d;
    }
    return 2 * sum / G;
}

int kr_pav(const double *w, const double *sum_y, int n, double *fit, double *scratch) {
    /* blocks on a stack: scratch holds [n] weights, [n] sums and, in fit, each block's end */
    double *bw = scratch, *bs = scratch + n;
    int *end = (int *)(scratch + 2 * n), nb = 0;
    for (int i = 0; i < n; i++) {
        bw[nb] = w[i];
        bs[nb] = sum_y[i];
        end[nb] = i;
        nb++;
        /* merge while the block before has a higher mean (cross-multiplied: weights > 0) */
        while (nb > 1 && bs[nb - 2] * bw[nb - 1] > bs[nb - 1] * bw[nb - 2]) {
            bw[nb - 2] += bw[nb - 1];
            bs[nb - 2] += bs[nb - 1];
            end[nb - 2] = end[nb - 1];
            nb--;
        }
    }
    for (int b = 0, i = 0; b < nb; b++)
        for (; i <= end[b]; i++)
            fit[i] = bs[b] / bw[b];
    return nb;
}

double kr_isotonic_at(const double *x, const double *y, int n, double p) {
    if (n < 1) return p;
    if (p <= x[0]) return y[0];
    if (p >= x[n - 1]) return y[n - 1];
    int lo = 0, hi = n - 1; /* x[lo] < p < x[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    if (x[lo] == p) return y[lo];
    return y[lo] + (y[hi] - y[lo]) * (p - x[lo]) / (x[hi] - x[lo]);
}

int kr_isotonic_fit(const double *x, const double *w, const double *sum_y, int n, double *out_x,
                    double *out_y, double *scratch) {
    double total = 0;
    for (int i = 0; i < n; i++)
        total += w[i];
    kr_pav(w, sum_y, n, out_y, scratch);
    const double lo = 1 / (total + 2), hi = (total + 1) / (total + 2);
    for (int i = 0; i < n; i++) {
        out_x[i] = x[i];
        out_y[i] = out_y[i] < lo ? lo : out_y[i] > hi ? hi : out_y[i];
    }
    return n;
}

double kr_ks_uniform(double *u, int n) {
    if (n < 1) return NAN;
    qsort(u, (size_t)n, sizeof *u, cmp_double);
    double d = 0;
    for (int i = 0; i < n; i++) {
        const double above = (i + 1.0) / n - u[i], below = u[i] - (double)i / n;
        if (above > d) d = above;
        if (below > d) d = below;
    }
    return d;
}
