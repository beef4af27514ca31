/* attention_lanes.h — attention's row path: the hot loops of one query row's heads, a
 * template built once per instruction set (lanes.h) on vectors vf of KR_W floats, and per
 * element type of the keys and values (attention_kv.h). Entry point: attend_heads, named with
 * the type's and the level's suffixes; attention.c dispatches to it. attention_modes.h
 * includes it, after attention_kv.h.
 *
 * Register blocks are chosen per level for its register file (32 registers on AVX-512, 16 on
 * AVX2 and SSE); each sum still runs in the order attention.c states, whatever the block. */

#define head_scores  KV_LN(head_scores)
#define exp_shifted  KV_LN(exp_shifted)
#define head_values  KV_LN(head_values)
#define values_4x64  KV_LN(values_4x64)
#define attend_heads KV_LN(attend_heads)

/* ---- one row -------------------------------------------------------------------------------- */

/* out[key - k0] for keys [k0, k1) of head h: the scaled dot products with qh[hd]. Full
 * groups of 16 keys go up to four at a time, so that four chains of adds are in flight
 * (two or three groups repeat their last one; each key's sum still runs over i in order);
 * a last partial group whose 16 lanes lie within its block is one group too, its lanes
 * past k1 computed and dropped (each lane is a key of its own). */
KR_INLINE KR_LEVEL_FN void head_scores(const float *qh, const kr_kv_view *kv, int layer, int h,
                                       int hd, int k0, int k1, float scale, float *out) {
    int B = kv->block_len;
    for (int key = k0; key < k1;) {
        const kv_t *kt[4];
        int n_full = 0, at = key;
        while (n_full < 4 && at % B + KEY_LANES <= B && at + KEY_LANES <= k1 &&
               (at % B) % KEY_LANES == 0) { /* a whole aligned group of 16 within a block */
            kt[n_full++] = KV_KCOL(kv, layer, at) + (size_t)h * hd * B;
            at += KEY_LANES;
        }
        if (n_full >= 2) {
            for (int g = n_full; g < 4; g++)
                kt[g] = kt[n_full - 1];
            vf a[4][KEY_VECS];
            for (int g = 0; g < 4; g++)
                for (int n = 0; n < KEY_VECS; n++)
                    a[g][n] = (vf){0};
            for (int i = 0; i < hd; i++) {
                vf qv = KR_SPLAT(qh[i]);
                for (int g = 0; g < 4; g++)
                    for (int n = 0; n < KEY_VECS; n++)
                        a[g][n] = KR_FMA(qv, KV_LOAD(kt[g] + (size_t)i * B + n * KR_W), a[g][n]);
            }
            for (int g = 0; g < n_full; g++)
                for (int n = 0; n < KEY_VECS; n++) {
                    vf s = a[g][n] * scale;
                    memcpy(out + key - k0 + g * KEY_LANES + n * KR_W, &s, sizeof s);
                }
            key += n_full * KEY_LANES;
            continue;
        }
        int j0 = key % B, n = B - j0;
        if (n > k1 - key) n = k1 - key;
        if (n > KEY_LANES) n = KEY_LANES;
        const kv_t *kc = KV_KCOL(kv, layer, key) + (size_t)h * hd * B;
        if (n == KEY_LANES || j0 + KEY_LANES <= B) {
            vf acc[KEY_VECS];
            for (int v = 0; v < KEY_VECS; v++)
                acc[v] = (vf){0};
            for (int i = 0; i < hd; i++)
                for (int v = 0; v < KEY_VECS; v++)
                    acc[v] =
                        KR_FMA(KR_SPLAT(qh[i]), KV_LOAD(kc + (size_t)i * B + v * KR_W), acc[v]);
            float s[KEY_LANES];
            for (int v = 0; v < KEY_VECS; v++) {
                vf sv = acc[v] * scale;
                memcpy(s + v * KR_W, &sv, sizeof sv);
            }
            memcpy(out + key - k0, s, (size_t)n * sizeof(float));
        } else {
            float acc[KEY_LANES] = {0};
            for (int i = 0; i < hd; i++)
                for (int l = 0; l < n; l++)
                    acc[l] = fmaf(qh[i], KV_F(kc[(size_t)i * B + l]), acc[l]);
            for (int l = 0; l < n; l++)
                out[key - k0 + l] = acc[l] * scale;
        }
        key += n;
    }
}

/* s[n] -> e^(s - max s) in place; returns 1 / (their sum, in order). */
KR_INLINE KR_LEVEL_FN float exp_shifted(float *s, int n) {
    float mx = s[0], mxv[KR_W];
    for (int i = 1; i < n; i++)
        if (s[i] > mx) mx = s[i];
    for (int l = 0; l < KR_W; l++)
        mxv[l] = mx;
    int i = 0;
    for (; i + KR_W <= n; i += KR_W)
        exp_fma_sub(s + i, mxv);
    for (; i < n; i++)
        s[i] = exp1_fma(s[i] - mx);
    float sum = 0.0f;
    for (i = 0; i < n; i++)
        sum += s[i];
    return 1.0f / sum;
}

/* out[hd] += e_j * v_j over keys [k0, k1) of head h, keys in order: 64 columns at a time
 * (32 on SSE) held in registers while the keys go by (each column still adds its products
 * in key order, one rounding each), then KR_W and then one at a time. */
KR_INLINE KR_LEVEL_FN void head_values(float *out, const float *e, const kr_kv_view *kv, int layer,
                                       int h, int hd, int k0, int k1) {
    enum { COLS = KR_W == 4 ? 32 : 64, VECS = COLS / KR_W };
    int i0 = 0;
    for (; i0 + COLS <= hd; i0 += COLS) {
        vf a[VECS];
        for (int c = 0; c < VECS; c++)
            a[c] = KR_LOAD(out + i0 + c * KR_W);
        for (int key = k0; key < k1; key++) {
            const kv_t *v = KV_VROW(kv, layer, key) + (size_t)h * hd + i0;
            float p = e[key - k0];
            for (int c = 0; c < VECS; c++)
                a[c] = KR_FMA(KR_SPLAT(p), KV_LOAD(v + c * KR_W), a[c]);
        }
        memcpy(out + i0, a, sizeof a);
    }
    for (; i0 + KR_W <= hd; i0 += KR_W) {
        vf a = KR_LOAD(out + i0);
        for (int key = k0; key < k1; key++)
            a = KR_FMA(KR_SPLAT(e[key - k0]),
                       KV_LOAD(KV_VROW(kv, layer, key) + (size_t)h * hd + i0), a);
        memcpy(out + i0, &a, sizeof a);
    }
    for (int key = k0; key < k1 && i0 < hd; key++) {
        const kv_t *v = KV_VROW(kv, layer, key) + (size_t)h * hd;
        float p = e[key - k0];
        for (int i = i0; i < hd; i++)
            out[i] = fmaf(p, KV_F(v[i]), out[i]);
    }
}

#if KR_W == 16
/* o[256] += the value sums of four heads of 64 over keys [k0, k1), e of head hh at
 * e + hh * e_stride: each key's value row is read as one run of 1 KiB while 16 registers
 * hold the sums; each column still adds its products in key order. (AVX-512 only: the sums
 * take all 16 registers of AVX2.) */
KR_INLINE KR_LEVEL_FN void values_4x64(float *o, const float *e, size_t e_stride,
                                       const kr_kv_view *kv, int layer, int h0, int k0, int k1) {
    vf a[16];
    for (int c = 0; c < 16; c++)
        a[c] = KR_LOAD(o + 16 * c);
    int B = kv->block_len;
    for (int kb = k0; kb < k1; kb = block_end(kb, B, k1)) { /* block by block, rows d apart */
        int kb1 = block_end(kb, B, k1);
        const kv_t *vb = KV_VROW(kv, layer, kb) + (size_t)h0 * 64;
        for (int key = kb; key < kb1; key++, vb += kv->d) {
            for (int hh = 0; hh < 4; hh++) {
                float p = e[hh * e_stride + (size_t)(key - k0)];
                for (int c = 0; c < 4; c++)
                    a[4 * hh + c] =
                        KR_FMA(KR_SPLAT(p), KV_LOAD(vb + 16 * (4 * hh + c)), a[4 * hh + c]);
            }
        }
    }
    memcpy(o, a, sizeof a);
}
#endif

/* Heads [h0, h0 + nh) of one row over keys [0, n_keys): o[nh * hd] from q[nh * hd];
 * s: nh * n_keys floats of scratch. */
KR_LEVEL_FN static void attend_heads(float *o, const float *q, const kr_kv_view *kv, int layer,
                                     int h0, int nh, int hd, int n_keys, float *s) {
    float scale = (float)(1.0 / sqrt((double)hd)), inv[HEAD_GROUP];
    for (int hh = 0; hh < nh; hh++) {
        float *sh = s + (size_t)hh * n_keys;
        head_scores(q + (size_t)hh * hd, kv, layer, h0 + hh, hd, 0, n_keys, scale, sh);
        inv[hh] = exp_shifted(sh, n_keys);
    }
    memset(o, 0, (size_t)nh * hd * sizeof *o);
#if KR_W == 16
    if (nh == 4 && hd == 64) {
        values_4x64(o, s, (size_t)n_keys, kv, layer, h0, 0, n_keys);
    } else
#endif
    {
        for (int hh = 0; hh < nh; hh++)
            head_values(o + (size_t)hh * hd, s + (size_t)hh * n_keys, kv, layer, h0 + hh, hd, 0,
                        n_keys);
    }
    for (int hh = 0; hh < nh; hh++)
        for (int i = 0; i < hd; i++)
            o[(size_t)hh * hd + i] *= inv[hh];
}

#undef attend_heads
#undef values_4x64
#undef head_values
#undef exp_shifted
#undef head_scores
