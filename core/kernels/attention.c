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
KR_INLINE void head_scores(const float *qh, const kr_kv_view *kv, int layer, int h, int hd, int k0,
                           int k1, float scale, float *out) {
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
KR_INLINE float exp_shifted(float *s, int n) {
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
KR_INLINE void head_values(float *out, const float *e, const kr_kv_view *kv, int layer, int h,
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
KR_INLINE void values_4x64(float *o, const float *e, size_t e_stride, const kr_kv_view *kv,
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
KR_INLINE void attend_heads_body(float *o, const float *q, const kr_kv_view *kv, int layer, int h0,
                                 int nh, int hd, int n_keys, float *s) {
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
KR_LEVELS(attend_heads,
          (float *o, const float *q, const kr_kv_view *kv, int layer, int h0, int nh, int hd,
           int n_keys, float *s),
          (o, q, kv, layer, h0, nh, hd, n_keys, s))

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
    int n_rows, d, layer, n_heads, per_task, n_tiles;
    int group;   /* the row path's heads an item (HEAD_GROUP or 1) */
    int *shared; /* [n_tiles]: keys [0, shared) that every row of the tile reads alike */
    int *scored; /* [n_tiles]: keys [0, scored) the tile scores for all its rows at once:
                  * all its rows' keys when they read one cache (a key past a row's end is
                  * then masked), else the shared ones (each row scores the rest) */
    int *order;  /* [n_tiles]: the tiles by their work, the largest first (a causal run's
                  * last tiles read the most keys: begun last, one would end the loop alone) */
    float *scratch;
    size_t scratch_stride;
} attend_job;

/* The row path: items are (row, group of heads) pairs, row-major, per_task of them a task
 * (a decode step of one path still spreads its heads over the threads): heads in groups of
 * four, or one head an item when groups would leave a thread idle (the dependency layer's four
 * heads of one path). A group's values are the same sums as its heads' one by one. */
static int head_group(int n_heads, int n_rows, int threads) {
    if (n_heads % HEAD_GROUP != 0) return 1;
    return n_rows * (n_heads / HEAD_GROUP) < threads ? 1 : HEAD_GROUP;
}

static void attend_task(void *arg, int task, int worker) {
    const attend_job *j = arg;
    int g = j->group, groups = j->n_heads / g, hd = j->d / j->n_heads;
    int n = j->n_rows * groups;
    int i0 = task * j->per_task, i1 = i0 + j->per_task < n ? i0 + j->per_task : n;
    for (int i = i0; i < i1; i++) {
        int r = i / groups, h0 = i % groups * g;
        size_t at = (size_t)r * j->d + (size_t)h0 * hd;
        attend_heads(j->out + at, j->q + at, j->rows[r].kv, j->layer, h0, g, hd, j->rows[r].n_keys,
                     j->scratch + (size_t)worker * j->scratch_stride);
    }
}

/* The tile path, one task a (tile, head): the tile's queries transposed; the keys every row
 * reads alike scored for all rows at once; each row's own keys past them (tiles over several
 * caches) scored row by row; the softmax down the columns; the shared keys' values summed
 * for all rows in register tiles, then each row's own keys' values; the sums normalised. */

/* Scores of keys [k0, k1) for the tile's 32 rows (the queries transposed in qt[hd][32]),
 * eight keys at a time: a load of the queries serves eight keys, sixteen chains of adds in
 * flight (the last group repeats its last key, writing the same scores twice). */
KR_INLINE void tile_scores(float *sc, const float *qt, const kr_kv_view *kv, int layer, int h,
                           int hd, int k0, int k1, float scale) {
    enum { T = KR_ATTN_TILE, G = 8 };
    int B = kv->block_len;
    for (int key = k0; key < k1; key += G) {
        const float *kc[G];
        int kk[G];
        for (int c = 0; c < G; c++) {
            kk[c] = key + c < k1 ? key + c : k1 - 1;
            kc[c] = kr_kv_kcol(kv, layer, kk[c]) + (size_t)h * hd * B;
        }
        /* the first group of a block asks for the next block's keys of this head: blocks
         * lie far apart in the pool, where the hardware's prefetch does not follow */
        if (key % B < G && key - key % B + B < k1) {
            const float *next = kr_kv_kcol(kv, layer, key - key % B + B) + (size_t)h * hd * B;
            for (int i = 0; i < hd; i += 64 / (int)sizeof(float) / (B < 16 ? B : 16))
                __builtin_prefetch(next + (size_t)i * B);
        }
        v16f a[G][2];
        for (int c = 0; c < G; c++)
            a[c][0] = a[c][1] = (v16f){0};
        if (key + G <= k1 && key % B + G <= B) { /* one block: the keys side by side */
            const float *kb = kc[0];
            for (int i = 0; i < hd; i++, kb += B) {
                const v16f *qi = (const v16f *)(qt + (size_t)i * T);
                v16f q0 = qi[0], q1 = qi[1];
                for (int c = 0; c < G; c++) {
                    a[c][0] += q0 * kb[c];
                    a[c][1] += q1 * kb[c];
                }
            }
        } else {
            for (int i = 0; i < hd; i++) {
                const v16f *qi = (const v16f *)(qt + (size_t)i * T);
                v16f q0 = qi[0], q1 = qi[1];
                for (int c = 0; c < G; c++) {
                    float ki = kc[c][(size_t)i * B];
                    a[c][0] += q0 * ki;
                    a[c][1] += q1 * ki;
                }
            }
        }
        for (int c = 0; c < G; c++) {
            v16f *s = (v16f *)(sc + (size_t)kk[c] * T);
            s[0] = a[c][0] * scale;
            s[1] = a[c][1] * scale;
        }
    }
}

/* The own keys [k0, n_keys) of rows [r, r + nr) (nr <= 4) of the tile, one row's keys a
 * 16-lane vector (k0 and the block length multiples of 16: each group lies in one block),
 * the rows side by side so that four chains of adds are in flight; each key's sum runs over
 * i in order, as in head_scores. */
KR_INLINE void own_scores4(float *sc, const float *qt, const attend_job *j, int r0, int r, int nr,
                           int h, int hd, int k0, float scale) {
    enum { T = KR_ATTN_TILE };
    int B = j->rows[r0].kv->block_len;
    for (int at = k0;; at += KEY_LANES) {
        const float *kc[4] = {NULL, NULL, NULL, NULL}, *any = NULL;
        for (int g = 0; g < nr; g++)
            if (j->rows[r0 + r + g].n_keys > at)
                any = kc[g] = kr_kv_kcol(j->rows[r0 + r + g].kv, j->layer, at) + (size_t)h * hd * B;
        if (!any) return;
        for (int g = 0; g < 4; g++)
            if (!kc[g]) kc[g] = any;
        v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        const float *qr = qt + r;
        for (int i = 0; i < hd; i++, qr += T) {
            a0 += qr[0] * *(const v16f *)(kc[0] + (size_t)i * B);
            a1 += qr[nr > 1] * *(const v16f *)(kc[1] + (size_t)i * B);
            a2 += qr[nr > 2 ? 2 : 0] * *(const v16f *)(kc[2] + (size_t)i * B);
            a3 += qr[nr > 3 ? 3 : 0] * *(const v16f *)(kc[3] + (size_t)i * B);
        }
        v16f *acc[4] = {&a0, &a1, &a2, &a3};
        for (int g = 0; g < nr; g++) {
            int n = j->rows[r0 + r + g].n_keys - at;
            for (int l = 0; l < KEY_LANES && l < n; l++)
                sc[(size_t)(at + l) * T + r + g] = (*acc[g])[l] * scale;
        }
    }
}

#define VALUE_CHUNK 64 /* keys a value pass holds in the first-level cache for all rows */

/* o[rt][64] (rows hd apart) += the products of keys [k0, k1) for rows [ra, ra + rt) of the
 * tile, columns [i0, i0 + 64) of head h: rt x 4 sums in registers while the keys go by; each
 * (row, column) adds its products in key order. */
KR_INLINE void values_rows(float *o, int rt, const float *sc, int ra, const kr_kv_view *kv,
                           int layer, int h, int hd, int i0, int k0, int k1, int ahead) {
    enum { T = KR_ATTN_TILE };
    int B = kv->block_len, d = kv->d;
    v16f c[6][4];
    for (int r = 0; r < rt; r++)
        for (int x = 0; x < 4; x++)
            memcpy(&c[r][x], o + (size_t)r * hd + 16 * x, sizeof c[r][x]);
    for (int kb = k0; kb < k1; kb += B - kb % B) { /* block by block: rows d apart */
        int kb1 = kb + B - kb % B < k1 ? kb + B - kb % B : k1;
        const float *vb = kr_kv_v(kv, layer, kb) + (size_t)h * hd + i0;
        /* the first register tile asks for the rows VALUE_CHUNK keys on into the second-level
         * cache, a key at a time (the chunk's other tiles find them in the first) */
        const float *pf = kb + VALUE_CHUNK < ahead && VALUE_CHUNK % B == 0
                              ? kr_kv_v(kv, layer, kb + VALUE_CHUNK) + (size_t)h * hd + i0
                              : NULL;
        for (int key = kb; key < kb1; key++, vb += d) {
            const v16f *v = (const v16f *)vb;
            if (pf) {
                for (int x = 0; x < 64; x += 16)
                    __builtin_prefetch(pf + x, 0, 2);
                pf += d;
            }
            v16f v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
            const float *p = sc + (size_t)key * T + ra;
            for (int r = 0; r < rt; r++) {
                c[r][0] += p[r] * v0;
                c[r][1] += p[r] * v1;
                c[r][2] += p[r] * v2;
                c[r][3] += p[r] * v3;
            }
        }
    }
    for (int r = 0; r < rt; r++)
        for (int x = 0; x < 4; x++)
            memcpy(o + (size_t)r * hd + 16 * x, &c[r][x], sizeof c[r][x]);
}

KR_INLINE void attend_tile_body(void *arg, int task, int worker) {
    const attend_job *j = arg;
    enum { T = KR_ATTN_TILE };
    int h = task % j->n_heads, r0 = j->order[task / j->n_heads] * T;
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
    tile_scores(sc, qt, kv0, j->layer, h, hd, 0, scored, scale);
    /* each row's own keys past the tile's (rows over caches of their own past the shared
     * blocks) */
    if (scored < n_keys && B % KEY_LANES == 0 && scored % KEY_LANES == 0) {
        for (int r = 0; r < R; r += 4)
            own_scores4(sc, qt, j, r0, r, R - r < 4 ? R - r : 4, h, hd, scored, scale);
    } else if (scored < n_keys) {
        for (int r = 0; r < R; r++) {
            const kr_attn_row *row = &j->rows[r0 + r];
            for (int key = scored; key < row->n_keys; key++) {
                const float *kc = kr_kv_kcol(row->kv, j->layer, key) + (size_t)h * hd * B;
                float acc = 0.0f;
                for (int i = 0; i < hd; i++)
                    acc += qt[(size_t)i * T + r] * kc[(size_t)i * B];
                sc[(size_t)key * T + r] = acc * scale;
            }
        }
    }
    for (int r = 0; r < T; r++) { /* past a row's end (or a padding row): masked */
        int end = r < R ? j->rows[r0 + r].n_keys : 0;
        for (int key = end > shared ? end : shared; key < n_keys; key++)
            sc[(size_t)key * T + r] = -INFINITY;
    }
    /* softmax down each column, all rows at once (a masked key's e is 0: its row never
     * reads it) */
    v16f mx0, mx1, z0 = {0}, z1 = {0};
    memcpy(&mx0, sc, sizeof mx0);
    memcpy(&mx1, sc + 16, sizeof mx1);
    for (int key = 1; key < n_keys; key++) {
        const v16f *s = (const v16f *)(sc + (size_t)key * T);
        v16f s0 = s[0], s1 = s[1];
        mx0 = KR_SELECT16(s0 > mx0, s0, mx0);
        mx1 = KR_SELECT16(s1 > mx1, s1, mx1);
    }
    for (int key = 0; key < n_keys; key++) { /* e = exp(s - max), Z summed in key order */
        v16f *s = (v16f *)(sc + (size_t)key * T);
        s[0] -= mx0;
        s[1] -= mx1;
        exp_array(sc + (size_t)key * T, T);
        z0 += s[0];
        z1 += s[1];
    }
    float inv[T];
    for (int r = 0; r < 16; r++)
        inv[r] = 1.0f / z0[r], inv[16 + r] = 1.0f / z1[r];
    /* sum of e_j v_j over the shared keys: chunks of keys held in the first-level cache,
     * register tiles of 6 rows x 64 columns (x 16 columns for the rest of a head, a scalar
     * loop for the columns of a head size that is not a multiple of 16). Over one cache a
     * register tile goes on to the last key all its rows read (a causal run's rows end a key
     * apart); each row adds its keys past that on its own below. */
    memset(o, 0, (size_t)T * hd * sizeof *o);
    int hd64 = hd / 64 * 64, hd16 = hd / 16 * 16, group_end[(T + 5) / 6], tile_end = shared;
    for (int ra = 0; ra < R; ra += 6) {
        int e = n_keys;
        for (int r = ra; r < R && r < ra + 6; r++)
            if (j->rows[r0 + r].n_keys < e) e = j->rows[r0 + r].n_keys;
        group_end[ra / 6] = scored > shared ? e : shared; /* one cache: all its keys scored */
        if (group_end[ra / 6] > tile_end) tile_end = group_end[ra / 6];
    }
    for (int k0 = 0; k0 < tile_end && hd64 > 0; k0 += VALUE_CHUNK) {
        int k1 = k0 + VALUE_CHUNK < tile_end ? k0 + VALUE_CHUNK : tile_end;
        for (int i0 = 0; i0 < hd64; i0 += 64)
            for (int ra = 0; ra < R; ra += 6) {
                float *oa = o + (size_t)ra * hd + i0;
                int ke = k1 < group_end[ra / 6] ? k1 : group_end[ra / 6];
                if (ke <= k0) continue;
                int ahead = ra == 0 ? group_end[0] : 0;
                /* a constant row count a call: each inlined copy keeps its sums in registers */
#define VALUES_ROWS(RT) values_rows(oa, RT, sc, ra, kv0, j->layer, h, hd, i0, k0, ke, ahead)
                switch (R - ra < 6 ? R - ra : 6) {
                case 6:
                    VALUES_ROWS(6);
                    break;
                case 5:
                    VALUES_ROWS(5);
                    break;
                case 4:
                    VALUES_ROWS(4);
                    break;
                case 3:
                    VALUES_ROWS(3);
                    break;
                case 2:
                    VALUES_ROWS(2);
                    break;
                default:
                    VALUES_ROWS(1);
                    break;
                }
#undef VALUES_ROWS
            }
    }
    for (int ra = 0; ra < R && hd64 < hd16; ra += 4)
        for (int i0 = hd64; i0 < hd16; i0 += 16) {
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
    for (int key = 0; key < shared && hd16 < hd; key++) {
        const float *v = kr_kv_v(kv0, j->layer, key) + (size_t)h * hd;
        for (int r = 0; r < R; r++) {
            float pk = sc[(size_t)key * T + r], *orow = o + (size_t)r * hd;
            for (int i = hd16; i < hd; i++)
                orow[i] += pk * v[i];
        }
    }
    /* each row's keys past the shared ones, from its own cache, in key order; then 1 / Z */
    for (int r = 0; r < R; r++) {
        const kr_attn_row *row = &j->rows[r0 + r];
        float *orow = o + (size_t)r * hd, *out = j->out + (size_t)(r0 + r) * d + (size_t)h * hd;
        int i0 = 0;
        for (; i0 < hd64; i0 += 64) { /* key by key, 64 columns in registers */
            v16f a0, a1, a2, a3;
            memcpy(&a0, orow + i0, sizeof a0);
            memcpy(&a1, orow + i0 + 16, sizeof a1);
            memcpy(&a2, orow + i0 + 32, sizeof a2);
            memcpy(&a3, orow + i0 + 48, sizeof a3);
            for (int key = hd64 > 0 ? group_end[r / 6] : shared; key < row->n_keys;) {
                int kb1 = key + B - key % B < row->n_keys ? key + B - key % B : row->n_keys;
                const float *vb = kr_kv_v(row->kv, j->layer, key) + (size_t)h * hd + i0;
                for (; key < kb1; key++, vb += d) { /* block by block: rows d apart */
                    const v16f *v = (const v16f *)vb;
                    float p = sc[(size_t)key * T + r];
                    a0 += p * v[0], a1 += p * v[1], a2 += p * v[2], a3 += p * v[3];
                }
            }
            a0 *= inv[r], a1 *= inv[r], a2 *= inv[r], a3 *= inv[r];
            memcpy(out + i0, &a0, sizeof a0);
            memcpy(out + i0 + 16, &a1, sizeof a1);
            memcpy(out + i0 + 32, &a2, sizeof a2);
            memcpy(out + i0 + 48, &a3, sizeof a3);
        }
        for (; i0 < hd16; i0 += 16) {
            v16f a;
            memcpy(&a, orow + i0, sizeof a);
            for (int key = shared; key < row->n_keys; key++)
                a += sc[(size_t)key * T + r] *
                     *(const v16f *)(kr_kv_v(row->kv, j->layer, key) + (size_t)h * hd + i0);
            a *= inv[r];
            memcpy(out + i0, &a, sizeof a);
        }
        for (int key = shared; key < row->n_keys && i0 < hd; key++) {
            const float *v = kr_kv_v(row->kv, j->layer, key) + (size_t)h * hd;
            float p = sc[(size_t)key * T + r];
            for (int i = i0; i < hd; i++)
                orow[i] += p * v[i];
        }
        for (int i = i0; i < hd; i++)
            out[i] = orow[i] * inv[r];
    }
}
KR_LEVELS(attend_tile, (void *arg, int task, int worker), (arg, task, worker))

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
    int most_shared = 0;
    kr_scratch tables = {0}; /* the tiles' shared and scored counts, and their order */
    if (n_rows > ROW_PATH_ROWS) {
        j.n_tiles = (n_rows + KR_ATTN_TILE - 1) / KR_ATTN_TILE;
        j.shared =
            kr_scratch_take(&tables, KR_SCRATCH_ATTENTION, (size_t)j.n_tiles * 3 * sizeof(int));
        j.scored = j.shared ? j.shared + j.n_tiles : NULL;
        j.order = j.shared ? j.scored + j.n_tiles : NULL;
        for (int t = 0; j.shared && t < j.n_tiles; t++) {
            int r0 = t * KR_ATTN_TILE, R = n_rows - r0 < KR_ATTN_TILE ? n_rows - r0 : KR_ATTN_TILE;
            int one_cache;
            j.shared[t] = j.scored[t] = shared_prefix(rows + r0, R, &one_cache);
            if (j.shared[t] > most_shared) most_shared = j.shared[t];
            for (int r = r0; one_cache && r < r0 + R; r++)
                if (rows[r].n_keys > j.scored[t]) j.scored[t] = rows[r].n_keys;
            /* by the keys scored for all rows, the most first (insertion: a few dozen tiles) */
            int at = t;
            for (; at > 0 && j.scored[j.order[at - 1]] < j.scored[t]; at--)
                j.order[at] = j.order[at - 1];
            j.order[at] = t;
        }
    }
    /* without the tables (out of memory) the row-by-row path gives the same answer */
    if (most_shared >= 64 && j.shared) {
        kr_parallel_for(j.n_tiles * n_heads, attend_tile, &j);
        kr_scratch_release(&tables);
        return;
    }
    kr_scratch_release(&tables);
    j.group = head_group(n_heads, n_rows, threads);
    int items = n_rows * (n_heads / j.group);
    j.per_task = (items + 4 * threads - 1) / (4 * threads);
    kr_parallel_for((items + j.per_task - 1) / j.per_task, attend_task, &j);
}
