/* lanes_probe.h — test_invariance's probes of kernels/simd/lanes.h, a template built once per
 * instruction set like the kernels' own: exp_array against its scalar lane, and (AVX-512) the
 * 16 x 16 transpose of the grouped key stores. */

#define exp_sweep KR_LN(exp_sweep)
/* v[n] through exp_array, s[n] through exp1 one by one */
KR_LEVEL_FN static void exp_sweep(float *v, float *s, int n) {
    exp_array(v, n);
    for (int i = 0; i < n; i++)
        s[i] = exp1(s[i]);
}
#undef exp_sweep

#if KR_W == 16
#define transpose_probe KR_LN(transpose_probe)
KR_LEVEL_FN static void transpose_probe(float *m) {
    vf r[16];
    memcpy(r, m, sizeof r);
    transpose16(r);
    memcpy(m, r, sizeof r);
}
#undef transpose_probe
#endif
