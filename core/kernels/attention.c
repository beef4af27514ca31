/* attention.c — causal multi-head attention over KV blocks: one query row at a time, or
 * tiles of rows that share a prefix of blocks (the sample paths of one forecast).
 *
 * Every path computes each (row, head) the same way, so a row's result does not depend on
 * which path ran it, on what else was in the batch or on the thread count:
 *
 *   score_j = (sum over i, in order, of q_i * k_ji) * scale   (products and sums rounded
 *                                                              one by one: no FMA)
 *   e_j     = exp(score_j - max_j score_j)                    (exp_array)
 *   Z       = sum over j, in order, of e_j
 *   o_i     = (sum over j, in order, of e_j * v_ji) * (1 / Z)
 *
 * Keys are stored transposed within a block (nn.h), so the row path computes a head's
 * scores for 16 keys at once, one vector lane a key.
 */
#include "attention.h"
#include "base.h"
#include "parallel.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sixteen floats as one value (GCC/clang vector extension): one AVX-512 register, two AVX
 * ones, four SSE ones. aligned(4): loads and stores need no alignment. */
typedef float v16f __attribute__((vector_size(64), aligned(4)));

#define KEY_LANES 16

/* ---- one row -------------------------------------------------------------------------------- */

/* out[key - k0] for keys [k0, k1) of head h: the scaled dot products with qh[hd]. Full
 * groups of 16 keys go up to four at a time, so that four chains of adds are in flight
 * (two or three groups repeat their last one; each key's sum still runs over i in order);
 * a last partial group whose 16 lanes lie within its block is one vector too, its lanes
 * past k1 computed and dropped (each lane is a key of its own). */
KR_HOT static void head_scores(const float *qh, const kr_kv_view *kv, int layer, int h, int hd,
                               int k0, int k1, float scale, float *out) {
    int B = kv->block_len;
    for (int key = k0; key < k1;) {
        const float *kt[4];
        int n_full = 0, at = key;
        while (n_full < 4 && at % B + KEY_LANES <= B && at + KEY_LANES <= k1 &&
               (at % B) % KEY_LANES == 0) { /* a whole aligned group of 16 within a block */
            kt[n_full++] = kr_kv_kcol(kv, layer, at) + (size_t)h * hd * B;
            at += KEY_LANES;
        }
        if (n_full >= 2) {
            for (int g = n_full; g < 4; g++)
                kt[g] = kt[n_full - 1];
            v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int i = 0; i < hd; i++) {
                float qi = qh[i];
                a0 += qi * *(const v16f *)(kt[0] + (size_t)i * B);
                a1 += qi * *(const v16f *)(kt[1] + (size_t)i * B);
                a2 += qi * *(const v16f *)(kt[2] + (size_t)i * B);
                a3 += qi * *(const v16f *)(kt[3] + (size_t)i * B);
            }
            a0 *= scale, a1 *= scale, a2 *= scale, a3 *= scale;
            memcpy(out + key - k0, &a0, sizeof a0);
            memcpy(out + key - k0 + 16, &a1, sizeof a1);
            if (n_full > 2) memcpy(out + key - k0 + 32, &a2, sizeof a2);
            if (n_full > 3) memcpy(out + key - k0 + 48, &a3, sizeof a3);
            key += n_full * KEY_LANES;
            continue;
        }
        int j0 = key % B, n = B - j0;
        if (n > k1 - key) n = k1 - key;
        if (n > KEY_LANES) n = KEY_LANES;
        const float *kc = kr_kv_kcol(kv, layer, key) + (size_t)h * hd * B;
        if (n == KEY_LANES || j0 + KEY_LANES <= B) {
            v16f acc = {0};
            for (int i = 0; i < hd; i++)
                acc += qh[i] * *(const v16f *)(kc + (size_t)i * B);
            acc *= scale;
            memcpy(out + key - k0, &acc, (size_t)n * sizeof(float));
        } else {
            float acc[KEY_LANES] = {0};
            for (int i = 0; i < hd; i++)
                for (int l = 0; l < n; l++)
                    acc[l] += qh[i] * kc[(size_t)i * B + l];
            for (int l = 0; l < n; l++)
                out[key - k0 + l] = acc[l] * scale;
        }
        key += n;
    }
}

/* s[n] -> e^(s - max s) in place; returns 1 / (their sum, in order). */
KR_HOT static float exp_shifted(float *s, int n) {
    float mx = s[0];
    for (int i = 1; i < n; i++)
        if (s[i] > mx) mx = s[i];
    for (int i = 0; i < n; i++)
        s[i] -= mx;
    exp_array(s, n);
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += s[i];
    return 1.0f / sum;
}

/* out[hd] += e_j * v_j over keys [k0, k1) of head h, keys in order: 64 columns at a time
 * held in four 16-lane sums while the keys go by (each column still adds its products in
 * key order, one rounding each), then 16 and then one at a time. */
KR_HOT static void head_values(float *out, const float *e, const kr_kv_view *kv, int layer, int h,
                               int hd, int k0, int k1) {
    int i0 = 0;
    for (; i0 + 64 <= hd; i0 += 64) {
        v16f a0, a1, a2, a3;
        memcpy(&a0, out + i0, sizeof a0);
        memcpy(&a1, out + i0 + 16, sizeof a1);
        memcpy(&a2, out + i0 + 32, sizeof a2);
        memcpy(&a3, out + i0 + 48, sizeof a3);
        for (int key = k0; key < k1; key++) {
            const float *v = kr_kv_v(kv, layer, key) + (size_t)h * hd + i0;
            float p = e[key - k0];
            a0 += p * *(const v16f *)v;
            a1 += p * *(const v16f *)(v + 16);
            a2 += p * *(const v16f *)(v + 32);
            a3 += p * *(const v16f *)(v + 48);
        }
        memcpy(out + i0, &a0, sizeof a0);
        memcpy(out + i0 + 16, &a1, sizeof a1);
        memcpy(out + i0 + 32, &a2, sizeof a2);
        memcpy(out + i0 + 48, &a3, sizeof a3);
    }
    for (; i0 + 16 <= hd; i0 += 16) {
        v16f a;
        memcpy(&a, out + i0, sizeof a);
        for (int key = k0; key < k1; key++)
            a += e[key - k0] * *(const v16f *)(kr_kv_v(kv, layer, key) + (size_t)h * hd + i0);
        memcpy(out + i0, &a, sizeof a);
    }
    for (int key = k0; key < k1 && i0 < hd; key++) {
        const float *v = kr_kv_v(kv, layer, key) + (size_t)h * hd;
        float p = e[key - k0];
        for (int i = i0; i < hd; i++)
            out[i] += p * v[i];
    }
}

/* o[256] += the value sums of four heads of 64 over keys [k0, k1), e of head hh at
 * e + hh * e_stride: each key's value row is read as one run of 1 KiB while 16 registers
 * hold the sums; each column still adds its products in key order. */
KR_HOT static void values_4x64(float *o, const float *e, size_t e_stride, const kr_kv_view *kv,
                               int layer, int h0, int k0, int k1) {
    v16f a[16];
    for (int c = 0; c < 16; c++)
        memcpy(&a[c], o + 16 * c, sizeof a[c]);
    int B = kv->block_len;
    for (int kb = k0; kb < k1; kb += B - kb % B) { /* block by block, rows d apart */
        int kb1 = kb + B - kb % B < k1 ? kb + B - kb % B : k1;
        const float *vb = kr_kv_v(kv, layer, kb) + (size_t)h0 * 64;
        for (int key = kb; key < kb1; key++, vb += kv->d) {
            const v16f *v = (const v16f *)vb;
            for (int hh = 0; hh < 4; hh++) {
                float p = e[hh * e_stride + (size_t)(key - k0)];
                for (int c = 0; c < 4; c++)
                    a[4 * hh + c] += p * v[4 * hh + c];
            }
        }
    }
    for (int c = 0; c < 16; c++)
        memcpy(o + 16 * c, &a[c], sizeof a[c]);
}

#define HEAD_GROUP 4 /* heads a row-path task takes together */
/* Rows that always take the row path (a decode step of a few paths), their (row, heads)
 * items spread over the pool: the heads' keys are read by both threads at once. */
#define ROW_PATH_ROWS 4

/* Heads [h0, h0 + nh) of one row over keys [0, n_keys): o[nh * hd] from q[nh * hd];
 * s: nh * n_keys floats of scratch. */
static void attend_heads(float *o, const float *q, const kr_kv_view *kv, int layer, int h0, int nh,
                         int hd, int n_keys, float *s) {
    float scale = (float)(1.0 / sqrt((double)hd)), inv[HEAD_GROUP];
    for (int hh = 0; hh < nh; hh++) {
        float *sh = s + (size_t)hh * n_keys;
        head_scores(q + (size_t)hh * hd, kv, layer, h0 + hh, hd, 0, n_keys, scale, sh);
        inv[hh] = exp_shifted(sh, n_keys);
    }
    memset(o, 0, (size_t)nh * hd * sizeof *o);
    if (nh == 4 && hd == 64)
        values_4x64(o, s, (size_t)n_keys, kv, layer, h0, 0, n_keys);
    else
        for (int hh = 0; hh < nh; hh++)
            head_values(o + (size_t)hh * hd, s + (size_t)hh * n_keys, kv, layer, h0 + hh, hd, 0,
                        n_keys);
    for (int hh = 0; hh < nh; hh++)
        for (int i = 0; i < hd; i++)
            o[(size_t)hh * hd + i] *= inv[hh];
}

void kr_attend(float *out, const float *q, const kr_kv_view *kv, int layer, int n_keys, int n_heads,
               float *scores) {
    int hd = kv->d / n_heads;
    for (int h = 0; h < n_heads; h++)
        attend_heads(out + (size_t)h * hd, q + (size_t)h * hd, kv, layer, h, 1, hd, n_keys,
                     scores + (size_t)h * n_keys);
}

/* ---- many rows --------------------------------------------------------------------------------
 */

/* Rows that share a prefix of whole blocks (the sample paths of one forecast) attend over
 * it as a tile: each key is read once for KR_ATTN_TILE rows, the queries transposed so the
 * products vectorise across rows. Keys past the prefix are each row's own. */
#define KR_ATTN_TILE 32

size_t kr_attend_scores_floats(int max_keys, int n_heads, int d) {
    size_t keys = (size_t)(max_keys > 0 ? max_keys : 1);
    size_t per_row = (size_t)n_heads * keys, tile = KR_ATTN_TILE * (keys + 2 * (size_t)d);
    return (size_t)kr_parallel_threads() * (per_row > tile ? per_row : tile);
}

typedef struct {
    float *out;
    const float *q;
    const kr_attn_row *rows;
    int n_rows, d, layer, n_heads, per_task, n_tiles, own_max;
    int *shared; /* [n_tiles]: keys [0, shared) that every row of the tile reads alike */
    int *scored; /* [n_tiles]: keys [0, scored) the tile scores itself: all its rows' keys
                  * when they read one cache (a key past a row's end is then masked), else
                  * the shared ones (pass 1 scores the rest) */
    float *scratch;
    size_t scratch_stride;
    float *own; /* [n_rows][n_heads][own_max]: scores, then e, of each row's own keys */
    float *inv; /* [n_rows][n_heads]: 1 / Z */
} attend_job;

/* The row path: items are (row, group of heads) pairs, row-major, per_task of them a task
 * (a decode step of one path still spreads its heads over the threads). */
static int head_group(int n_heads) {
    return n_heads % HEAD_GROUP == 0 ? HEAD_GROUP : 1;
}

static void attend_task(void *arg, int task, int worker) {
    const attend_job *j = arg;
    int g = head_group(j->n_heads), groups = j->n_heads / g, hd = j->d / j->n_heads;
    int n = j->n_rows * groups;
    int i0 = task * j->per_task, i1 = i0 + j->per_task < n ? i0 + j->per_task : n;
    for (int i = i0; i < i1; i++) {
        int r = i / groups, h0 = i % groups * g;
        size_t at = (size_t)r * j->d + (size_t)h0 * hd;
        attend_heads(j->out + at, j->q + at, j->rows[r].kv, j->layer, h0, g, hd, j->rows[r].n_keys,
                     j->scratch + (size_t)worker * j->scratch_stride);
    }
}

/* The tile path in three passes: each row's own keys scored (pass 1, for tiles over several
 * caches), the shared keys and the softmax for a tile of rows, head by head (pass 2), the own
 * keys' values added and the sums normalised (pass 3). */
static float *own_at(const attend_job *j, int r, int h) {
    return j->own + ((size_t)r * j->n_heads + h) * j->own_max;
}

static void own_scores(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads, shared = j->shared[r / KR_ATTN_TILE];
    if (j->scored[r / KR_ATTN_TILE] > shared) return; /* its tile scores them */
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int h = 0; h < j->n_heads; h++)
        head_scores(j->q + (size_t)r * j->d + (size_t)h * hd, row->kv, j->layer, h, hd, shared,
                    row->n_keys, scale, own_at(j, r, h));
}

static void own_values(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads, g = head_group(j->n_heads) == 4 && hd == 64 ? 4 : 1;
    int shared = j->shared[r / KR_ATTN_TILE];
    for (int h = 0; h < j->n_heads; h += g) { /* the sums go on from the shared keys' */
        float *o = j->out + (size_t)r * j->d + (size_t)h * hd;
        if (g == 4)
            values_4x64(o, own_at(j, r, h), (size_t)j->own_max, row->kv, j->layer, h, shared,
                        row->n_keys);
        else
            head_values(o, own_at(j, r, h), row->kv, j->layer, h, hd, shared, row->n_keys);
        for (int hh = 0; hh < g; hh++) {
            float inv = j->inv[r * j->n_heads + h + hh];
            for (int i = 0; i < hd; i++)
                o[(size_t)hh * hd + i] *= inv;
        }
    }
}

KR_HOT static void attend_tile(void *arg, int task, int worker) {
    const attend_job *j = arg;
    enum { T = KR_ATTN_TILE };
    int h = task % j->n_heads, r0 = task / j->n_heads * T;
    int R = j->n_rows - r0 < T ? j->n_rows - r0 : T;
    int d = j->d, hd = d / j->n_heads, shared = j->shared[r0 / T], n_keys = 0;
    int scored = j->scored[r0 / T];
    const kr_kv_view *kv0 = j->rows[r0].kv;
    int B = kv0->block_len;
    for (int r = 0; r < R; r++)
        if (j->rows[r0 + r].n_keys > n_keys) n_keys = j->rows[r0 + r].n_keys;
    /* per worker: scores [n_keys][T] (a key's scores for all rows side by side), the
     * queries transposed [hd][T], and the outputs [T][hd] */
    float *sc = j->scratch + (size_t)worker * j->scratch_stride;
    float *qt = sc + (size_t)n_keys * T, *o = qt + (size_t)hd * T;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int r = 0; r < T; r++) { /* row by row: the rows are d floats apart, the same cache
                                     sets for a power of two, read one at a time */
        const float *qr = j->q + (size_t)(r0 + r) * d + (size_t)h * hd;
        for (int i = 0; i < hd; i++)
            qt[(size_t)i * T + r] = r < R ? qr[i] : 0.0f;
    }
    /* shared keys four at a time, the tile's 32 rows in two 16-lane vectors: each load of
     * the transposed queries serves four keys, eight chains of adds in flight (the last
     * group repeats its last key, writing the same scores twice) */
    for (int key = 0; key < scored; key += 4) {
        const float *kc[4];
        int kk[4];
        for (int c = 0; c < 4; c++) {
            kk[c] = key + c < scored ? key + c : scored - 1;
            kc[c] = kr_kv_kcol(kv0, j->layer, kk[c]) + (size_t)h * hd * B;
        }
        /* the first group of a block asks for the next block's keys of this head: blocks
         * lie far apart in the pool, where the hardware's prefetch does not follow */
        const float *next = NULL;
        if (key % B == 0 && key + B < scored)
            next = kr_kv_kcol(kv0, j->layer, key + B) + (size_t)h * hd * B;
        v16f a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0 = {0}, c1 = {0}, d0 = {0}, d1 = {0};
        if (next)
            for (int i = 0; i < hd; i += 64 / (int)sizeof(float) / (B < 16 ? B : 16))
                __builtin_prefetch(next + (size_t)i * B);
        for (int i = 0; i < hd; i++) {
            const v16f *qi = (const v16f *)(qt + (size_t)i * T);
            float ai = kc[0][(size_t)i * B], bi = kc[1][(size_t)i * B];
            float ci = kc[2][(size_t)i * B], di = kc[3][(size_t)i * B];
            a0 += qi[0] * ai, a1 += qi[1] * ai;
            b0 += qi[0] * bi, b1 += qi[1] * bi;
            c0 += qi[0] * ci, c1 += qi[1] * ci;
            d0 += qi[0] * di, d1 += qi[1] * di;
        }
        v16f *s0 = (v16f *)(sc + (size_t)kk[0] * T), *s1 = (v16f *)(sc + (size_t)kk[1] * T);
        v16f *s2 = (v16f *)(sc + (size_t)kk[2] * T), *s3 = (v16f *)(sc + (size_t)kk[3] * T);
        s0[0] = a0 * scale, s0[1] = a1 * scale;
        s1[0] = b0 * scale, s1[1] = b1 * scale;
        s2[0] = c0 * scale, s2[1] = c1 * scale;
        s3[0] = d0 * scale, s3[1] = d1 * scale;
    }
    for (int r = 0; r < T; r++) { /* past the shared keys: pass 1's scores, or masked */
        const float *own = r < R ? own_at(j, r0 + r, h) : NULL;
        int end = r < R ? j->rows[r0 + r].n_keys : 0;
        for (int key = shared; key < n_keys; key++)
            if (key >= end)
                sc[(size_t)key * T + r] = -INFINITY;
            else if (key >= scored)
                sc[(size_t)key * T + r] = own[key - shared];
    }
    /* softmax down each column, all rows at once (a padded key's e is 0, adding nothing) */
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
    /* sum of e_j v_j over the shared keys, in register tiles of 4 rows x 64 columns (x 16
     * columns for the rest of a head, a scalar loop for the columns of a head size that is
     * not a multiple of 16); each (row, column) adds its products in key order */
    memset(o, 0, (size_t)T * hd * sizeof *o);
    int hd16 = hd / 16 * 16;
    for (int ra = 0; ra < R; ra += 4) {
        int i0 = 0;
        for (; i0 + 64 <= hd16; i0 += 64) {
            v16f c[4][4] = {{{0}}};
            for (int kb = 0; kb < shared; kb += B - kb % B) { /* block by block: the value
                                                                  rows of a block are d apart */
                int kb1 = kb + B - kb % B < shared ? kb + B - kb % B : shared;
                const float *vb = kr_kv_v(kv0, j->layer, kb) + (size_t)h * hd + i0;
                for (int key = kb; key < kb1; key++, vb += d) {
                    const v16f *v = (const v16f *)vb;
                    v16f v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
                    const float *p = sc + (size_t)key * T + ra;
                    for (int r = 0; r < 4; r++) {
                        c[r][0] += p[r] * v0;
                        c[r][1] += p[r] * v1;
                        c[r][2] += p[r] * v2;
                        c[r][3] += p[r] * v3;
                    }
                }
            }
            for (int r = 0; r < 4 && ra + r < R; r++)
                memcpy(o + (size_t)(ra + r) * hd + i0, c[r], 64 * sizeof(float));
        }
        for (; i0 < hd16; i0 += 16) {
            v16f c[4] = {{0}};
            for (int key = 0; key < shared; key++) {
                v16f v = *(const v16f *)(kr_kv_v(kv0, j->layer, key) + (size_t)h * hd + i0);
                const float *p = sc + (size_t)key * T + ra;
                for (int r = 0; r < 4; r++)
                    c[r] += p[r] * v;
            }
            for (int r = 0; r < 4 && ra + r < R; r++)
                memcpy(o + (size_t)(ra + r) * hd + i0, &c[r], 16 * sizeof(float));
        }
    }
    for (int key = 0; key < shared && hd16 < hd; key++) {
        const float *v = kr_kv_v(kv0, j->layer, key) + (size_t)h * hd;
        for (int r = 0; r < R; r++) {
            float pk = sc[(size_t)key * T + r], *orow = o + (size_t)r * hd;
            for (int i = hd16; i < hd; i++)
                orow[i] += pk * v[i];
        }
    }
    /* unnormalised: the own keys' values are added to the same sums in pass 3 */
    for (int r = 0; r < R; r++) {
        const kr_attn_row *row = &j->rows[r0 + r];
        float *own = own_at(j, r0 + r, h), *out = j->out + (size_t)(r0 + r) * d + (size_t)h * hd;
        for (int key = shared; key < row->n_keys; key++)
            own[key - shared] = sc[(size_t)key * T + r];
        memcpy(out, o + (size_t)r * hd, (size_t)hd * sizeof *out);
        j->inv[(r0 + r) * j->n_heads + h] = inv[r];
    }
}

/* Keys [0, n) that every one of n_rows rows reads from the same memory: all the keys below
 * every row's end when the rows share one cache (the rows of one sequence, such as a
 * prefill's), else the whole blocks they hold in common below every row's end (the sample
 * paths forked from one context). */
static int shared_prefix(const kr_attn_row *rows, int n_rows, int *one_cache_out) {
    const kr_kv_view *kv0 = rows[0].kv;
    int B = kv0->block_len, n = rows[0].n_keys, one_cache = 1;
    for (int r = 1; r < n_rows; r++)
        if (rows[r].n_keys < n) n = rows[r].n_keys;
    int nb = n / B;
    for (int r = 1; r < n_rows; r++) {
        if (rows[r].kv == kv0 || rows[r].kv->blocks == kv0->blocks) continue;
        int b = 0;
        while (b < nb && rows[r].kv->blocks[b] == kv0->blocks[b])
            b++;
        nb = b;
        one_cache = 0;
    }
    *one_cache_out = one_cache;
    return one_cache ? n : nb * B;
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
    /* tiles when some tile's rows share 64 keys or more: each tile's shared keys read once
     * for all its rows, the rest of each row's keys its own */
    int most_shared = 0, own_scored = 0;
    kr_scratch tables = {0}; /* the tiles' shared and scored counts, 1 / Z, the own scores */
    if (n_rows > ROW_PATH_ROWS) {
        j.n_tiles = (n_rows + KR_ATTN_TILE - 1) / KR_ATTN_TILE;
        size_t own_cap = (size_t)n_rows * n_heads * (size_t)(max_keys > 0 ? max_keys : 1);
        size_t n_inv = (size_t)n_rows * n_heads, n_tab = (size_t)j.n_tiles * 2;
        char *mem = kr_scratch_take(&tables, KR_SCRATCH_ATTENTION,
                                    n_tab * sizeof(int) + (n_inv + own_cap) * sizeof(float));
        j.shared = mem ? (int *)mem : NULL;
        j.scored = j.shared ? j.shared + j.n_tiles : NULL;
        j.inv = mem ? (float *)(mem + n_tab * sizeof(int)) : NULL;
        j.own = mem ? j.inv + n_inv : NULL;
        for (int t = 0; j.shared && t < j.n_tiles; t++) {
            int r0 = t * KR_ATTN_TILE, R = n_rows - r0 < KR_ATTN_TILE ? n_rows - r0 : KR_ATTN_TILE;
            int one_cache, own = 0;
            j.shared[t] = j.scored[t] = shared_prefix(rows + r0, R, &one_cache);
            if (j.shared[t] > most_shared) most_shared = j.shared[t];
            for (int r = r0; r < r0 + R; r++) {
                if (rows[r].n_keys - j.shared[t] > own) own = rows[r].n_keys - j.shared[t];
                if (one_cache && rows[r].n_keys > j.scored[t]) j.scored[t] = rows[r].n_keys;
            }
            if (own > j.own_max) j.own_max = own;
            if (!one_cache && own > 0) own_scored = 1;
        }
        if (j.own_max < 1) j.own_max = 1;
    }
    /* without the tables (out of memory) the row-by-row path gives the same answer */
    if (most_shared >= 64 && j.shared && j.own_max <= (max_keys > 0 ? max_keys : 1)) {
        if (own_scored) kr_parallel_for(n_rows, own_scores, &j);
        kr_parallel_for(j.n_tiles * n_heads, attend_tile, &j);
        kr_parallel_for(n_rows, own_values, &j);
        kr_scratch_release(&tables);
        return;
    }
    kr_scratch_release(&tables);
    int items = n_rows * (n_heads / head_group(n_heads));
    j.per_task = (items + 4 * threads - 1) / (4 * threads);
    kr_parallel_for((items + j.per_task - 1) / j.per_task, attend_task, &j);
}
