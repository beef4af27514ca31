/* train_gemm_lanes.h — the transposes of the weight gradients' operands, a template built
 * once per instruction set (core/kernels/lanes.h): AVX-512 moves whole 16 x 16 blocks through
 * registers (transpose16), the other levels element by element. Only moves: the same bits on
 * every level. Included only by train_gemm.c, after tr_job and transpose_tile. */

#define transpose_band KR_LN(transpose_band)

/* out[c][r] = in[r][c] for a band of TILE columns of in (TILE rows of out) */
KR_LEVEL_FN static void transpose_band(void *ctx, int item, int worker) {
    (void)worker;
    const tr_job *j = ctx;
    int c0 = item * TILE, c1 = c0 + TILE < j->cols ? c0 + TILE : j->cols, r16 = 0, c16 = c0;
#if KR_W == 16
    r16 = j->rows / 16 * 16, c16 = c0 + (c1 - c0) / 16 * 16;
    for (int c = c0; c < c16; c += 16)
        for (int r = 0; r < r16; r += 16) {
            vf t[16];
            for (int i = 0; i < 16; i++)
                t[i] = KR_LOAD(j->in + (size_t)(r + i) * j->cols + c);
            transpose16(t);
            for (int i = 0; i < 16; i++)
                __builtin_memcpy(j->out + (size_t)(c + i) * j->rows + r, &t[i], sizeof t[i]);
        }
#endif
    transpose_tile(j, r16, j->rows, c0, c16); /* the rows below the blocks */
    transpose_tile(j, 0, j->rows, c16, c1);   /* the columns right of them */
}

#undef transpose_band
