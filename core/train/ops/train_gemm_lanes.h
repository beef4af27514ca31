/* train_gemm_lanes.h — the transposes of the weight gradients' operands, a template built
 * once per instruction set (core/kernels/lanes.h): AVX-512 moves whole 16 x 16 blocks through
 * registers (transpose16), the other levels element by element. Only moves: the same bits on
 * every level. Included only by train_gemm.c, after tr_job and transpose_tile. */

#define transpose_block KR_LN(transpose_block)

/* out[c][r] = in[r][c] for a block of TILE x TILE elements: both its reads and its writes
 * TILE runs of TILE floats */
KR_LEVEL_FN static void transpose_block(void *ctx, int item, int worker) {
    (void)worker;
    const tr_job *j = ctx;
    int cb = (j->cols + TILE - 1) / TILE, r0 = item / cb * TILE, c0 = item % cb * TILE;
    int r1 = r0 + TILE < j->rows ? r0 + TILE : j->rows,
        c1 = c0 + TILE < j->cols ? c0 + TILE : j->cols;
    int r16 = r0, c16 = c0;
#if KR_W == 16
    r16 = r0 + (r1 - r0) / 16 * 16, c16 = c0 + (c1 - c0) / 16 * 16;
    for (int c = c0; c < c16; c += 16)
        for (int r = r0; r < r16; r += 16) {
            vf t[16];
            for (int i = 0; i < 16; i++)
                t[i] = KR_LOAD(j->in + (size_t)(r + i) * j->cols + c);
            transpose16(t);
            for (int i = 0; i < 16; i++)
                __builtin_memcpy(j->out + (size_t)(c + i) * j->rows + r, &t[i], sizeof t[i]);
        }
#endif
    transpose_tile(j, r16, r1, c0, c16); /* the rows below the 16 x 16 blocks */
    transpose_tile(j, r0, r1, c16, c1);  /* the columns right of them */
}

#undef transpose_block
