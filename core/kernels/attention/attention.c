/* attention.c — causal multi-head attention over KV blocks: one query row at a time, or
 * tiles of rows that share a prefix of blocks (the sample paths of one forecast).
 *
 * Every path computes each (row, head) the same way, so a row's result does not depend on
 * which path ran it, on what else was in the batch or on the thread count:
 *
 *   score_j = (chain over i, in order, of acc = fma(q_i, k_ji, acc)) * scale
 *   e_j     = exp(score_j - max_j score_j)         (exp1_fma, scalar.h; exp_fma_sub, vmath.h)
 *   Z       = sum over j, in order, of e_j
 *   o_i     = (chain over j, in order, of acc = fma(e_j, v_ji, acc)) * (1 / Z)
 *
 * Each fma rounds once: the level's FMA instruction (KR_FMA, vmath.h) or fmaf, the same
 * bits on every level; the exp's reduction and polynomial are fmas too. The largest score
 * is the same whichever order it is found in (the tile path finds it as it scores); Z's sum
 * and each o_i's chain run in key order on every path.
 *
 * Keys are stored transposed within a block (nn.h), so the row path computes a head's
 * scores for 16 keys at once, one vector lane a key.
 */
#include "attention.h"
#include "base.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_GROUP 4 /* heads a row-path task takes together */
/* Rows that always take the row path (a decode step of a few paths), their (row, heads)
 * items spread over the pool: the heads' keys are read by both threads at once. */
#define ROW_PATH_ROWS 4

/* ---- the hot loops, built per instruction set ------------------------------------------- */

#define KEY_LANES 16 /* keys the row path scores at once: one line of a block's keys (nn.h) */

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

/* The end of the run of keys from `key` that lies in key's block of B, keys below k1 */
static inline int block_end(int key, int B, int k1) {
    int end = key - key % B + B;
    return end < k1 ? end : k1;
}

#define VALUE_CHUNK 64 /* keys a value pass holds in the first-level cache for all rows */
/* One block's part of a value pass's chunk of keys, found once for all the chunk's register
 * tiles: keys [k0, k1), the value row of k0 at the head's first column, and the row
 * VALUE_CHUNK keys on that the first tile asks for (NULL: none) */
typedef struct {
    int k0, k1;
    const void *v, *ahead; /* the view's elements: float32 or BF16 */
} value_run;

#define KR_LANES_TEMPLATE "attention_modes.h"
#include "lanes.h"

KR_DISPATCH(attend_heads_f,
            (float *o, const float *q, const kr_kv_view *kv, int layer, int h0, int nh, int hd,
             int n_keys, float *s),
            (o, q, kv, layer, h0, nh, hd, n_keys, s))
KR_DISPATCH(attend_heads_h,
            (float *o, const float *q, const kr_kv_view *kv, int layer, int h0, int nh, int hd,
             int n_keys, float *s),
            (o, q, kv, layer, h0, nh, hd, n_keys, s))
KR_DISPATCH(attend_tile_f, (void *arg, int task, int worker), (arg, task, worker))
KR_DISPATCH(attend_tile_h, (void *arg, int task, int worker), (arg, task, worker))

static void attend_heads(float *o, const float *q, const kr_kv_view *kv, int layer, int h0, int nh,
                         int hd, int n_keys, float *s) {
    if (kv->bf16)
        attend_heads_h(o, q, kv, layer, h0, nh, hd, n_keys, s);
    else
        attend_heads_f(o, q, kv, layer, h0, nh, hd, n_keys, s);
}

/* ---- one row ------------------------------------------------------------------------------ */

void kr_attend(float *out, const float *q, const kr_kv_view *kv, int layer, int n_keys, int n_heads,
               float *scores) {
    int hd = kv->d / n_heads;
    for (int h = 0; h < n_heads; h++)
        attend_heads(out + (size_t)h * hd, q + (size_t)h * hd, kv, layer, h, 1, hd, n_keys,
                     scores + (size_t)h * n_keys);
}

/* ---- many rows ---------------------------------------------------------------------------- */

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
        /* the rows of one call read one model's caches: one element type */
        kr_parallel_for(j.n_tiles * n_heads, rows[0].kv->bf16 ? attend_tile_h : attend_tile_f, &j);
        kr_scratch_release(&tables);
        return;
    }
    kr_scratch_release(&tables);
    j.group = head_group(n_heads, n_rows, threads);
    int items = n_rows * (n_heads / j.group);
    j.per_task = (items + 4 * threads - 1) / (4 * threads);
    kr_parallel_for((items + j.per_task - 1) / j.per_task, attend_task, &j);
}
