/* train_optim_lanes.h — AdamW's update, a template built once per instruction set
 * (core/kernels/lanes.h) on vectors vf of KR_W floats: libm's sqrtf kept it scalar. Every
 * lane performs the scalar tail's operations in its order (the square root is IEEE's on every
 * level), so the bits do not depend on the level. Included only by train_optim.c, after
 * adam_job. */

#define adam_chunk KR_LN(adam_chunk)

/* the square root of each lane (a macro: a function taking or returning vectors would have
 * an ABI that depends on the instruction set) */
#if KR_W == 16
#define vsqrt(x) ((vf)_mm512_sqrt_ps((__m512)(x)))
#elif KR_W == 8
#define vsqrt(x) ((vf)_mm256_sqrt_ps((__m256)(x)))
#else
#define vsqrt(x)                                                                                   \
    __extension__({                                                                                \
        vf sq_ = (x);                                                                              \
        for (int sl_ = 0; sl_ < KR_W; sl_++)                                                       \
            sq_[sl_] = __builtin_sqrtf(sq_[sl_]);                                                  \
        sq_;                                                                                       \
    })
#endif

/* one chunk of one tensor: elementwise, so any thread gives the same bits */
KR_LEVEL_FN static void adam_chunk(void *ctx, int i, int worker) {
    (void)worker;
    const adam_job *j = ctx;
    tr_tensor *t = &j->m->t[j->tensor[i]];
    size_t k0 = (size_t)j->first[i] * ADAM_CHUNK,
           k1 = k0 + ADAM_CHUNK < t->n ? k0 + ADAM_CHUNK : t->n, k = k0;
    float c1 = 1.0f - j->b1, c2 = 1.0f - j->b2;
    const vf zero = {0};
    for (; k + KR_W <= k1; k += KR_W) {
        vf g = KR_LOAD(t->g + k), w = KR_LOAD(t->w + k), m = KR_LOAD(t->m + k),
           v = KR_LOAD(t->v + k);
        w = w * (zero + j->decay);
        m = m + (g - m) * (zero + c1);
        v = v * (zero + j->b2) + (zero + c2) * g * g;
        vf denom = vsqrt(v) / (zero + j->bc2_sqrt) + (zero + j->eps);
        w = w - (zero + j->step) * m / denom;
        __builtin_memcpy(t->w + k, &w, sizeof w);
        __builtin_memcpy(t->m + k, &m, sizeof m);
        __builtin_memcpy(t->v + k, &v, sizeof v);
    }
    for (; k < k1; k++) {
        float g = t->g[k];
        t->w[k] *= j->decay;
        t->m[k] += (g - t->m[k]) * c1;
        t->v[k] = t->v[k] * j->b2 + c2 * g * g;
        float denom = sqrtf(t->v[k]) / j->bc2_sqrt + j->eps;
        t->w[k] -= j->step * t->m[k] / denom;
    }
}

#undef vsqrt
#undef adam_chunk
