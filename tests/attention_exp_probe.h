/* attention_exp_probe.h — test_attention_exp's probe of kernels/simd/vmath.h, a template built
 * once per instruction set like the kernels' own (lanes.h): exp_fma_sub, the exp of
 * attention's softmax, over whole vectors of a sweep. */

#define exp_fma_sweep KR_LN(exp_fma_sweep)
/* s[i] = e^(s[i] - mx[i]) for i < n (n a multiple of 16), KR_W lanes at a time */
KR_LEVEL_FN static void exp_fma_sweep(float *s, const float *mx, int n) {
    for (int i = 0; i + KR_W <= n; i += KR_W)
        exp_fma_sub(s + i, mx + i);
}
#undef exp_fma_sweep
