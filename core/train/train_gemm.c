/* train_gemm.c — the three products of a linear layer in training (forward, input gradient,
 * weight gradient), each run on the inference kernels (kernels/matmul.c) with the weights
 * packed for the call: every element one fused multiply-add chain in a fixed order, so the
 * bits depend neither on the thread count nor on the SIMD level. */
#include "train_impl.h"

#include "matmul.h"

#include <stdlib.h>
#include <string.h>

/* out[c][r] = in[r][c] for in[rows][cols] */
static void transpose(float *out, const float *in, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}

/* y[R][out] (+)= x[R][in] W^T + b, W [out][in] packed for the call */
static int product(float *y, const float *x, int R, const float *W, const float *b, int out, int in,
                   bool add) {
    float *wp = malloc(kr_linear_packed_floats(out, in) * sizeof(float));
    if (!wp) return -1;
    kr_linear_pack(wp, W, out, in);
    kr_linear l = {.w = NULL, .b = b, .out = out, .in = in, .wp = wp};
    if (add)
        kr_linear_forward_add(y, x, R, &l);
    else
        kr_linear_forward(y, x, R, &l);
    free(wp);
    return 0;
}

int tr_linear_fwd(float *y, const float *x, int R, const kr_train_model *m, const tr_linear *l) {
    return product(y, x, R, TW(m, l->w), l->b >= 0 ? TW(m, l->b) : NULL, l->out, l->in, false);
}

int tr_linear_dx(float *dx, const float *dy, int R, const kr_train_model *m, const tr_linear *l,
                 bool add) {
    float *wt = malloc((size_t)l->out * l->in * sizeof(float));
    if (!wt) return -1;
    transpose(wt, TW(m, l->w), l->out, l->in); /* [in][out]: dx = dy (W^T)^T */
    int rc = product(dx, dy, R, wt, NULL, l->in, l->out, add);
    free(wt);
    return rc;
}

int tr_linear_dw(const float *dy, const float *x, int R, kr_train_model *m, const tr_linear *l) {
    if (!m->t[l->w].trains) return 0;
    float *dyt = malloc((size_t)R * l->out * sizeof(float));
    float *xt = malloc((size_t)R * l->in * sizeof(float));
    int rc = -1;
    if (!dyt || !xt) goto out;
    transpose(dyt, dy, R, l->out); /* [out][R] */
    transpose(xt, x, R, l->in);    /* [in][R]: the "weights" of the product over rows */
    if (product(TG(m, l->w), dyt, l->out, xt, NULL, l->in, R, true)) goto out;
    if (l->b >= 0) {
        float *db = TG(m, l->b);
        for (int o = 0; o < l->out; o++) {
            const float *col = dyt + (size_t)o * R;
            float s = 0.0f;
            for (int r = 0; r < R; r++)
                s += col[r];
            db[o] += s;
        }
    }
    rc = 0;
out:
    free(dyt);
    free(xt);
    return rc;
}
