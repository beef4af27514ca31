/* train_nn_lanes.h — SwiGLU's forward and backward in training, a template built once per
 * instruction set (core/kernels/lanes.h): e^-h by the levels' exp_array, the one inference's
 * SwiGLU uses, so the forward has inference's bits and every level the same ones. Included
 * only by train_nn.c, after swiglu_job. */

#define silu_exp         KR_LN(silu_exp)
#define swiglu_fwd_chunk KR_LN(swiglu_fwd_chunk)
#define swiglu_bwd_chunk KR_LN(swiglu_bwd_chunk)
#define swiglu_chunk     KR_LN(swiglu_chunk)

/* e[i] = e^-h[i] for n <= SILU_RUN elements; -h above 88 (exp_array's range) taken as 88 */
KR_INLINE void silu_exp(float *e, const float *h, int n) {
    for (int i = 0; i < n; i++) {
        float x = -h[i];
        e[i] = x > 88.0f ? 88.0f : x;
    }
    exp_array(e, n);
}

/* chunk c in runs of SILU_RUN, e^-h1 of a run first; forward: gg = h1 / (1 + e^-h1) * h3;
 * backward: d3 = dg silu(h1), d1 = dg h3 silu'(h1), dg read from d1 */
KR_INLINE void swiglu_chunk(const swiglu_job *j, int c, bool backward) {
    float e[SILU_RUN];
    size_t k1 = ((size_t)c + 1) * SWIGLU_CHUNK < j->n ? ((size_t)c + 1) * SWIGLU_CHUNK : j->n;
    for (size_t i0 = (size_t)c * SWIGLU_CHUNK; i0 < k1; i0 += SILU_RUN) {
        int n = k1 - i0 < SILU_RUN ? (int)(k1 - i0) : SILU_RUN;
        silu_exp(e, j->h1 + i0, n);
        if (!backward) {
            for (int i = 0; i < n; i++)
                j->a[i0 + i] = j->h1[i0 + i] / (1.0f + e[i]) * j->h3[i0 + i];
            continue;
        }
        for (int i = 0; i < n; i++) {
            float h = j->h1[i0 + i], sg = 1.0f / (1.0f + e[i]), dg = j->a[i0 + i];
            j->b[i0 + i] = dg * (h * sg);
            j->a[i0 + i] = dg * j->h3[i0 + i] * (sg * (1.0f + h * (1.0f - sg)));
        }
    }
}

KR_LEVEL_FN static void swiglu_fwd_chunk(void *ctx, int c, int worker) {
    (void)worker;
    swiglu_chunk(ctx, c, false);
}

KR_LEVEL_FN static void swiglu_bwd_chunk(void *ctx, int c, int worker) {
    (void)worker;
    swiglu_chunk(ctx, c, true);
}

#undef swiglu_chunk
#undef swiglu_bwd_chunk
#undef swiglu_fwd_chunk
#undef silu_exp
