/* train_gemm.c — the three products of a linear layer in training (forward, input gradient,
 * weight gradient), each run on the inference kernels (kernels/matmul/) with its right-hand
 * operand packed for the call: every element one fused multiply-add chain in a fixed order, so
 * the bits depend neither on the thread count nor on the SIMD level. The packed buffers and
 * the transposed operand live in the model, kept between calls. */
#include "train_ops.h"

#include "matmul.h"
#include "parallel.h"

#include <stdlib.h>
#include <string.h>

#define PANEL 16 /* matmul.h's packed layout: [panel][in][16], the last panel zero-padded */
#define TILE  64 /* a transpose's item: TILE x TILE elements */

float *tr_grow(float **buf, size_t *cap, size_t n) {
    if (n > *cap) {
        free(*buf); /* the contents are not kept: no copy */
        *buf = malloc(n * sizeof(float));
        *cap = *buf ? n : 0;
    }
    return *buf;
}

typedef struct {
    float *out;
    const float *in;
    int rows, cols;
} tr_job;

/* out[c][r] = in[r][c] for rows [r0, r1) and columns [c0, c1) of in, in tiles of TILE rows */
static void transpose_tile(const tr_job *j, int r0, int r1, int c0, int c1) {
    for (int rt = r0; rt < r1; rt += TILE) {
        int re = rt + TILE < r1 ? rt + TILE : r1;
        for (int c = c0; c < c1; c++)
            for (int r = rt; r < re; r++)
                j->out[(size_t)c * j->rows + r] = j->in[(size_t)r * j->cols + c];
    }
}

#define KR_LANES_TEMPLATE "train_gemm_lanes.h"
#include "lanes.h"

KR_DISPATCH(transpose_block, (void *ctx, int item, int worker), (ctx, item, worker))

static void transpose(float *out, const float *in, int rows, int cols) {
    tr_job j = {out, in, rows, cols};
    kr_parallel_for((rows + TILE - 1) / TILE * ((cols + TILE - 1) / TILE), transpose_block, &j);
}

/* the packed form of A^T for A[rows][cols] (a "weight" of cols outputs over rows inputs):
 * panel p, input k holds A[k][16p .. 16p + 15], a contiguous run of A's row. An item is a
 * block of PACK_ROWS rows of A, read in order, into every panel (a panel an item read A's
 * column strip a row, a page, at a time). */
#define PACK_ROWS 64

static void pack_t_rows(void *ctx, int item, int worker) {
    (void)worker;
    const tr_job *j = ctx;
    int k0 = item * PACK_ROWS, k1 = k0 + PACK_ROWS < j->rows ? k0 + PACK_ROWS : j->rows;
    for (int c0 = 0; c0 < j->cols; c0 += PANEL) {
        int n = j->cols - c0 < PANEL ? j->cols - c0 : PANEL;
        float *dst = j->out + (size_t)c0 * j->rows;
        const float *src = j->in + c0;
        if (n == PANEL) /* a whole panel: a copy the compiler unrolls, not a call per 16 floats */
            for (int k = k0; k < k1; k++)
                for (int c = 0; c < PANEL; c++)
                    dst[(size_t)k * PANEL + c] = src[(size_t)k * j->cols + c];
        else
            for (int k = k0; k < k1; k++)
                for (int c = 0; c < PANEL; c++)
                    dst[(size_t)k * PANEL + c] = c < n ? src[(size_t)k * j->cols + c] : 0.0f;
    }
}

/* packs A^T (A [rows][cols]) into *buf; NULL when out of memory */
static float *pack_transposed(float **buf, size_t *cap, const float *A, int rows, int cols) {
    float *dst = tr_grow(buf, cap, kr_linear_packed_floats(cols, rows));
    if (!dst) return NULL;
    if (kr_linear_packed_floats(1, 1) == PANEL) {
        tr_job j = {dst, A, rows, cols};
        kr_parallel_for((rows + PACK_ROWS - 1) / PACK_ROWS, pack_t_rows, &j);
        return dst;
    }
    /* the kernels' panels changed width: the plain way, through a transposed copy */
    float *t = malloc((size_t)rows * cols * sizeof(float));
    if (!t) return NULL;
    transpose(t, A, rows, cols);
    kr_linear_pack(dst, t, cols, rows);
    free(t);
    return dst;
}

static void run(float *y, const float *x, int R, const float *wp, const float *b, int out, int in,
                bool add) {
    kr_linear l = {.w = NULL, .b = b, .out = out, .in = in, .wp = wp};
    if (add)
        kr_linear_forward_add(y, x, R, &l);
    else
        kr_linear_forward(y, x, R, &l);
}

int tr_linear_fwd(float *y, const float *x, int R, kr_train_model *m, const tr_linear *l) {
    float *wp = tr_grow(&m->pack, &m->pack_cap, kr_linear_packed_floats(l->out, l->in));
    if (!wp) return -1;
    kr_linear_pack(wp, TW(m, l->w), l->out, l->in);
    run(y, x, R, wp, l->b >= 0 ? TW(m, l->b) : NULL, l->out, l->in, false);
    return 0;
}

int tr_linear_dx(float *dx, const float *dy, int R, kr_train_model *m, const tr_linear *l,
                 bool add) {
    /* dx = dy W: a layer of in outputs over out inputs whose weights are W^T */
    const float *wp = pack_transposed(&m->pack, &m->pack_cap, TW(m, l->w), l->out, l->in);
    if (!wp) return -1;
    run(dx, dy, R, wp, NULL, l->in, l->out, add);
    return 0;
}

int tr_linear_dw(const float *dy, const float *x, int R, kr_train_model *m, const tr_linear *l) {
    if (!m->t[l->w].trains) return 0;
    /* dW[out][in] += dy^T x: rows dy^T [out][R] through a layer of in outputs over R inputs
     * whose weights are x^T */
    float *dyt = tr_grow(&m->trans, &m->trans_cap, (size_t)R * l->out);
    if (!dyt) return -1;
    const float *xp = m->xpack;
    if (m->xpack_of != x || m->xpack_rows != R || m->xpack_cols != l->in) {
        m->xpack_of = NULL;
        xp = pack_transposed(&m->xpack, &m->xpack_cap, x, R, l->in);
        if (!xp) return -1;
        m->xpack_of = x, m->xpack_rows = R, m->xpack_cols = l->in;
    }
    transpose(dyt, dy, R, l->out);
    run(TG(m, l->w), dyt, l->out, xp, NULL, l->in, R, true);
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
    return 0;
}

void tr_linear_dw_forget(kr_train_model *m) {
    m->xpack_of = NULL;
}
