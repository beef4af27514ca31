/* plan.c — the forecast request contract: every rule a request must meet, checked once,
 * and what the request will cost (the window of each step, pool bytes, compute); a request's
 * defaults. The server, the one-shot command and the forecast itself all go through here. */
#include "cache.h"
#include "forecast_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr_forecast_request_init(kr_forecast_request *req) {
    memset(req, 0, sizeof *req);
    req->samples = 1;
    req->sampling.temperature = 1.0;
    req->sampling.top_k = 0;
    req->sampling.top_p = 0.9;
    req->use_cache = true;
}

/* The shortest decimal that reads back as x, as the answer's quantile keys are written. */
static void shortest(double x, char *buf, size_t n) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

static int check_request(const kr_model *m, const kr_forecast_request *r, kr_error *err) {
    const kr_candles *cd = &r->context;
    if (cd->n < 2)
        return kr_fail_code(err, KR_E_INVALID, "candles: at least 2 candles are required, got %d",
                            cd->n);
    if (!cd->timestamps) return kr_fail_code(err, KR_E_INVALID, "candles.timestamps: missing");
    if (kr_check_columns(cd, err) || kr_check_normalisation(&r->norm, err) ||
        kr_check_increasing(cd->timestamps, cd->n, "candles.timestamps", err))
        return -1;
    if (r->horizon < 1)
        return kr_fail_code(err, KR_E_INVALID, "horizon: must be an integer >= 1, got %d",
                            r->horizon);
    if (r->future_timestamps) {
        if (r->future_timestamps[0] <= cd->timestamps[cd->n - 1])
            return kr_fail_code(err, KR_E_INVALID,
                                "future_timestamps[0]: not after the last candle's timestamp");
        if (kr_check_increasing(r->future_timestamps, r->horizon, "future_timestamps", err))
            return -1;
    }
    if (r->samples < 1)
        return kr_fail_code(err, KR_E_INVALID, "samples: must be an integer >= 1, got %d",
                            r->samples);
    if (kr_sampling_check(&r->sampling, err)) return -1;
    if (r->max_context < 0 || r->max_context > m->max_context)
        return kr_fail_code(err, KR_E_INVALID,
                            "max_context: must be in [1, %d] (the model's), got %d", m->max_context,
                            r->max_context);
    /* the forecast rows are the last P of a decoded window of at most max_context tokens */
    int mc = r->max_context ? r->max_context : m->max_context;
    if (r->horizon > mc)
        return kr_fail_code(err, KR_E_TOO_LARGE,
                            "horizon: %d exceeds max_context %d; the forecast is decoded from the "
                            "last max_context tokens, so it holds at most that many rows",
                            r->horizon, mc);
    if (r->n_quantiles < 0 || r->n_quantiles > KR_MAX_QUANTILES)
        return kr_fail_code(err, KR_E_INVALID, "quantiles: at most %d levels", KR_MAX_QUANTILES);
    for (int q = 0; q < r->n_quantiles; q++) {
        char v[32];
        shortest(r->quantiles[q], v, sizeof v);
        if (!(r->quantiles[q] >= 0.0 && r->quantiles[q] <= 1.0))
            return kr_fail_code(err, KR_E_INVALID, "quantiles[%d]: must be in [0, 1], got %s", q,
                                v);
        /* each level is one key of the answer */
        for (int p = 0; p < q; p++)
            if (r->quantiles[p] == r->quantiles[q])
                return kr_fail_code(err, KR_E_INVALID, "quantiles[%d]: %s is already quantiles[%d]",
                                    q, v, p);
    }
    return 0;
}

/* Pool bytes a forecast needs at most: the shared prefix of its largest window (w
 * positions) plus, per path, its own positions and one copied block. */
static size_t pool_bytes(const kr_model *m, int w, int P, int samples) {
    int own = P < w ? P : w;
    size_t blocks = (size_t)(w + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN +
                    (size_t)samples * ((own + KR_BLOCK_LEN - 1) / KR_BLOCK_LEN + 1) + 1;
    return blocks * kr_pool_bytes_for(m, KR_BLOCK_LEN);
}

/* FLOPs of the products for `rows` rows attending over `keys` keys each, in one transformer
 * of n layers: 2 per weight per row, plus q.k and p.v. */
double kr_stack_flops(double rows, double keys, int n, int d, int ff) {
    return rows * n * (2.0 * (4.0 * d * d + 3.0 * d * ff) + 4.0 * keys * d);
}
#define stack_flops kr_stack_flops

double kr_tokenizer_cost_rows(const kr_model *m, int layers, int pos, int n) {
    const kr_tokenizer_config *t = &m->tc;
    const kr_predictor_config *p = &m->pc;
    const double row = stack_flops(1, 0, p->n_layers, p->d_model, p->ff_dim);
    /* the rows attend over pos + 1 .. pos + n keys: pos + (n + 1) / 2 on average; attention
     * counted twice, as it runs at about half the products' rate (its softmax, its keys and
     * values read per tile of rows: a long context's encode is mostly attention) */
    const double products = stack_flops(n, 0, layers, t->d_model, t->ff_dim);
    const double attention =
        stack_flops(n, pos + (n + 1) / 2.0, layers, t->d_model, t->ff_dim) - products;
    return (products + 2 * attention) / row;
}

int kr_tokenizer_fit(const kr_model *m, int layers, int pos, int left, double rows) {
    int lo = 1, hi = left; /* the cost grows with n: the most that fits, at least one */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (kr_tokenizer_cost_rows(m, layers, pos, mid) <= rows)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

double kr_encode_cost_rows(const kr_model *m, int pos, int n) {
    return kr_tokenizer_cost_rows(m, m->tok.n_enc, pos, n);
}

int kr_encode_fit(const kr_model *m, int pos, int left, double rows) {
    return kr_tokenizer_fit(m, m->tok.n_enc, pos, left, rows);
}

int kr_forecast_window(const kr_forecast_plan *plan, int L, int i, int *start) {
    int n = L + i, w = n < plan->max_context ? n : plan->max_context;
    if (start) *start = n - w;
    return w;
}

int kr_forecast_plan_make(const kr_model *m, const kr_forecast_request *r, kr_forecast_plan *plan,
                          kr_error *err) {
    if (check_request(m, r, err)) return -1;
    int L = r->context.n, P = r->horizon, S = r->samples;
    if ((size_t)S * (size_t)(L + P) > (size_t)1 << 31)
        return kr_fail_code(err, KR_E_TOO_LARGE, "samples: %d paths of %d tokens is too many", S,
                            L + P);
    plan->max_context = r->max_context ? r->max_context : m->max_context;
    int mc = plan->max_context, slid = L + P - 1 > mc ? L + P - 1 - mc : 0;
    if (slid > P - 1) slid = P - 1;
    plan->recomputed_steps = r->use_cache ? slid : P;
    plan->cached_steps = P - plan->recomputed_steps;
    int w = L + P < mc ? L + P : mc;
    plan->pool_bytes = r->use_cache ? pool_bytes(m, w, P, S) : 0;
    /* predictor: the context once, a row per path and step, the slid windows again; the
     * tokenizer: the context encoded, each path's last window decoded */
    const kr_predictor_config *pc = &m->pc;
    const kr_tokenizer_config *tc = &m->tc;
    double pred = stack_flops(L, w, pc->n_layers, pc->d_model, pc->ff_dim) +
                  stack_flops((double)S * P, w, pc->n_layers, pc->d_model, pc->ff_dim) +
                  stack_flops((double)S * plan->recomputed_steps * w, w, pc->n_layers, pc->d_model,
                              pc->ff_dim);
    double tok = stack_flops(L + (double)S * w, w, tc->n_enc_layers + tc->n_dec_layers - 2,
                             tc->d_model, tc->ff_dim);
    plan->flops = pred + tok;
    return 0;
}
