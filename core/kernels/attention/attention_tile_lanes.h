/* attention_tile_lanes.h — attention's tile path: a tile of up to 32 rows and one head a
 * task, its keys scored and its values summed for all rows at once. A template built once per
 * instruction set (lanes.h) and per element type of the keys and values (attention_kv.h), as
 * attention_lanes.h is; entry point: attend_tile. attention_modes.h includes it, after
 * attention_kv.h.
 *
 * Register blocks are chosen per level for its register file (32 registers on AVX-512, 16 on
 * AVX2 and SSE); each sum still runs in the order attention.c states, whatever the block. */

#define tile_scores        KV_LN(tile_scores)
#define own_group          KV_LN(own_group)
#define own_scores4        KV_LN(own_scores4)
#define values_rows        KV_LN(values_rows)
#define own_values_rows    KV_LN(own_values_rows)
#define tile_task          KV_LN(tile_task)
#define tile_queries       KV_LN(tile_queries)
#define tile_score         KV_LN(tile_score)
#define tile_max           KV_LN(tile_max)
#define tile_exp           KV_LN(tile_exp)
#define tile_shared_values KV_LN(tile_shared_values)
#define tile_shared_rest   KV_LN(tile_shared_rest)
#define tile_own_values    KV_LN(tile_own_values)
#define attend_tile        KV_LN(attend_tile)

#define ROW_VECS (KR_ATTN_TILE / KR_W) /* vectors a tile's 32 rows */
/* Keys tile_scores scores at once (ROW_VECS sums each); rows x columns of a register tile of
 * values_rows (4 vectors a row); rows own_values_rows takes side by side (4 vectors a row):
 * within 32 registers on AVX-512, 16 on AVX2 and SSE. */
#if KR_W == 16
#define TILE_KEYS  8
#define VALUE_ROWS 6
#define OWN_ROWS   4
#elif KR_W == 8
#define TILE_KEYS  2
#define VALUE_ROWS 3
#define OWN_ROWS   2
#else
#define TILE_KEYS  1
#define VALUE_ROWS 2
#define OWN_ROWS   2
#endif
#define VALUE_COLS (4 * KR_W) /* columns of a values_rows register tile */
_Static_assert(VALUE_ROWS >= 1 && VALUE_ROWS <= 6, "attend_tile's switch has cases 1 to 6");

/* ---- many rows: the tile path ------------------------------------------------------------ */

/* Scores of keys [k0, k1) for the rows of vectors [V0, V0 + NV) of the tile (the queries
 * transposed in qt[hd][32]), block by block, TILE_KEYS keys at a time: a load of the queries
 * serves them all, TILE_KEYS x NV chains of adds in flight (a block's last group repeats its
 * last key, writing the same scores twice). The other vectors' scores are not written.
 * The scores of keys below mend (read by every row) go into each row's largest, mx[r], as
 * they are written. V0 and NV are constants at each call (the caller's switch), so the sums
 * stay in registers. */
KR_INLINE KR_LEVEL_FN void tile_scores(float *sc, float *mx, const float *qt, const kr_kv_view *kv,
                                       int layer, int h, int hd, int k0, int k1, int mend,
                                       float scale, int V0, int NV) {
    enum { T = KR_ATTN_TILE, G = TILE_KEYS };
    int B = kv->block_len;
    vf m[ROW_VECS];
    for (int n = V0; n < V0 + NV; n++)
        m[n] = KR_LOAD(mx + n * KR_W);
    for (int kb = k0; kb < k1;) {
        int kb1 = block_end(kb, B, k1); /* this block's keys [kb, kb1) */
        const kv_t *blk = KV_KCOL(kv, layer, kb) + (size_t)h * hd * B;
        /* the next block's keys of this head, asked for now: blocks lie far apart in the
         * pool, where the hardware's prefetch does not follow */
        const kv_t *next = kb1 < k1 ? KV_KCOL(kv, layer, kb1) + (size_t)h * hd * B : NULL;
        for (int key = kb; key < kb1; key += G) {
            int last = key + G <= kb1 ? G - 1 : kb1 - 1 - key; /* keys past it repeat it */
            vf a[G][ROW_VECS];
            for (int c = 0; c < G; c++)
                for (int n = V0; n < V0 + NV; n++)
                    a[c][n] = (vf){0};
            const kv_t *kc = blk + (key - kb);
            /* the next block's line i asked for with element i of the first group's keys:
             * spread over the block, not all at once */
            const kv_t *pf = key == kb ? next : NULL;
            if (last == G - 1 && pf) {
                for (int i = 0; i < hd; i++, kc += B) {
                    const float *qi = qt + (size_t)i * T;
                    __builtin_prefetch(pf + (size_t)i * B);
                    for (int c = 0; c < G; c++)
                        for (int n = V0; n < V0 + NV; n++)
                            a[c][n] =
                                KR_FMA(KR_LOAD(qi + n * KR_W), KR_SPLAT(KV_F(kc[c])), a[c][n]);
                }
            } else if (last == G - 1) { /* G keys side by side */
                for (int i = 0; i < hd; i++, kc += B) {
                    const float *qi = qt + (size_t)i * T;
                    for (int c = 0; c < G; c++)
                        for (int n = V0; n < V0 + NV; n++)
                            a[c][n] =
                                KR_FMA(KR_LOAD(qi + n * KR_W), KR_SPLAT(KV_F(kc[c])), a[c][n]);
                }
            } else {
                for (int i = 0; i < hd; i++, kc += B) {
                    const float *qi = qt + (size_t)i * T;
                    for (int c = 0; c < G; c++) {
                        float ki = KV_F(kc[c < last ? c : last]);
                        for (int n = V0; n < V0 + NV; n++)
                            a[c][n] = KR_FMA(KR_LOAD(qi + n * KR_W), KR_SPLAT(ki), a[c][n]);
                    }
                }
            }
            for (int c = 0; c < G; c++) {
                int kc_at = key + (c < last ? c : last);
                for (int n = V0; n < V0 + NV; n++) {
                    vf s = a[c][n] * scale;
                    memcpy(sc + (size_t)kc_at * T + n * KR_W, &s, sizeof s);
                    if (kc_at < mend) m[n] = KR_SELECT(s > m[n], s, m[n]);
                }
            }
        }
        kb = kb1;
    }
    for (int n = V0; n < V0 + NV; n++)
        memcpy(mx + n * KR_W, &m[n], sizeof m[n]);
}

/* Row r's group of 16 own keys from `at` (head h), or NULL past the row's end */
KR_INLINE const kv_t *own_group(const attend_job *j, int row, int at, int h, int hd, int B) {
    const kr_attn_row *w = &j->rows[row];
    return w->n_keys > at ? KV_KCOL(w->kv, j->layer, at) + (size_t)h * hd * B : NULL;
}

/* The own keys [k0, n_keys) of rows [r, r + nr) (nr <= 4) of the tile's R, one row's 16 keys
 * a group (k0 and the block length multiples of 16: each group lies in one block), the rows
 * side by side so that four chains of adds are in flight; each key's sum runs over i in
 * order, as in head_scores. Each row's next group (at its last, the first group of the row
 * four on) is asked for while this one is scored: it lies in a block of its own, far from
 * this one, where the hardware's prefetch does not follow. */
KR_INLINE KR_LEVEL_FN void own_scores4(float *sc, const float *qt, const attend_job *j, int r0,
                                       int r, int nr, int R, int h, int hd, int k0, float scale) {
    enum { T = KR_ATTN_TILE };
    int B = j->rows[r0].kv->block_len;
    for (int at = k0;; at += KEY_LANES) {
        const kv_t *kc[4] = {NULL, NULL, NULL, NULL}, *any = NULL, *nx[4];
        for (int g = 0; g < nr; g++)
            if ((kc[g] = own_group(j, r0 + r + g, at, h, hd, B))) any = kc[g];
        if (!any) return;
        for (int g = 0; g < 4; g++) {
            if (!kc[g]) kc[g] = any;
            nx[g] = g < nr ? own_group(j, r0 + r + g, at + KEY_LANES, h, hd, B) : NULL;
            if (!nx[g] && r + g + 4 < R) nx[g] = own_group(j, r0 + r + g + 4, k0, h, hd, B);
            if (!nx[g]) nx[g] = kc[g];
        }
        vf a[4][KEY_VECS];
        for (int g = 0; g < 4; g++)
            for (int n = 0; n < KEY_VECS; n++)
                a[g][n] = (vf){0};
        const float *qr = qt + r;
        int q1 = nr > 1, q2 = nr > 2 ? 2 : 0, q3 = nr > 3 ? 3 : 0; /* a missing row: row 0's */
        for (int i = 0; i < hd; i++, qr += T)
            for (int n = 0; n < KEY_VECS; n++) {
                size_t at_i = (size_t)i * B + n * KR_W;
                if (n == 0)
                    for (int g = 0; g < 4; g++)
                        __builtin_prefetch(nx[g] + at_i);
                a[0][n] = KR_FMA(KR_SPLAT(qr[0]), KV_LOAD(kc[0] + at_i), a[0][n]);
                a[1][n] = KR_FMA(KR_SPLAT(qr[q1]), KV_LOAD(kc[1] + at_i), a[1][n]);
                a[2][n] = KR_FMA(KR_SPLAT(qr[q2]), KV_LOAD(kc[2] + at_i), a[2][n]);
                a[3][n] = KR_FMA(KR_SPLAT(qr[q3]), KV_LOAD(kc[3] + at_i), a[3][n]);
            }
        for (int g = 0; g < nr; g++) {
            float s[KEY_LANES];
            memcpy(s, a[g], sizeof s);
            int n = j->rows[r0 + r + g].n_keys - at;
            for (int l = 0; l < KEY_LANES && l < n; l++)
                sc[(size_t)(at + l) * T + r + g] = s[l] * scale;
        }
    }
}

/* o[rt][VALUE_COLS] (rows hd apart) += the products of the keys of `runs` below k1 for rows
 * [ra, ra + rt) of the tile, columns [i0, i0 + VALUE_COLS) of the head: rt x 4 sums in
 * registers while the keys go by; each (row, column) adds its products in key order. With
 * `ahead`, the rows VALUE_CHUNK keys on are asked for into the second-level cache, a key at a
 * time (the chunk's other tiles find them in the first). */
KR_INLINE KR_LEVEL_FN void values_rows(float *o, int rt, const float *sc, int ra,
                                       const value_run *runs, int n_runs, int d, int hd, int i0,
                                       int k1, int ahead) {
    enum { T = KR_ATTN_TILE };
    vf c[VALUE_ROWS][4];
    for (int r = 0; r < rt; r++)
        for (int x = 0; x < 4; x++)
            c[r][x] = KR_LOAD(o + (size_t)r * hd + KR_W * x);
    for (int u = 0; u < n_runs && runs[u].k0 < k1; u++) { /* block by block: rows d apart */
        int kend = runs[u].k1 < k1 ? runs[u].k1 : k1;
        const kv_t *vb = (const kv_t *)runs[u].v + i0;
        const kv_t *pf = ahead && runs[u].ahead ? (const kv_t *)runs[u].ahead + i0 : NULL;
        for (int key = runs[u].k0; key < kend; key++, vb += d) {
            if (pf) {
                for (int x = 0; x < VALUE_COLS; x += 16)
                    __builtin_prefetch(pf + x, 0, 2);
                pf += d;
            }
            vf v0 = KV_LOAD(vb), v1 = KV_LOAD(vb + KR_W), v2 = KV_LOAD(vb + 2 * KR_W),
               v3 = KV_LOAD(vb + 3 * KR_W);
            const float *p = sc + (size_t)key * T + ra;
            for (int r = 0; r < rt; r++) {
                c[r][0] = KR_FMA(KR_SPLAT(p[r]), v0, c[r][0]);
                c[r][1] = KR_FMA(KR_SPLAT(p[r]), v1, c[r][1]);
                c[r][2] = KR_FMA(KR_SPLAT(p[r]), v2, c[r][2]);
                c[r][3] = KR_FMA(KR_SPLAT(p[r]), v3, c[r][3]);
            }
        }
    }
    for (int r = 0; r < rt; r++)
        memcpy(o + (size_t)r * hd, c[r], sizeof c[r]);
}

/* The tile path, one task a (tile, head), in six phases: the tile's queries transposed; the keys
 * every row reads alike scored for all rows at once; each row's own keys past them (tiles over
 * several caches) scored row by row; the softmax down the columns; the shared keys' values summed
 * for all rows in register tiles, then each row's own keys' values; the sums normalised.
 * tile_task is one task's tile, rows [r0, r0 + R) for head h, and the worker's scratch; each
 * phase reads what it needs of it. */
typedef struct {
    const attend_job *j;
    const kr_kv_view *kv0; /* the first row's cache: the keys the tile shares are read from it */
    int h, r0, R, d, hd, B;
    int shared; /* keys every row of the tile reads from kv0 */
    int scored; /* keys scored as a tile (past shared over one cache: a causal run) */
    int n_keys; /* the most keys a row reads */
    float *sc;  /* scores [n_keys][T]: a key's scores for all rows side by side */
    float *qt;  /* the queries transposed [hd][T] */
    float *o;   /* the outputs [T][hd], before 1 / Z */
    float scale;
} tile_task;

/* 1. The queries transposed into qt. */
KR_INLINE KR_LEVEL_FN void tile_queries(const tile_task *t) {
    const attend_job *j = t->j;
    const int h = t->h, r0 = t->r0, R = t->R, d = t->d, hd = t->hd;
    float *qt = t->qt;
    enum { T = KR_ATTN_TILE };
#if KR_W == 16
    if (hd % KR_W == 0) { /* 16 rows x 16 columns at a time, transposed in registers */
        for (int rb = 0; rb < R; rb += KR_W)
            for (int i0 = 0; i0 < hd; i0 += KR_W) {
                vf m[KR_W];
                for (int l = 0; l < KR_W; l++)
                    m[l] = rb + l < R
                               ? KR_LOAD(j->q + (size_t)(r0 + rb + l) * d + (size_t)h * hd + i0)
                               : (vf){0};
                transpose16(m);
                for (int e = 0; e < KR_W; e++)
                    memcpy(qt + (size_t)(i0 + e) * T + rb, &m[e], sizeof m[e]);
            }
    } else
#endif
    {
        for (int r = 0; r < T; r++) { /* row by row: the rows are d floats apart, the same
                                         cache sets for a power of two, read one at a time */
            const float *qr = j->q + (size_t)(r0 + r) * d + (size_t)h * hd;
            for (int i = 0; i < hd; i++)
                qt[(size_t)i * T + r] = r < R ? qr[i] : 0.0f;
        }
    }
}

/* 2. Every row's scores: the keys the rows share together, each row's own keys alone,
 * masked past each row's end. vend[ROW_VECS]: the last key each vector of rows reads.
 * Returns the vectors of rows with a row of the tile in them. */
KR_INLINE KR_LEVEL_FN int tile_score(const tile_task *t, int *vend, float *mx) {
    const attend_job *j = t->j;
    const kr_kv_view *kv0 = t->kv0;
    const int h = t->h, r0 = t->r0, R = t->R, hd = t->hd, B = t->B, shared = t->shared,
              scored = t->scored, n_keys = t->n_keys;
    float *sc = t->sc, *qt = t->qt;
    const float scale = t->scale;
    enum { T = KR_ATTN_TILE };
    /* each vector of rows: the last key one of its rows reads (shared for one of padding) */
    for (int n = 0; n < ROW_VECS; n++) {
        vend[n] = shared;
        for (int r = n * KR_W; r < R && r < (n + 1) * KR_W; r++)
            if (j->rows[r0 + r].n_keys > vend[n]) vend[n] = j->rows[r0 + r].n_keys;
    }
    /* over one cache the rows of the tile's first half end (causally) before its second
     * half's: keys past the first half's ends are scored for the second half alone, and a
     * tile of 16 rows or fewer scores its first half only */
    int lo_end = scored;
    if (scored > shared) {
        lo_end = 0;
        for (int n = 0; n < ROW_VECS / 2; n++)
            if (vend[n] > lo_end) lo_end = vend[n];
        if (lo_end > scored) lo_end = scored;
    }
#define TILE_SCORES(k0, k1, V0, NV)                                                                \
    tile_scores(sc, mx, qt, kv0, j->layer, h, hd, k0, k1, shared, scale, V0, NV)
    if (R > T / 2)
        TILE_SCORES(0, lo_end, 0, ROW_VECS);
    else
        TILE_SCORES(0, lo_end, 0, ROW_VECS / 2);
    if (lo_end < scored) TILE_SCORES(lo_end, scored, ROW_VECS / 2, ROW_VECS / 2);
#undef TILE_SCORES
    /* each row's own keys past the tile's (rows over caches of their own past the shared
     * blocks) */
    if (scored < n_keys && B % KEY_LANES == 0 && scored % KEY_LANES == 0) {
        for (int r = 0; r < R; r += 4)
            own_scores4(sc, qt, j, r0, r, R - r < 4 ? R - r : 4, R, h, hd, scored, scale);
    } else if (scored < n_keys) {
        for (int r = 0; r < R; r++) {
            const kr_attn_row *row = &j->rows[r0 + r];
            for (int key = scored; key < row->n_keys; key++) {
                const kv_t *kc = KV_KCOL(row->kv, j->layer, key) + (size_t)h * hd * B;
                float acc = 0.0f;
                for (int i = 0; i < hd; i++)
                    acc = fmaf(qt[(size_t)i * T + r], KV_F(kc[(size_t)i * B]), acc);
                sc[(size_t)key * T + r] = acc * scale;
            }
        }
    }
    /* vectors of rows with a row of the tile in them; the others are never scored */
    const int live = (R + KR_W - 1) / KR_W;
    for (int r = 0; r < live * KR_W; r++) { /* past a row's end (or a padding row): masked */
        int end = r < R ? j->rows[r0 + r].n_keys : 0;
        for (int key = end > shared ? end : shared; key < n_keys; key++)
            sc[(size_t)key * T + r] = -INFINITY;
    }
    return live;
}

/* 3. The softmax down each column, a vector of rows at a time up to vend (past it every lane
 * is masked: its e would be 0, never read, as no row reads past its end, and Z's sum would
 * add zeros). First each row's largest score, mx[r] (tile_scores took the shared keys'); then
 * e in place of s, chunk by chunk with the values that read them (tile_exp), Z summed into
 * z[r] in key order. */
KR_INLINE KR_LEVEL_FN void tile_max(const tile_task *t, const int *vend, int live, float *mx) {
    const float *sc = t->sc;
    enum { T = KR_ATTN_TILE };
    for (int n = 0; n < live; n++) {
        const float *col = sc + n * KR_W;
        vf m = KR_LOAD(mx + n * KR_W);
        for (int key = t->shared; key < vend[n]; key++) {
            vf s = KR_LOAD(col + (size_t)key * T);
            m = KR_SELECT(s > m, s, m);
        }
        memcpy(mx + n * KR_W, &m, sizeof m);
    }
}

/* e = exp(s - mx) for keys [k0, k1) of every vector of rows (below its vend), Z added */
KR_INLINE KR_LEVEL_FN void tile_exp(const tile_task *t, const int *vend, int live, int k0, int k1,
                                    const float *mx, float *z) {
    enum { T = KR_ATTN_TILE };
    for (int n = 0; n < live; n++) {
        float *col = t->sc + n * KR_W;
        vf zn = KR_LOAD(z + n * KR_W);
        for (int key = k0; key < k1 && key < vend[n]; key++) {
            exp_fma_sub(col + (size_t)key * T, mx + n * KR_W);
            zn += KR_LOAD(col + (size_t)key * T);
        }
        memcpy(z + n * KR_W, &zn, sizeof zn);
    }
}

/* 4. The shared keys' values, in register tiles of RT rows x VALUE_COLS columns, each chunk's
 * e taken first (while its scores are in the first-level cache); group_end[g]: the last key
 * register tile g reads. Returns the keys whose e it took. */
KR_INLINE KR_LEVEL_FN int tile_shared_values(const tile_task *t, int *group_end, const int *vend,
                                             int live, const float *mx, float *z) {
    const attend_job *j = t->j;
    const kr_kv_view *kv0 = t->kv0;
    const int h = t->h, r0 = t->r0, R = t->R, d = t->d, hd = t->hd, B = t->B, shared = t->shared,
              scored = t->scored, n_keys = t->n_keys;
    float *sc = t->sc, *o = t->o;
    enum { T = KR_ATTN_TILE, RT = VALUE_ROWS };
    /* sum of e_j v_j over the shared keys: chunks of keys held in the first-level cache,
     * register tiles of RT rows x VALUE_COLS columns (x KR_W columns for the rest of a head,
     * a scalar loop for the columns of a head size that is not a multiple of KR_W). Over one
     * cache a register tile goes on to the last key all its rows read (a causal run's rows
     * end a key apart); each row adds its keys past that on its own below. */
    memset(o, 0, (size_t)T * hd * sizeof *o);
    const int hdc = hd / VALUE_COLS * VALUE_COLS;
    int tile_end = shared;
    for (int ra = 0; ra < R; ra += RT) {
        int e = n_keys;
        for (int r = ra; r < R && r < ra + RT; r++)
            if (j->rows[r0 + r].n_keys < e) e = j->rows[r0 + r].n_keys;
        group_end[ra / RT] = scored > shared ? e : shared; /* one cache: all its keys scored */
        if (group_end[ra / RT] > tile_end) tile_end = group_end[ra / RT];
    }
    int k0 = 0;
    for (; k0 < tile_end && hdc > 0; k0 += VALUE_CHUNK) {
        int k1 = k0 + VALUE_CHUNK < tile_end ? k0 + VALUE_CHUNK : tile_end;
        tile_exp(t, vend, live, k0, k1, mx, z);
        value_run runs[VALUE_CHUNK];
        int n_runs = 0;
        for (int kb = k0; kb < k1; n_runs++) {
            int kb1 = block_end(kb, B, k1);
            const kv_t *ahead = kb + VALUE_CHUNK < group_end[0] && VALUE_CHUNK % B == 0
                                    ? KV_VROW(kv0, j->layer, kb + VALUE_CHUNK) + (size_t)h * hd
                                    : NULL;
            runs[n_runs] = (value_run){kb, kb1, KV_VROW(kv0, j->layer, kb) + (size_t)h * hd, ahead};
            kb = kb1;
        }
        for (int i0 = 0; i0 < hdc; i0 += VALUE_COLS)
            for (int ra = 0; ra < R; ra += RT) {
                float *oa = o + (size_t)ra * hd + i0;
                int ke = k1 < group_end[ra / RT] ? k1 : group_end[ra / RT];
                if (ke <= k0) continue;
#define VALUES_ROWS(RN) values_rows(oa, RN, sc, ra, runs, n_runs, d, hd, i0, ke, ra == 0)
                switch (R - ra < RT ? R - ra : RT) { /* up to RT, a constant a call: each inlined
                                                      * copy keeps its sums in registers */
#if VALUE_ROWS >= 6
                case 6:
                    VALUES_ROWS(6);
                    break;
#endif
#if VALUE_ROWS >= 5
                case 5:
                    VALUES_ROWS(5);
                    break;
#endif
#if VALUE_ROWS >= 4
                case 4:
                    VALUES_ROWS(4);
                    break;
#endif
#if VALUE_ROWS >= 3
                case 3:
                    VALUES_ROWS(3);
                    break;
#endif
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
    return k0 < tile_end ? k0 : tile_end;
}

/* 5. The shared keys' values for the columns past the register tiles'. */
KR_INLINE KR_LEVEL_FN void tile_shared_rest(const tile_task *t) {
    const attend_job *j = t->j;
    const kr_kv_view *kv0 = t->kv0;
    const int h = t->h, R = t->R, hd = t->hd, shared = t->shared;
    float *sc = t->sc, *o = t->o;
    enum { T = KR_ATTN_TILE };
    const int hdc = hd / VALUE_COLS * VALUE_COLS, hdw = hd / KR_W * KR_W;
    for (int ra = 0; ra < R && hdc < hdw; ra += 4)
        for (int i0 = hdc; i0 < hdw; i0 += KR_W) {
            vf c[4] = {{0}};
            for (int key = 0; key < shared; key++) {
                vf v = KV_LOAD(KV_VROW(kv0, j->layer, key) + (size_t)h * hd + i0);
                const float *p = sc + (size_t)key * T + ra;
                for (int r = 0; r < 4; r++)
                    c[r] = KR_FMA(KR_SPLAT(p[r]), v, c[r]);
            }
            for (int r = 0; r < 4 && ra + r < R; r++)
                memcpy(o + (size_t)(ra + r) * hd + i0, &c[r], sizeof c[r]);
        }
    for (int key = 0; key < shared && hdw < hd; key++) {
        const kv_t *v = KV_VROW(kv0, j->layer, key) + (size_t)h * hd;
        for (int r = 0; r < R; r++) {
            float pk = sc[(size_t)key * T + r], *orow = o + (size_t)r * hd;
            for (int i = hdw; i < hd; i++)
                orow[i] = fmaf(pk, KV_F(v[i]), orow[i]);
        }
    }
}

/* o[nr][VALUE_COLS] (rows hd apart) += the products of keys [k0, k1) for rows [r, r + nr) of
 * the tile (nr <= OWN_ROWS), each row's keys from its own cache, columns [i0, i0 + VALUE_COLS)
 * of head h: the rows side by side, so that the loads of nr caches are in flight at once (the
 * keys past a shared prefix lie in each path's own blocks, rarely in any cache); each (row,
 * column) adds its products in key order. */
KR_INLINE KR_LEVEL_FN void own_values_rows(float *o, const float *sc, const attend_job *j, int r0,
                                           int r, int nr, int h, int hd, int i0, int k0, int k1) {
    enum { T = KR_ATTN_TILE, OWN_AHEAD = 4 };
    const int B = j->rows[r0].kv->block_len, d = j->d;
    vf c[OWN_ROWS][4];
    for (int g = 0; g < nr; g++)
        for (int x = 0; x < 4; x++)
            c[g][x] = KR_LOAD(o + (size_t)g * hd + KR_W * x);
    for (int kb = k0; kb < k1;) { /* block by block: rows d apart */
        int kb1 = block_end(kb, B, k1);
        const kv_t *vb[OWN_ROWS];
        for (int g = 0; g < nr; g++)
            vb[g] = KV_VROW(j->rows[r0 + r + g].kv, j->layer, kb) + (size_t)h * hd + i0;
        /* the key OWN_AHEAD on asked for, in this block or each row's next (none past k1:
         * the key being read instead): blocks lie far apart in the pool and rows d apart
         * cross a page every few keys, where the hardware's prefetch does not follow */
        const kv_t *nb[OWN_ROWS];
        for (int g = 0; g < nr; g++)
            nb[g] = kb1 < k1 ? KV_VROW(j->rows[r0 + r + g].kv, j->layer, kb1) + (size_t)h * hd + i0
                             : vb[g];
        for (int key = kb; key < kb1; key++) {
            const float *p = sc + (size_t)key * T + r;
            int ahead = key + OWN_AHEAD;
            for (int g = 0; g < nr; g++) {
                const kv_t *pf = ahead < kb1  ? vb[g] + (size_t)OWN_AHEAD * d
                                 : ahead < k1 ? nb[g] + (size_t)(ahead - kb1) * d
                                              : vb[g];
                for (int x = 0; x < VALUE_COLS; x += 16)
                    __builtin_prefetch(pf + x);
                vf pg = KR_SPLAT(p[g]);
                for (int x = 0; x < 4; x++)
                    c[g][x] = KR_FMA(pg, KV_LOAD(vb[g] + x * KR_W), c[g][x]);
                vb[g] += d;
            }
        }
        kb = kb1;
    }
    for (int g = 0; g < nr; g++)
        memcpy(o + (size_t)g * hd, c[g], sizeof c[g]);
}

/* 6. Each row's keys past the shared ones, then the row out, times 1 / Z. */
KR_INLINE KR_LEVEL_FN void tile_own_values(const tile_task *t, const int *group_end,
                                           const float *inv) {
    const attend_job *j = t->j;
    const int h = t->h, r0 = t->r0, R = t->R, d = t->d, hd = t->hd, B = t->B, shared = t->shared;
    float *sc = t->sc, *o = t->o;
    enum { T = KR_ATTN_TILE, RT = VALUE_ROWS };
    const int hdc = hd / VALUE_COLS * VALUE_COLS, hdw = hd / KR_W * KR_W;
    /* each row's first own key in the register tiles' columns */
    int from[KR_ATTN_TILE];
    for (int r = 0; r < R; r++)
        from[r] = hdc > 0 ? group_end[r / RT] : shared;
    /* rows OWN_ROWS at a time over the own keys they all read from the same first one */
    for (int r = 0; hdc > 0 && OWN_ROWS > 1 && r < R; r += OWN_ROWS) {
        int nr = R - r < OWN_ROWS ? R - r : OWN_ROWS, k0 = from[r], k1 = j->rows[r0 + r].n_keys;
        for (int g = 1; g < nr; g++) {
            if (from[r + g] != k0) k1 = k0;
            if (j->rows[r0 + r + g].n_keys < k1) k1 = j->rows[r0 + r + g].n_keys;
        }
        if (nr < 2 || k1 <= k0) continue;
        for (int i0 = 0; i0 < hdc; i0 += VALUE_COLS) {
            float *oa = o + (size_t)r * hd + i0;
#define OWN_VALUES(NR) own_values_rows(oa, sc, j, r0, r, NR, h, hd, i0, k0, k1)
            switch (nr) { /* a constant a call: the sums stay in registers */
#if OWN_ROWS >= 4
            case 4:
                OWN_VALUES(4);
                break;
            case 3:
                OWN_VALUES(3);
                break;
#endif
            default:
                OWN_VALUES(2);
                break;
            }
#undef OWN_VALUES
        }
        for (int g = 0; g < nr; g++)
            from[r + g] = k1;
    }
    /* each row's keys past the shared ones, from its own cache, in key order; then 1 / Z */
    for (int r = 0; r < R; r++) {
        const kr_attn_row *row = &j->rows[r0 + r];
        float *orow = o + (size_t)r * hd, *out = j->out + (size_t)(r0 + r) * d + (size_t)h * hd;
        int i0 = 0;
        for (; i0 < hdc; i0 += VALUE_COLS) { /* key by key, VALUE_COLS columns in registers */
            vf a[4];
            for (int x = 0; x < 4; x++)
                a[x] = KR_LOAD(orow + i0 + x * KR_W);
            for (int key = from[r]; key < row->n_keys;) {
                int kb1 = block_end(key, B, row->n_keys);
                const kv_t *vb = KV_VROW(row->kv, j->layer, key) + (size_t)h * hd + i0;
                for (; key < kb1; key++, vb += d) { /* block by block: rows d apart */
                    float p = sc[(size_t)key * T + r];
                    for (int x = 0; x < 4; x++)
                        a[x] = KR_FMA(KR_SPLAT(p), KV_LOAD(vb + x * KR_W), a[x]);
                }
            }
            for (int x = 0; x < 4; x++)
                a[x] *= inv[r];
            memcpy(out + i0, a, sizeof a);
        }
        for (; i0 < hdw; i0 += KR_W) {
            vf a = KR_LOAD(orow + i0);
            for (int key = shared; key < row->n_keys; key++)
                a = KR_FMA(KR_SPLAT(sc[(size_t)key * T + r]),
                           KV_LOAD(KV_VROW(row->kv, j->layer, key) + (size_t)h * hd + i0), a);
            a *= inv[r];
            memcpy(out + i0, &a, sizeof a);
        }
        for (int key = shared; key < row->n_keys && i0 < hd; key++) {
            const kv_t *v = KV_VROW(row->kv, j->layer, key) + (size_t)h * hd;
            float p = sc[(size_t)key * T + r];
            for (int i = i0; i < hd; i++)
                orow[i] = fmaf(p, KV_F(v[i]), orow[i]);
        }
        for (int i = i0; i < hd; i++)
            out[i] = orow[i] * inv[r];
    }
}

KR_LEVEL_FN static void attend_tile(void *arg, int task, int worker) {
    const attend_job *j = arg;
    enum { T = KR_ATTN_TILE, RT = VALUE_ROWS };
    tile_task t = {
        .j = j, .h = task % j->n_heads, .r0 = j->order[task / j->n_heads] * T, .d = j->d};
    t.R = j->n_rows - t.r0 < T ? j->n_rows - t.r0 : T;
    t.hd = t.d / j->n_heads;
    t.shared = j->shared[t.r0 / T];
    t.scored = j->scored[t.r0 / T];
    t.kv0 = j->rows[t.r0].kv;
    t.B = t.kv0->block_len;
    for (int r = 0; r < t.R; r++)
        if (j->rows[t.r0 + r].n_keys > t.n_keys) t.n_keys = j->rows[t.r0 + r].n_keys;
    t.sc = j->scratch + (size_t)worker * j->scratch_stride;
    t.qt = t.sc + (size_t)t.n_keys * T;
    t.o = t.qt + (size_t)t.hd * T;
    t.scale = (float)(1.0 / sqrt((double)t.hd));
    int vend[ROW_VECS], group_end[(T + RT - 1) / RT];
    float mx[T], z[T] = {0}, inv[T];
    for (int r = 0; r < T; r++)
        mx[r] = -INFINITY;
    tile_queries(&t);
    const int live = tile_score(&t, vend, mx);
    tile_max(&t, vend, live, mx);
    int done = tile_shared_values(&t, group_end, vend, live, mx, z);
    tile_exp(&t, vend, live, done, t.n_keys, mx, z); /* the keys past the register tiles' */
    for (int r = 0; r < live * KR_W; r++)
        inv[r] = 1.0f / z[r];
    tile_shared_rest(&t);
    tile_own_values(&t, group_end, inv);
}

#undef VALUE_COLS
#undef OWN_ROWS
#undef VALUE_ROWS
#undef TILE_KEYS
#undef ROW_VECS
#undef attend_tile
#undef tile_own_values
#undef tile_shared_rest
#undef tile_shared_values
#undef tile_exp
#undef tile_max
#undef tile_score
#undef tile_queries
#undef tile_task
#undef own_values_rows
#undef values_rows
#undef own_scores4
#undef own_group
#undef tile_scores
