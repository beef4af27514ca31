/* nn.c — RMSNorm, RoPE, SwiGLU and the transformer block.
 *
 * Everything is float32 on row-major [T][d] arrays, the way upstream computes it; the
 * products are matmul.c's, attention is attention.c's.
 */
#include "nn.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KEY_GROUP 16 /* keys a transposed store writes at once: one cache line a dimension */

/* One row's sum of squares is one chain of double adds over i in order; eight rows go
 * side by side, one vector lane each, so that eight chains are in flight instead of one
 * waiting on the latency of each add (the same sums, the same bits). Eight elements of
 * each row are loaded at a time and transposed, so that element i of the eight rows is one
 * vector (sum_squares8 in nn_lanes.h; the baseline level keeps eight scalar chains). A last
 * group of 2-7 rows (30 paths: 6) runs as eight too, its last row repeated. */
#define NORM_ROWS 8
_Static_assert(NORM_ROWS == 8, "sum_squares8 transposes eight rows by eight elements");

/* Epilogues of the block's products (matmul.h): the row-wise steps that need only the columns
 * a product's task wrote, done by that task while they are in its cache, instead of passes of
 * their own over the rows on the calling thread. */
typedef struct {
    float *h1;
    const float *h3;
    int ff;
} swiglu_ctx;

/* ---- the hot loops, built per instruction set ------------------------------------------- */

#define KR_LANES_TEMPLATE "nn_lanes.h"
#include "lanes.h"

KR_DISPATCH(sum_squares8, (double *ss, const float *const *xk, int d8), (ss, xk, d8))
KR_DISPATCH(rope_heads, (float *x, int n_heads, int hd, const float *cs), (x, n_heads, hd, cs))
KR_DISPATCH(put_keys16, (const kr_kv_view *kv, int layer, int pos, const float *krows, int d),
            (kv, layer, pos, krows, d))
KR_DISPATCH(swiglu, (void *arg, int r0, int r1, int c0, int c1), (arg, r0, r1, c0, c1))

/* ---- RMSNorm, RoPE ---------------------------------------------------------------------- */

void kr_rmsnorm(float *out, const float *x, const float *w, int rows, int d) {
    for (int r0 = 0; r0 < rows; r0 += NORM_ROWS) {
        int n = rows - r0 < NORM_ROWS ? rows - r0 : NORM_ROWS;
        double ss[NORM_ROWS] = {0};
        const float *x0 = x + (size_t)r0 * d, *xk[NORM_ROWS];
        for (int k = 0; k < NORM_ROWS; k++) /* a last group of fewer rows repeats its last */
            xk[k] = x0 + (size_t)(k < n ? k : n - 1) * d;
        if (n > 1) {
            int d8 = d / 8 * 8;
            sum_squares8(ss, xk, d8);
            for (int i = d8; i < d; i++)
                for (int k = 0; k < NORM_ROWS; k++)
                    ss[k] += (double)xk[k][i] * xk[k][i];
        } else {
            for (int i = 0; i < d; i++)
                ss[0] += (double)x0[i] * x0[i];
        }
        for (int k = 0; k < n; k++) {
            const float *xr = x0 + (size_t)k * d;
            float *yr = out + (size_t)(r0 + k) * d;
            float scale = (float)(1.0 / sqrt(ss[k] / d + 1e-5));
            for (int i = 0; i < d; i++)
                yr[i] = xr[i] * scale * w[i];
        }
    }
}

/* torch forms the angle as a float32 product, then takes cos/sin of it */
static void rope_angle(int pos, float inv_freq, float *c, float *s) {
    float angle = (float)pos * inv_freq;
    *c = (float)cos((double)angle);
    *s = (float)sin((double)angle);
}

static void rotate(float *x, int n_heads, int hd, int j, float c, float s) {
    int half = hd / 2;
    for (int h = 0; h < n_heads; h++) {
        float *xh = x + (size_t)h * hd;
        float a = xh[j], b = xh[j + half];
        xh[j] = a * c - b * s;
        xh[j + half] = b * c + a * s;
    }
}

void kr_rope(float *x, int T, int stride, int n_heads, int hd, int pos0, const float *inv_freq) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < hd / 2; j++) {
            float c, s;
            rope_angle(pos0 + t, inv_freq[j], &c, &s);
            rotate(x + (size_t)t * stride, n_heads, hd, j, c, s);
        }
}

void kr_rope_table(float *cs, int len, int hd, const float *inv_freq) {
    for (int pos = 0; pos < len; pos++)
        for (int j = 0; j < hd / 2; j++) {
            float *e = cs + ((size_t)pos * (hd / 2) + j) * 2;
            rope_angle(pos, inv_freq[j], &e[0], &e[1]);
        }
}

/* kr_rope with the block's table where it reaches (the same numbers, computed once). */
static void rope_block(const kr_block *b, float *x, int T, int stride, int pos0) {
    int half = b->hd / 2;
    for (int t = 0; t < T; t++) {
        int pos = pos0 + t;
        if (pos >= b->rope_len) {
            kr_rope(x + (size_t)t * stride, 1, stride, b->n_heads, b->hd, pos, b->inv_freq);
            continue;
        }
        /* head by head: the pairs (j, j + half) in vectors, each rotated as rotate() does */
        rope_heads(x + (size_t)t * stride, b->n_heads, b->hd, b->rope_cs + (size_t)pos * half * 2);
    }
}

/* The arrays of a block's scratch, carved from one buffer (the thread's KR_SCRATCH_BLOCK slot:
 * its pages stay mapped from one call to the next). */
static size_t block_scratch_layout(kr_block_scratch *s, char *base, int n_heads) {
    size_t Rd = (size_t)s->max_rows * s->d, Rf = (size_t)s->max_rows * s->ff, at = 0;
    int stacked = 3 * s->d > 2 * s->ff ? 3 * s->d : 2 * s->ff;
    float **rd[5] = {&s->xn, &s->q, &s->k, &s->v, &s->attn};
    for (int i = 0; i < 5; i++)
        at = kr_carve(base, at, (void **)rd[i], Rd * sizeof(float));
    at = kr_carve(base, at, (void **)&s->h1, Rf * sizeof(float));
    at = kr_carve(base, at, (void **)&s->h3, Rf * sizeof(float));
    at = kr_carve(base, at, (void **)&s->stacked, (size_t)s->max_rows * stacked * sizeof(float));
    at = kr_carve(base, at, (void **)&s->scores,
                  kr_attend_scores_floats(s->max_keys, n_heads, s->d) * sizeof(float));
    at = kr_carve(base, at, (void **)&s->rows, (size_t)s->max_rows * sizeof *s->rows);
    /* KEY_GROUP key rows per thread: the sequences' keys are stored in parallel (store_task) */
    at = kr_carve(base, at, (void **)&s->krow,
                  (size_t)kr_parallel_threads() * KEY_GROUP * s->d * sizeof(float));
    return at;
}

int kr_block_scratch_init(kr_block_scratch *s, int max_rows, int max_keys, int d, int ff,
                          int n_heads, kr_error *err) {
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->max_keys = max_keys;
    s->d = d;
    s->ff = ff;
    char *base = kr_scratch_take(&s->mem, KR_SCRATCH_BLOCK, block_scratch_layout(s, NULL, n_heads));
    if (!base) {
        kr_block_scratch_free(s);
        return kr_fail_code(err, KR_E_NO_MEMORY,
                            "block scratch: out of memory for %d rows of width %d/%d", max_rows, d,
                            ff);
    }
    block_scratch_layout(s, base, n_heads);
    return 0;
}

void kr_block_scratch_free(kr_block_scratch *s) {
    kr_scratch_release(&s->mem);
    memset(s, 0, sizeof *s);
}

/* Writes rows [t0, t1) of one sequence's new key/value rows into its cache: k'_t = a0 k_t +
 * a1 k_{t-1} per head when the block has kv_shift (v alike with b0, b1), then RoPE on the
 * keys. k, v: the sequence's rows from its first; row t - 1 is read as it came from the
 * product, so any run of rows can be stored on its own. krow: scratch of KEY_GROUP x d
 * floats (keys are built whole, then stored transposed, 16 at a time where 16 positions
 * from a multiple of 16 lie in one block). */
static void store_kv(const kr_block *b, int layer, const kr_seq *sq, const float *k, const float *v,
                     int t0, int t1, float *krow) {
    int d = b->d, H = b->n_heads, hd = b->hd, B = sq->kv->block_len;
    float *raw = sq->raw_kv ? sq->raw_kv + (size_t)layer * 2 * d : NULL;
    for (int t = t0; t < t1;) {
        int first = sq->pos0 + t;
        int g = first % B % KEY_GROUP == 0 && first % B + KEY_GROUP <= B && t + KEY_GROUP <= t1
                    ? KEY_GROUP
                    : 1;
        for (int r = 0; r < g; r++, t++) {
            int pos = first + r;
            float *kr = krow + (size_t)r * d;
            const float *kt = k + (size_t)t * d, *vt = v + (size_t)t * d;
            if (!b->kv_shift) {
                memcpy(kr, kt, (size_t)d * sizeof(float));
                kr_kv_put_v(sq->kv, layer, pos, vt);
            } else {
                const float *a0 = b->kv_shift, *a1 = a0 + H, *b0 = a0 + 2 * H, *b1 = a0 + 3 * H;
                const float *kp = NULL, *vp = NULL; /* k_{-1} = v_{-1} = 0 */
                if (t > 0) {
                    kp = kt - d;
                    vp = vt - d;
                } else if (sq->pos0 > 0 && raw) {
                    kp = raw;
                    vp = raw + d;
                }
                /* the value row through kr first (stored as the view's elements), then the key */
                for (int h = 0; h < H; h++)
                    for (int i = h * hd; i < (h + 1) * hd; i++)
                        kr[i] = b0[h] * vt[i] + (vp ? b1[h] * vp[i] : 0.0f);
                kr_kv_put_v(sq->kv, layer, pos, kr);
                for (int h = 0; h < H; h++)
                    for (int i = h * hd; i < (h + 1) * hd; i++)
                        kr[i] = a0[h] * kt[i] + (kp ? a1[h] * kp[i] : 0.0f);
            }
            rope_block(b, kr, 1, d, pos);
        }
        if (g == KEY_GROUP && !sq->kv->bf16)
            put_keys16(sq->kv, layer, first, krow, d);
        else
            for (int r = 0; r < g; r++)
                kr_kv_put_k(sq->kv, layer, first + r, krow + (size_t)r * d);
    }
}

/* The unshifted k and v of a sequence's last row (T of them), for its next append: after
 * all its rows are stored (its first row reads the previous ones). */
static void save_raw_kv(const kr_block *b, int layer, const kr_seq *sq, const float *k,
                        const float *v, int T) {
    if (!sq->raw_kv || T == 0) return;
    float *raw = sq->raw_kv + (size_t)layer * 2 * b->d;
    memcpy(raw, k + (size_t)(T - 1) * b->d, (size_t)b->d * sizeof(float));
    memcpy(raw + b->d, v + (size_t)(T - 1) * b->d, (size_t)b->d * sizeof(float));
}

/* The new rows of the sequences into their caches (store_kv), RoPE on their queries and
 * their attention rows. Many sequences: a task a run of whole sequences. A few with many rows
 * (a prefill, the tokenizer's whole window): a task a run of STORE_CHUNK rows of one sequence
 * (on the calling thread, a long window's stores took about a tenth of the tokenizer's time). */
#define STORE_PARALLEL 4  /* fewer sequences are stored by rows, or on the calling thread */
#define STORE_CHUNK    32 /* rows a task when the rows are split */
#define STORE_ROWS     64 /* fewer rows in all: stored on the calling thread */
typedef struct {
    const kr_block *b;
    int layer;
    const kr_seq *seqs;
    int S, per_task;
    int by_rows; /* tasks are STORE_CHUNK rows of one sequence, not per_task sequences */
    int queries; /* also rotate the queries and set the attention rows (not for forward_kv) */
    kr_block_scratch *s;
} store_job;

/* A sequence's chunks of rows: cut at positions that are multiples of STORE_CHUNK, so that
 * no two tasks write one line of a block's transposed keys. */
static int chunks_of(const kr_seq *sq) {
    return sq->n_rows ? (sq->pos0 % STORE_CHUNK + sq->n_rows + STORE_CHUNK - 1) / STORE_CHUNK : 0;
}

/* Rows [t0, t1) of sequence i, whose first row is row0 of the batch. */
static void store_rows(const store_job *j, int i, int row0, int t0, int t1, int worker) {
    kr_block_scratch *s = j->s;
    const kr_seq *sq = &j->seqs[i];
    int d = j->b->d;
    store_kv(j->b, j->layer, sq, s->k + (size_t)row0 * d, s->v + (size_t)row0 * d, t0, t1,
             s->krow + (size_t)worker * KEY_GROUP * d);
    if (!j->queries) return;
    rope_block(j->b, s->q + (size_t)(row0 + t0) * d, t1 - t0, d, sq->pos0 + t0);
    for (int t = t0; t < t1; t++)
        s->rows[row0 + t] = (kr_attn_row){sq->kv, sq->pos0 + t + 1};
}

static void store_task(void *arg, int task, int worker) {
    const store_job *j = arg;
    int row0 = 0;
    if (j->by_rows) { /* task: the sequence and the chunk it falls in */
        for (int i = 0; i < j->S; row0 += j->seqs[i++].n_rows) {
            int T = j->seqs[i].n_rows, chunks = chunks_of(&j->seqs[i]);
            if (task < chunks) {
                int t0 = task * STORE_CHUNK - j->seqs[i].pos0 % STORE_CHUNK, t1 = t0 + STORE_CHUNK;
                store_rows(j, i, row0, t0 > 0 ? t0 : 0, t1 < T ? t1 : T, worker);
                return;
            }
            task -= chunks;
        }
        return;
    }
    int i0 = task * j->per_task, i1 = i0 + j->per_task < j->S ? i0 + j->per_task : j->S;
    for (int i = 0; i < i0; i++)
        row0 += j->seqs[i].n_rows;
    for (int i = i0; i < i1; row0 += j->seqs[i++].n_rows) {
        const kr_seq *sq = &j->seqs[i];
        store_rows(j, i, row0, 0, sq->n_rows, worker);
        save_raw_kv(j->b, j->layer, sq, j->s->k + (size_t)row0 * j->b->d,
                    j->s->v + (size_t)row0 * j->b->d, sq->n_rows);
    }
}

/* Stores the R rows of the S sequences (store_task), on the pool when there is enough. */
static void store_all(const kr_block *b, int layer, int R, int S, const kr_seq *seqs,
                      kr_block_scratch *s, int queries) {
    int threads = kr_parallel_threads(), tasks = S < 4 * threads ? S : 4 * threads;
    store_job sj = {b, layer, seqs, S, (S + tasks - 1) / tasks, 0, queries, s};
    if (threads > 1 && S >= STORE_PARALLEL) { /* runs of sequences, about four a thread */
        kr_parallel_for((S + sj.per_task - 1) / sj.per_task, store_task, &sj);
    } else if (threads > 1 && R >= STORE_ROWS) { /* chunks of rows; each sequence's last raw
                                                  * k, v once all its rows are stored */
        int chunks = 0;
        for (int i = 0; i < S; i++)
            chunks += chunks_of(&seqs[i]);
        sj.by_rows = 1;
        kr_parallel_for(chunks, store_task, &sj);
        for (int i = 0, row0 = 0; i < S; row0 += seqs[i++].n_rows)
            save_raw_kv(b, layer, &seqs[i], s->k + (size_t)row0 * b->d, s->v + (size_t)row0 * b->d,
                        seqs[i].n_rows);
    } else {
        sj.per_task = S;
        kr_serial_for(1, store_task, &sj);
    }
}

/* The block's row-wise steps between its products, spread over the pool in chunks of rows
 * when there are many rows (each row computed alone, the same way on any thread). */
enum { ROWS_NORM, ROWS_SILU_MUL };
#define ROWS_PER_TASK 16
#define ROWS_PARALLEL 64 /* fewer rows run on the calling thread: not worth a fork-join */

typedef struct {
    int op, R, d, ff;
    float *x, *xn, *h1;
    const float *h3, *w;
} rows_job;

static void rows_task(void *arg, int t, int worker) {
    (void)worker;
    const rows_job *j = arg;
    int r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->R ? r0 + ROWS_PER_TASK : j->R;
    if (j->op == ROWS_NORM)
        kr_rmsnorm(j->xn + (size_t)r0 * j->d, j->x + (size_t)r0 * j->d, j->w, r1 - r0, j->d);
    else
        swiglu(&(swiglu_ctx){j->h1, j->h3, j->ff}, r0, r1, 0, j->ff);
}

static void for_rows(const kr_block *b, kr_block_scratch *s, float *x, int R, int op,
                     const float *w) {
    rows_job j = {op, R, b->d, b->ff, x, s->xn, s->h1, s->h3, w};
    int n = (R + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    kr_parallel_for_if(R >= ROWS_PARALLEL, n, rows_task, &j);
}

/* The block's first half up to its cache: x normed, the q|k|v product, each sequence's new
 * keys and values stored, and with `queries` the queries rotated and the attention rows set
 * (kr_block_forward and kr_block_forward_kv share it). R: the rows. */
static void block_qkv(const kr_block *b, int layer, float *x, int R, int S, const kr_seq *seqs,
                      kr_block_scratch *s, int queries) {
    int d = b->d;
    for_rows(b, s, x, R, ROWS_NORM, b->norm1);
    float *qkv[3] = {s->q, s->k, s->v};
    if ((b->qkv.w || kr_linear_is_packed(&b->qkv)) &&
        kr_linear_forward_parts(qkv, 3, s->xn, R, &b->qkv) == 0) {
        /* one product, written straight into q, k and v */
    } else if (b->qkv.w ||
               kr_linear_is_packed(&b->qkv)) { /* one product, then the rows split into q, k, v */
        kr_linear_forward(s->stacked, s->xn, R, &b->qkv);
        for (size_t r = 0; r < (size_t)R; r++) {
            const float *row = s->stacked + r * 3 * d;
            memcpy(s->q + r * d, row, (size_t)d * sizeof(float));
            memcpy(s->k + r * d, row + d, (size_t)d * sizeof(float));
            memcpy(s->v + r * d, row + 2 * d, (size_t)d * sizeof(float));
        }
    } else {
        kr_linear_forward(s->q, s->xn, R, &b->q);
        kr_linear_forward(s->k, s->xn, R, &b->k);
        kr_linear_forward(s->v, s->xn, R, &b->v);
    }
    store_all(b, layer, R, S, seqs, s, queries);
}

void kr_block_forward_kv(const kr_block *b, int layer, const float *x, int S, const kr_seq *seqs,
                         kr_block_scratch *s) {
    int R = 0;
    for (int i = 0; i < S; i++)
        R += seqs[i].n_rows;
    block_qkv(b, layer, (float *)x, R, S, seqs, s, 0); /* ROWS_NORM only reads x */
}

void kr_block_forward(const kr_block *b, int layer, float *x, int S, const kr_seq *seqs,
                      kr_block_scratch *s) {
    int d = b->d, R = 0;
    for (int i = 0; i < S; i++)
        R += seqs[i].n_rows;

    block_qkv(b, layer, x, R, S, seqs, s, 1);
    float *w13[2] = {s->h1, s->h3};
    kr_attend_rows(s->attn, s->q, s->rows, R, d, layer, b->n_heads, s->scores, s->max_keys);
    kr_linear_forward_add(x, s->attn, R, &b->o); /* residual connection */
    for_rows(b, s, x, R, ROWS_NORM, b->norm2);
    swiglu_ctx sw = {s->h1, s->h3, b->ff};
    if ((b->w13.w || kr_linear_is_packed(&b->w13)) &&
        kr_linear_forward_then(w13, 2, s->xn, R, &b->w13, swiglu, &sw) == 0) {
        /* one product into h1 and h3, each task's columns of h1 through silu(h1) * h3 */
    } else {
        if (b->w13.w || kr_linear_is_packed(&b->w13)) {
            kr_linear_forward(s->stacked, s->xn, R, &b->w13);
            for (size_t r = 0; r < (size_t)R; r++) {
                const float *row = s->stacked + r * 2 * b->ff;
                memcpy(s->h1 + r * b->ff, row, (size_t)b->ff * sizeof(float));
                memcpy(s->h3 + r * b->ff, row + b->ff, (size_t)b->ff * sizeof(float));
            }
        } else {
            kr_linear_forward(s->h1, s->xn, R, &b->w1);
            kr_linear_forward(s->h3, s->xn, R, &b->w3);
        }
        for_rows(b, s, x, R, ROWS_SILU_MUL, NULL);
    }
    kr_linear_forward_add(x, s->h1, R, &b->w2); /* residual connection */
}
