/* nn.c — RMSNorm, linear layers, RoPE, attention and the transformer block.
 *
 * Everything is float32 on row-major [T][d] arrays, the way upstream computes it; the
 * matrix products go through OpenBLAS.
 */
#include "nn.h"
#include "parallel.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Built for AVX2 too, chosen at run time. Without FMA contraction (ISO C mode) both builds
 * perform the same IEEE operations in the same order, so results do not depend on the CPU. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KR_HOT __attribute__((target_clones("avx2", "default")))
#else
#define KR_HOT
#endif

/* e^x for each x[i] <= 88, written so that it vectorises (libm's expf does not): Cephes'
 * single-precision range reduction and polynomial, within 2 ulp of expf. The reference and
 * the cached paths both use it. */
static inline void exp_array(float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i] < -87.3f ? -87.3f : x[i];
        float fx = v * 1.44269504088896341f;
        int k = (int)(fx + (fx >= 0.0f ? 0.5f : -0.5f)); /* round to nearest */
        float kf = (float)k;
        float r = v - kf * 0.693359375f - kf * -2.12194440e-4f;
        float z = r * r;
        float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                    4.1665795894e-2f) *
                       r +
                   1.6666665459e-1f) *
                      r +
                  5.0000001201e-1f;
        y = y * z + r + 1.0f;
        union {
            uint32_t u;
            float f;
        } scale = {.u = (uint32_t)(k + 127) << 23};
        x[i] = x[i] < -87.3f ? 0.0f : y * scale.f;
    }
}

void kr_rmsnorm(float *out, const float *x, const float *w, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = out + (size_t)r * d;
        double ss = 0.0;
        for (int i = 0; i < d; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / d + 1e-5));
        for (int i = 0; i < d; i++)
            yr[i] = xr[i] * scale * w[i];
    }
}

/* Output columns per BLAS call. The split is fixed by the shape alone and every call runs
 * single-threaded, because OpenBLAS's results depend on how a product is partitioned: a
 * fixed split keeps every number the same whatever the number of threads. */
#define KR_LINEAR_COLS 128

typedef struct {
    float *y;
    const float *x;
    int T;
    const kr_linear *l;
} linear_job;

static void linear_cols(void *arg, int chunk, int worker) {
    (void)worker;
    const linear_job *j = arg;
    const kr_linear *l = j->l;
    int o0 = chunk * KR_LINEAR_COLS,
        n = l->out - o0 < KR_LINEAR_COLS ? l->out - o0 : KR_LINEAR_COLS;
    const float *w = l->w + (size_t)o0 * l->in;
    if (j->T == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, l->in, 1.0f, w, l->in, j->x, 1, 0.0f, j->y + o0,
                    1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->T, n, l->in, 1.0f, j->x, l->in, w,
                    l->in, 0.0f, j->y + o0, l->out);
    if (l->b)
        for (int t = 0; t < j->T; t++) {
            float *yr = j->y + (size_t)t * l->out;
            for (int o = o0; o < o0 + n; o++)
                yr[o] += l->b[o];
        }
}

void kr_linear_forward(float *y, const float *x, int T, const kr_linear *l) {
    linear_job j = {y, x, T, l};
    kr_parallel_for((l->out + KR_LINEAR_COLS - 1) / KR_LINEAR_COLS, linear_cols, &j);
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
        const float *cs = b->rope_cs + (size_t)pos * half * 2;
        for (int j = 0; j < half; j++)
            rotate(x + (size_t)t * stride, b->n_heads, b->hd, j, cs[2 * j], cs[2 * j + 1]);
    }
}

KR_HOT static void softmax_row(float *s, int n) {
    float mx = s[0];
    for (int i = 1; i < n; i++)
        if (s[i] > mx) mx = s[i];
    for (int i = 0; i < n; i++)
        s[i] -= mx;
    exp_array(s, n);
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += s[i];
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++)
        s[i] *= inv;
}

/* Eight independent partial sums: the compiler vectorises this, and every path (cached or
 * not) uses it, so they agree on the order of the additions. */
static inline float dot8(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++)
        acc[0] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float kr_dot(const float *a, const float *b, int n) {
    return dot8(a, b, n);
}

KR_HOT void kr_attend(float *out, const float *q, const kr_kv_view *kv, int layer, int n_keys,
                      int n_heads, float *scores) {
    int d = kv->d, hd = d / n_heads, B = kv->block_len;
    size_t layer_off = (size_t)layer * 2 * B * d;
    float scale = (float)(1.0 / sqrt((double)hd));
    /* scores[h][j], one pass over each key row for all heads */
    for (int b0 = 0; b0 < n_keys; b0 += B) {
        const float *kb = kv->blocks[b0 / B] + layer_off;
        int nb = n_keys - b0 < B ? n_keys - b0 : B;
        for (int j = 0; j < nb; j++)
            for (int h = 0; h < n_heads; h++)
                scores[(size_t)h * n_keys + b0 + j] =
                    dot8(q + (size_t)h * hd, kb + (size_t)j * d + (size_t)h * hd, hd) * scale;
    }
    for (int h = 0; h < n_heads; h++)
        softmax_row(scores + (size_t)h * n_keys, n_keys);
    memset(out, 0, (size_t)d * sizeof *out);
    for (int b0 = 0; b0 < n_keys; b0 += B) {
        const float *vb = kv->blocks[b0 / B] + layer_off + (size_t)B * d;
        int nb = n_keys - b0 < B ? n_keys - b0 : B;
        for (int j = 0; j < nb; j++)
            for (int h = 0; h < n_heads; h++) {
                const float *vj = vb + (size_t)j * d + (size_t)h * hd;
                float p = scores[(size_t)h * n_keys + b0 + j], *oh = out + (size_t)h * hd;
                for (int i = 0; i < hd; i++)
                    oh[i] += p * vj[i];
            }
    }
}

/* Rows that share a prefix of whole blocks (the sample paths of one forecast) attend over
 * it as a tile: each key row is read once for KR_ATTN_TILE queries, queries transposed so
 * the products vectorise across rows. Keys past the prefix are each row's own. */
#define KR_ATTN_TILE 32

/* Eight floats as one value (GCC/clang vector extension): one AVX register in the AVX2
 * build, two SSE registers otherwise. aligned(4): loads and stores need no alignment. */
typedef float v8f __attribute__((vector_size(32), aligned(4)));

size_t kr_attend_scores_floats(int max_keys, int n_heads, int d) {
    size_t keys = (size_t)(max_keys > 0 ? max_keys : 1);
    size_t per_row = (size_t)n_heads * keys, tile = KR_ATTN_TILE * (keys + 2 * (size_t)d);
    return (size_t)kr_parallel_threads() * (per_row > tile ? per_row : tile);
}

typedef struct {
    float *out;
    const float *q;
    const kr_attn_row *rows;
    int n_rows, d, layer, n_heads, per_task, shared, n_tiles, own_max;
    float *scratch;
    size_t scratch_stride;
    float *own; /* [n_rows][n_heads][own_max]: scores, then probabilities, of own keys */
} attend_job;

static void attend_task(void *arg, int task, int worker) {
    const attend_job *j = arg;
    int r0 = task * j->per_task, r1 = r0 + j->per_task < j->n_rows ? r0 + j->per_task : j->n_rows;
    for (int r = r0; r < r1; r++)
        kr_attend(j->out + (size_t)r * j->d, j->q + (size_t)r * j->d, j->rows[r].kv, j->layer,
                  j->rows[r].n_keys, j->n_heads, j->scratch + (size_t)worker * j->scratch_stride);
}

/* The tile path in three passes. Keys past the shared prefix are each row's own and sit in
 * its own blocks, so they are visited row by row, every head at once per key row (passes 1
 * and 3); the shared keys are visited head by head for a tile of rows (pass 2). */
static float *own_at(const attend_job *j, int r, int h) {
    return j->own + ((size_t)r * j->n_heads + h) * j->own_max;
}

KR_HOT static void own_scores(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int key = j->shared; key < row->n_keys; key++) {
        const float *k = kr_kv_k(row->kv, j->layer, key);
        for (int h = 0; h < j->n_heads; h++)
            own_at(j, r, h)[key - j->shared] =
                dot8(j->q + (size_t)r * j->d + (size_t)h * hd, k + (size_t)h * hd, hd) * scale;
    }
}

KR_HOT static void own_values(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads;
    for (int key = j->shared; key < row->n_keys; key++) {
        const float *v = kr_kv_v(row->kv, j->layer, key);
        for (int h = 0; h < j->n_heads; h++) {
            float p = own_at(j, r, h)[key - j->shared];
            float *o = j->out + (size_t)r * j->d + (size_t)h * hd;
            const float *vh = v + (size_t)h * hd;
            for (int i = 0; i < hd; i++)
                o[i] += p * vh[i];
        }
    }
}

KR_HOT static void attend_tile(void *arg, int task, int worker) {
    const attend_job *j = arg;
    enum { T = KR_ATTN_TILE };
    int h = task % j->n_heads, r0 = task / j->n_heads * T;
    int R = j->n_rows - r0 < T ? j->n_rows - r0 : T;
    int d = j->d, hd = d / j->n_heads, shared = j->shared, n_keys = 0;
    const kr_kv_view *kv0 = j->rows[r0].kv;
    int B = kv0->block_len;
    for (int r = 0; r < R; r++)
        if (j->rows[r0 + r].n_keys > n_keys) n_keys = j->rows[r0 + r].n_keys;
    /* per worker: scores [n_keys][T] (a key's scores for all rows side by side), the
     * queries transposed [hd][T], and the outputs [T][hd] */
    float *sc = j->scratch + (size_t)worker * j->scratch_stride;
    float *qt = sc + (size_t)n_keys * T, *o = qt + (size_t)hd * T;
    size_t layer_off = (size_t)j->layer * 2 * B * d;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int i = 0; i < hd; i++)
        for (int r = 0; r < T; r++)
            qt[(size_t)i * T + r] = r < R ? j->q[(size_t)(r0 + r) * d + (size_t)h * hd + i] : 0.0f;
    /* shared keys two at a time, the tile's 32 rows in four vectors: each load of the
     * transposed queries serves both keys */
    for (int key = 0; key < shared; key += 2) {
        int k2 = key + 1 < shared ? key + 1 : key;
        const float *ka = kv0->blocks[key / B] + layer_off + (size_t)(key % B) * d + (size_t)h * hd;
        const float *kb = kv0->blocks[k2 / B] + layer_off + (size_t)(k2 % B) * d + (size_t)h * hd;
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        for (int i = 0; i < hd; i++) {
            const v8f *qi = (const v8f *)(qt + (size_t)i * T);
            v8f ai = {0}, bi = {0};
            ai += ka[i];
            bi += kb[i];
            a0 += qi[0] * ai, a1 += qi[1] * ai, a2 += qi[2] * ai, a3 += qi[3] * ai;
            b0 += qi[0] * bi, b1 += qi[1] * bi, b2 += qi[2] * bi, b3 += qi[3] * bi;
        }
        v8f *sa = (v8f *)(sc + (size_t)key * T), *sb = (v8f *)(sc + (size_t)k2 * T);
        sa[0] = a0 * scale, sa[1] = a1 * scale, sa[2] = a2 * scale, sa[3] = a3 * scale;
        if (k2 != key)
            sb[0] = b0 * scale, sb[1] = b1 * scale, sb[2] = b2 * scale, sb[3] = b3 * scale;
    }
    for (int key = shared; key < n_keys; key++)
        for (int r = 0; r < T; r++)
            sc[(size_t)key * T + r] = r < R && key < j->rows[r0 + r].n_keys
                                          ? own_at(j, r0 + r, h)[key - shared]
                                          : -INFINITY;
    /* softmax down each column, all rows at once */
    float mx[T], inv[T];
    for (int r = 0; r < T; r++)
        mx[r] = sc[r];
    for (int key = 1; key < n_keys; key++)
        for (int r = 0; r < T; r++)
            mx[r] = sc[(size_t)key * T + r] > mx[r] ? sc[(size_t)key * T + r] : mx[r];
    for (int key = 0; key < n_keys; key++)
        for (int r = 0; r < T; r++)
            sc[(size_t)key * T + r] -= mx[r];
    exp_array(sc, n_keys * T);
    for (int r = 0; r < T; r++)
        inv[r] = 0.0f;
    for (int key = 0; key < n_keys; key++)
        for (int r = 0; r < T; r++)
            inv[r] += sc[(size_t)key * T + r];
    for (int r = 0; r < T; r++)
        inv[r] = 1.0f / inv[r];
    /* o = P^T V over the shared keys, in register tiles of 4 rows x 16 columns (a scalar
     * loop for the columns of a head size that is not a multiple of 16) */
    memset(o, 0, (size_t)T * hd * sizeof *o);
    int hd16 = hd / 16 * 16;
    for (int ra = 0; ra < R; ra += 4)
        for (int i0 = 0; i0 < hd16; i0 += 16) {
            v8f c[4][2] = {{{0}}};
            for (int key = 0; key < shared; key++) {
                const float *v = kv0->blocks[key / B] + layer_off + (size_t)(B + key % B) * d +
                                 (size_t)h * hd + i0;
                v8f v0 = *(const v8f *)v, v1 = *(const v8f *)(v + 8);
                const float *p = sc + (size_t)key * T + ra;
                for (int r = 0; r < 4; r++) {
                    v8f pr = {0};
                    pr += p[r];
                    c[r][0] += pr * v0;
                    c[r][1] += pr * v1;
                }
            }
            for (int r = 0; r < 4 && ra + r < R; r++)
                memcpy(o + (size_t)(ra + r) * hd + i0, c[r], 16 * sizeof(float));
        }
    for (int key = 0; key < shared && hd16 < hd; key++) {
        const float *v =
            kv0->blocks[key / B] + layer_off + (size_t)(B + key % B) * d + (size_t)h * hd;
        for (int r = 0; r < R; r++) {
            float pk = sc[(size_t)key * T + r], *orow = o + (size_t)r * hd;
            for (int i = hd16; i < hd; i++)
                orow[i] += pk * v[i];
        }
    }
    for (int r = 0; r < R; r++) {
        const kr_attn_row *row = &j->rows[r0 + r];
        float *own = own_at(j, r0 + r, h), *out = j->out + (size_t)(r0 + r) * d + (size_t)h * hd;
        for (int key = shared; key < row->n_keys; key++)
            own[key - shared] = sc[(size_t)key * T + r] * inv[r];
        for (int i = 0; i < hd; i++)
            out[i] = o[(size_t)r * hd + i] * inv[r];
    }
}

/* Keys [0, n) held in the same blocks by every row, in whole blocks below every row's end. */
static int shared_prefix(const kr_attn_row *rows, int n_rows) {
    const kr_kv_view *kv0 = rows[0].kv;
    int B = kv0->block_len, nb = rows[0].n_keys / B;
    for (int r = 1; r < n_rows && nb > 0; r++) {
        int lim = rows[r].n_keys / B, b = 0;
        if (lim < nb) nb = lim;
        if (rows[r].kv->blocks == kv0->blocks) continue;
        while (b < nb && rows[r].kv->blocks[b] == kv0->blocks[b])
            b++;
        nb = b;
    }
    return nb * B;
}

void kr_attend_rows(float *out, const float *q, const kr_attn_row *rows, int n_rows, int d,
                    int layer, int n_heads, float *scratch, int max_keys) {
    if (n_rows <= 0) return;
    int threads = kr_parallel_threads();
    attend_job j = {.out = out,
                    .q = q,
                    .rows = rows,
                    .n_rows = n_rows,
                    .d = d,
                    .layer = layer,
                    .n_heads = n_heads,
                    .per_task = 1,
                    .scratch = scratch,
                    .scratch_stride =
                        kr_attend_scores_floats(max_keys, n_heads, d) / (size_t)threads};
    j.shared = n_rows >= 4 ? shared_prefix(rows, n_rows) : 0;
    if (j.shared >= 64) {
        for (int r = 0; r < n_rows; r++)
            if (rows[r].n_keys - j.shared > j.own_max) j.own_max = rows[r].n_keys - j.shared;
        j.own = malloc((size_t)n_rows * n_heads * (j.own_max > 0 ? j.own_max : 1) * sizeof(float));
        if (j.own) { /* without it, the row-by-row path below gives the same answer */
            j.n_tiles = (n_rows + KR_ATTN_TILE - 1) / KR_ATTN_TILE;
            if (j.own_max > 0) kr_parallel_for(n_rows, own_scores, &j);
            kr_parallel_for(j.n_tiles * n_heads, attend_tile, &j);
            if (j.own_max > 0) kr_parallel_for(n_rows, own_values, &j);
            free(j.own);
            return;
        }
    }
    j.per_task = (n_rows + 4 * threads - 1) / (4 * threads);
    kr_parallel_for((n_rows + j.per_task - 1) / j.per_task, attend_task, &j);
}

int kr_block_scratch_init(kr_block_scratch *s, int max_rows, int max_keys, int d, int ff,
                          int n_heads, kr_error *err) {
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->max_keys = max_keys;
    s->d = d;
    s->ff = ff;
    size_t Rd = (size_t)max_rows * d, Rf = (size_t)max_rows * ff;
    s->xn = malloc(Rd * sizeof(float));
    s->q = malloc(Rd * sizeof(float));
    s->k = malloc(Rd * sizeof(float));
    s->v = malloc(Rd * sizeof(float));
    s->attn = malloc(Rd * sizeof(float));
    s->h1 = malloc(Rf * sizeof(float));
    s->h3 = malloc(Rf * sizeof(float));
    s->stacked = malloc((size_t)max_rows * (3 * d > 2 * ff ? 3 * d : 2 * ff) * sizeof(float));
    s->scores = malloc(kr_attend_scores_floats(max_keys, n_heads, d) * sizeof(float));
    s->rows = malloc((size_t)max_rows * sizeof *s->rows);
    if (!s->xn || !s->q || !s->k || !s->v || !s->attn || !s->h1 || !s->h3 || !s->stacked ||
        !s->scores || !s->rows) {
        kr_block_scratch_free(s);
        return kr_fail(err, "block scratch: out of memory for %d rows of width %d/%d", max_rows, d,
                       ff);
    }
    return 0;
}

void kr_block_scratch_free(kr_block_scratch *s) {
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->attn);
    free(s->h1);
    free(s->h3);
    free(s->stacked);
    free(s->scores);
    free(s->rows);
    memset(s, 0, sizeof *s);
}

/* Writes one sequence's T new key/value rows into its cache: k'_t = a0 k_t + a1 k_{t-1}
 * per head when the block has kv_shift (v alike with b0, b1), then RoPE on the keys. */
static void store_kv(const kr_block *b, int layer, const kr_seq *sq, const float *k, const float *v,
                     int T) {
    int d = b->d, H = b->n_heads, hd = b->hd;
    float *raw = sq->raw_kv ? sq->raw_kv + (size_t)layer * 2 * d : NULL;
    for (int t = 0; t < T; t++) {
        float *kc = kr_kv_k(sq->kv, layer, sq->pos0 + t),
              *vc = kr_kv_v(sq->kv, layer, sq->pos0 + t);
        const float *kt = k + (size_t)t * d, *vt = v + (size_t)t * d;
        if (!b->kv_shift) {
            memcpy(kc, kt, (size_t)d * sizeof(float));
            memcpy(vc, vt, (size_t)d * sizeof(float));
            continue;
        }
        const float *a0 = b->kv_shift, *a1 = a0 + H, *b0 = a0 + 2 * H, *b1 = a0 + 3 * H;
        const float *kp = NULL, *vp = NULL; /* k_{-1} = v_{-1} = 0 */
        if (t > 0) {
            kp = kt - d;
            vp = vt - d;
        } else if (sq->pos0 > 0 && raw) {
            kp = raw;
            vp = raw + d;
        }
        for (int h = 0; h < H; h++)
            for (int i = h * hd; i < (h + 1) * hd; i++) {
                kc[i] = a0[h] * kt[i] + (kp ? a1[h] * kp[i] : 0.0f);
                vc[i] = b0[h] * vt[i] + (vp ? b1[h] * vp[i] : 0.0f);
            }
    }
    if (raw) { /* the unshifted k and v of the last row, for the next append */
        memcpy(raw, k + (size_t)(T - 1) * d, (size_t)d * sizeof(float));
        memcpy(raw + d, v + (size_t)(T - 1) * d, (size_t)d * sizeof(float));
    }
    for (int t = 0; t < T; t++)
        rope_block(b, kr_kv_k(sq->kv, layer, sq->pos0 + t), 1, d, sq->pos0 + t);
}

/* h1 = silu(h1) * h3, with silu(a) = a / (1 + e^-a) */
KR_HOT static void silu_mul(float *h1, const float *h3, size_t n) {
    float e[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        int m = n - i0 < 256 ? (int)(n - i0) : 256;
        for (int i = 0; i < m; i++)
            e[i] = -h1[i0 + i];
        exp_array(e, m);
        for (int i = 0; i < m; i++)
            h1[i0 + i] = h1[i0 + i] / (1.0f + e[i]) * h3[i0 + i];
    }
}

void kr_block_forward(const kr_block *b, int layer, float *x, int S, int T, const kr_seq *seqs,
                      kr_block_scratch *s) {
    int d = b->d, R = S * T;

    kr_rmsnorm(s->xn, x, b->norm1, R, d);
    if (b->qkv.w) { /* one product, then the rows split into q, k, v */
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
    for (int i = 0; i < S; i++) {
        const kr_seq *sq = &seqs[i];
        size_t row0 = (size_t)i * T;
        store_kv(b, layer, sq, s->k + row0 * d, s->v + row0 * d, T);
        rope_block(b, s->q + row0 * d, T, d, sq->pos0);
        for (int t = 0; t < T; t++)
            s->rows[row0 + t] = (kr_attn_row){sq->kv, sq->pos0 + t + 1};
    }
    kr_attend_rows(s->attn, s->q, s->rows, R, d, layer, b->n_heads, s->scores, s->max_keys);
    kr_linear_forward(s->xn, s->attn, R, &b->o);
    for (size_t i = 0; i < (size_t)R * d; i++)
        x[i] += s->xn[i];

    kr_rmsnorm(s->xn, x, b->norm2, R, d);
    if (b->w13.w) {
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
    silu_mul(s->h1, s->h3, (size_t)R * b->ff);
    kr_linear_forward(s->xn, s->h1, R, &b->w2);
    for (size_t i = 0; i < (size_t)R * d; i++)
        x[i] += s->xn[i];
}
