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
#include "nn.h"
#include "parallel.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sixteen floats as one value (GCC/clang vector extension): one AVX-512 register, two AVX
 * ones, four SSE ones. aligned(4): loads and stores need no alignment. */
typedef float v16f __attribute__((vector_size(64), aligned(4)));
typedef float v8f __attribute__((vector_size(32), aligned(4)));

#define KEY_LANES 16

/* ---- one row -------------------------------------------------------------------------------- */

/* out[key - k0] for keys [k0, k1) of head h: the scaled dot products with qh[hd]. */
KR_HOT static void head_scores(const float *qh, const kr_kv_view *kv, int layer, int h, int hd,
                               int k0, int k1, float scale, float *out) {
    int B = kv->block_len;
    for (int key = k0; key < k1;) {
        int j0 = key % B, n = B - j0;
        if (n > k1 - key) n = k1 - key;
        if (n > KEY_LANES) n = KEY_LANES;
        const float *kt = kr_kv_kcol(kv, layer, key) + (size_t)h * hd * B;
        if (n == KEY_LANES) {
            v16f acc = {0};
            for (int i = 0; i < hd; i++)
                acc += qh[i] * *(const v16f *)(kt + (size_t)i * B);
            acc *= scale;
            memcpy(out + key - k0, &acc, sizeof acc);
        } else {
            float acc[KEY_LANES] = {0};
            for (int i = 0; i < hd; i++)
                for (int l = 0; l < n; l++)
                    acc[l] += qh[i] * kt[(size_t)i * B + l];
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

/* out[hd] += e_j * v_j over keys [k0, k1) of head h, keys in order. */
KR_HOT static void head_values(float *out, const float *e, const kr_kv_view *kv, int layer, int h,
                               int hd, int k0, int k1) {
    for (int key = k0; key < k1; key++) {
        const float *v = kr_kv_v(kv, layer, key) + (size_t)h * hd;
        float p = e[key - k0];
        for (int i = 0; i < hd; i++)
            out[i] += p * v[i];
    }
}

void kr_attend(float *out, const float *q, const kr_kv_view *kv, int layer, int n_keys, int n_heads,
               float *scores) {
    int d = kv->d, hd = d / n_heads;
    float scale = (float)(1.0 / sqrt((double)hd));
    memset(out, 0, (size_t)d * sizeof *out);
    for (int h = 0; h < n_heads; h++) {
        float *s = scores + (size_t)h * n_keys, *oh = out + (size_t)h * hd;
        head_scores(q + (size_t)h * hd, kv, layer, h, hd, 0, n_keys, scale, s);
        float inv = exp_shifted(s, n_keys);
        head_values(oh, s, kv, layer, h, hd, 0, n_keys);
        for (int i = 0; i < hd; i++)
            oh[i] *= inv;
    }
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
    int n_rows, d, layer, n_heads, per_task, shared, n_tiles, own_max;
    float *scratch;
    size_t scratch_stride;
    float *own; /* [n_rows][n_heads][own_max]: scores, then e, of each row's own keys */
    float *inv; /* [n_rows][n_heads]: 1 / Z */
} attend_job;

static void attend_task(void *arg, int task, int worker) {
    const attend_job *j = arg;
    int r0 = task * j->per_task, r1 = r0 + j->per_task < j->n_rows ? r0 + j->per_task : j->n_rows;
    for (int r = r0; r < r1; r++)
        kr_attend(j->out + (size_t)r * j->d, j->q + (size_t)r * j->d, j->rows[r].kv, j->layer,
                  j->rows[r].n_keys, j->n_heads, j->scratch + (size_t)worker * j->scratch_stride);
}

/* The tile path in three passes: each row's own keys scored (pass 1), the shared keys and
 * the softmax for a tile of rows, head by head (pass 2), the own keys' values added and the
 * sums normalised (pass 3). */
static float *own_at(const attend_job *j, int r, int h) {
    return j->own + ((size_t)r * j->n_heads + h) * j->own_max;
}

static void own_scores(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int h = 0; h < j->n_heads; h++)
        head_scores(j->q + (size_t)r * j->d + (size_t)h * hd, row->kv, j->layer, h, hd, j->shared,
                    row->n_keys, scale, own_at(j, r, h));
}

static void own_values(void *arg, int r, int worker) {
    (void)worker;
    const attend_job *j = arg;
    const kr_attn_row *row = &j->rows[r];
    int hd = j->d / j->n_heads;
    for (int h = 0; h < j->n_heads; h++) {
        float *o = j->out + (size_t)r * j->d + (size_t)h * hd, inv = j->inv[r * j->n_heads + h];
        head_values(o, own_at(j, r, h), row->kv, j->layer, h, hd, j->shared, row->n_keys);
        for (int i = 0; i < hd; i++)
            o[i] *= inv;
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
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int i = 0; i < hd; i++)
        for (int r = 0; r < T; r++)
            qt[(size_t)i * T + r] = r < R ? j->q[(size_t)(r0 + r) * d + (size_t)h * hd + i] : 0.0f;
    /* a tile of fewer rows (the paths of a small forecast) computes only the vectors that
     * hold rows: each row's lane is computed the same way either way */
    int nv = (R + 7) / 8, Rp = nv * 8;
    /* up to 8 rows: eight keys at a time, so that eight sums are in flight (each key's
     * sum over i still runs in order) */
    for (int key = 0; key < shared && nv == 1; key += 8) {
        int nk = shared - key < 8 ? shared - key : 8;
        const float *kp[8];
        for (int g = 0; g < 8; g++)
            kp[g] = kr_kv_kcol(kv0, j->layer, key + (g < nk ? g : 0)) + (size_t)h * hd * B;
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        for (int i = 0; i < hd; i++) {
            v8f qi = *(const v8f *)(qt + (size_t)i * T);
            size_t at = (size_t)i * B;
            a0 += qi * kp[0][at], a1 += qi * kp[1][at], a2 += qi * kp[2][at];
            a3 += qi * kp[3][at], a4 += qi * kp[4][at], a5 += qi * kp[5][at];
            a6 += qi * kp[6][at], a7 += qi * kp[7][at];
        }
        v8f acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
        for (int g = 0; g < nk; g++)
            *(v8f *)(sc + (size_t)(key + g) * T) = acc[g] * scale;
    }
    for (int key = 0; key < shared && nv > 1 && nv < 4; key += 2) {
        int k2 = key + 1 < shared ? key + 1 : key;
        const float *ka = kr_kv_kcol(kv0, j->layer, key) + (size_t)h * hd * B;
        const float *kb = kr_kv_kcol(kv0, j->layer, k2) + (size_t)h * hd * B;
        v8f a[3] = {{0}}, b[3] = {{0}};
        for (int i = 0; i < hd; i++) {
            const v8f *qi = (const v8f *)(qt + (size_t)i * T);
            float ai = ka[(size_t)i * B], bi = kb[(size_t)i * B];
            for (int v = 0; v < nv; v++) {
                a[v] += qi[v] * ai;
                b[v] += qi[v] * bi;
            }
        }
        v8f *sa = (v8f *)(sc + (size_t)key * T), *sb = (v8f *)(sc + (size_t)k2 * T);
        for (int v = 0; v < nv; v++) {
            sa[v] = a[v] * scale;
            if (k2 != key) sb[v] = b[v] * scale;
        }
    }
    /* shared keys two at a time, the tile's 32 rows in four vectors: each load of the
     * transposed queries serves both keys */
    for (int key = 0; key < shared && nv == 4; key += 2) {
        int k2 = key + 1 < shared ? key + 1 : key;
        const float *ka = kr_kv_kcol(kv0, j->layer, key) + (size_t)h * hd * B;
        const float *kb = kr_kv_kcol(kv0, j->layer, k2) + (size_t)h * hd * B;
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        for (int i = 0; i < hd; i++) {
            const v8f *qi = (const v8f *)(qt + (size_t)i * T);
            float ai = ka[(size_t)i * B], bi = kb[(size_t)i * B];
            a0 += qi[0] * ai, a1 += qi[1] * ai, a2 += qi[2] * ai, a3 += qi[3] * ai;
            b0 += qi[0] * bi, b1 += qi[1] * bi, b2 += qi[2] * bi, b3 += qi[3] * bi;
        }
        v8f *sa = (v8f *)(sc + (size_t)key * T), *sb = (v8f *)(sc + (size_t)k2 * T);
        sa[0] = a0 * scale, sa[1] = a1 * scale, sa[2] = a2 * scale, sa[3] = a3 * scale;
        if (k2 != key)
            sb[0] = b0 * scale, sb[1] = b1 * scale, sb[2] = b2 * scale, sb[3] = b3 * scale;
    }
    for (int key = shared; key < n_keys; key++)
        for (int r = 0; r < Rp; r++)
            sc[(size_t)key * T + r] = r < R && key < j->rows[r0 + r].n_keys
                                          ? own_at(j, r0 + r, h)[key - shared]
                                          : -INFINITY;
    /* softmax down each column, all rows at once (a padded key's e is 0, adding nothing);
     * columns past Rp hold no row */
    float mx[T], inv[T];
    for (int r = 0; r < Rp; r++)
        mx[r] = sc[r];
    for (int key = 1; key < n_keys; key++)
        for (int r = 0; r < Rp; r++)
            mx[r] = sc[(size_t)key * T + r] > mx[r] ? sc[(size_t)key * T + r] : mx[r];
    for (int key = 0; key < n_keys; key++)
        for (int r = 0; r < Rp; r++)
            sc[(size_t)key * T + r] -= mx[r];
    if (Rp == T)
        exp_array(sc, n_keys * T);
    else
        for (int key = 0; key < n_keys; key++) /* elementwise: the same bits */
            exp_array(sc + (size_t)key * T, Rp);
    for (int r = 0; r < Rp; r++)
        inv[r] = 0.0f;
    for (int key = 0; key < n_keys; key++)
        for (int r = 0; r < Rp; r++)
            inv[r] += sc[(size_t)key * T + r];
    for (int r = 0; r < Rp; r++)
        inv[r] = 1.0f / inv[r];
    /* sum of e_j v_j over the shared keys, in register tiles of 4 rows x 16 columns (a
     * scalar loop for the columns of a head size that is not a multiple of 16) */
    memset(o, 0, (size_t)T * hd * sizeof *o);
    int hd16 = hd / 16 * 16;
    if (R <= 8) { /* few rows: each key's values read once, the sums kept in o (in L1) */
        /* a head's part of consecutive value rows lies d floats apart, a page holding few
         * of them: the hardware prefetcher cannot follow, so the rows PF keys ahead are
         * asked for (the next block's first ones near a block's end) */
        enum { PF = 4 };
        for (int k0 = 0; k0 < shared; k0 += B) {
            const float *v = kr_kv_v(kv0, j->layer, k0) + (size_t)h * hd;
            int k1 = k0 + B < shared ? k0 + B : shared;
            const float *vn = k1 < shared ? kr_kv_v(kv0, j->layer, k1) + (size_t)h * hd : NULL;
            for (int key = k0; key < k1; key++, v += kv0->d) {
                const float *ahead = key + PF < k1 ? v + (size_t)PF * kv0->d
                                     : vn && key + PF - k1 < B
                                         ? vn + (size_t)(key + PF - k1) * kv0->d
                                         : NULL;
                for (int i = 0; ahead && i < hd; i += 16)
                    __builtin_prefetch(ahead + i);
                const float *p = sc + (size_t)key * T;
                for (int r = 0; r < R; r++) {
                    float pr = p[r], *orow = o + (size_t)r * hd;
                    for (int i = 0; i < hd; i++)
                        orow[i] += pr * v[i];
                }
            }
        }
        hd16 = 0; /* done: neither loop below runs */
    }
    for (int ra = 0; ra < R && hd16 > 0; ra += 4)
        for (int i0 = 0; i0 < hd16; i0 += 16) {
            v8f c[4][2] = {{{0}}};
            /* block by block: a key's value row is d floats after the previous one in its
             * block (no division per key) */
            for (int k0 = 0; k0 < shared; k0 += B) {
                const float *v = kr_kv_v(kv0, j->layer, k0) + (size_t)h * hd + i0;
                int k1 = k0 + B < shared ? k0 + B : shared;
                for (int key = k0; key < k1; key++, v += kv0->d) {
                    v8f v0 = *(const v8f *)v, v1 = *(const v8f *)(v + 8);
                    const float *p = sc + (size_t)key * T + ra;
                    for (int r = 0; r < 4; r++) {
                        c[r][0] += p[r] * v0;
                        c[r][1] += p[r] * v1;
                    }
                }
            }
            for (int r = 0; r < 4 && ra + r < R; r++)
                memcpy(o + (size_t)(ra + r) * hd + i0, c[r], 16 * sizeof(float));
        }
    for (int key = 0; key < shared && hd16 < hd && R > 8; key++) {
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
        j.inv = malloc((size_t)n_rows * n_heads * sizeof(float));
        if (j.own && j.inv) { /* without them, the row-by-row path gives the same answer */
            j.n_tiles = (n_rows + KR_ATTN_TILE - 1) / KR_ATTN_TILE;
            if (j.own_max > 0) kr_parallel_for(n_rows, own_scores, &j);
            kr_parallel_for(j.n_tiles * n_heads, attend_tile, &j);
            kr_parallel_for(n_rows, own_values, &j);
            free(j.own);
            free(j.inv);
            return;
        }
        free(j.own);
        free(j.inv);
    }
    j.per_task = (n_rows + 4 * threads - 1) / (4 * threads);
    kr_parallel_for((n_rows + j.per_task - 1) / j.per_task, attend_task, &j);
}
