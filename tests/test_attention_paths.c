/* test_attention_paths.c — attention of a forecast's sample paths in a decode step: many rows
 * that share a prefix of whole blocks, each row's later keys in blocks of its own cache (the
 * tile path scores and sums those own keys several rows side by side). Each row must get the
 * bits it gets alone (kr_attend), for float32 and BF16 keys and values, whatever the rows' own
 * key counts (none, part of a block, several blocks, unequal), and the same bits on every
 * kernel level this CPU has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attention.h"
#include "bf16.h"
#include "kronos.h"
#include "matmul.h" /* kr_simd_set */
#include "test_util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { PREFIX_BLOCKS = 5, OWN_BLOCKS = 4, MAX_PATHS = 33 };

/* One case's caches: the shared prefix blocks, each path's own blocks, each path's view */
typedef struct {
    int d, block_len, n_paths, bf16;
    float *prefix[PREFIX_BLOCKS];
    float *own[MAX_PATHS][OWN_BLOCKS];
    float *blocks[MAX_PATHS][PREFIX_BLOCKS + OWN_BLOCKS];
    kr_kv_view view[MAX_PATHS];
} paths;

static uint32_t seed = 12345;

/* A block of one layer (K transposed [d][B], then V [B][d]) of random elements: float32, or
 * BF16 in the block's first half (how a kv bf16 pool lays them) */
static float *random_block(int d, int B, int bf16) {
    size_t n = (size_t)2 * B * d;
    float *b = malloc(n * sizeof(float));
    assert_non_null(b);
    uint16_t *h = (uint16_t *)b;
    for (size_t i = 0; i < n; i++) {
        float x = tu_lcg(&seed);
        if (bf16)
            h[i] = kr_bf16_round(x);
        else
            b[i] = x;
    }
    return b;
}

static void paths_make(paths *p, int d, int B, int n_paths, int bf16) {
    assert_true(n_paths <= MAX_PATHS);
    *p = (paths){.d = d, .block_len = B, .n_paths = n_paths, .bf16 = bf16};
    for (int b = 0; b < PREFIX_BLOCKS; b++)
        p->prefix[b] = random_block(d, B, bf16);
    for (int r = 0; r < n_paths; r++) {
        for (int b = 0; b < PREFIX_BLOCKS; b++)
            p->blocks[r][b] = p->prefix[b];
        for (int b = 0; b < OWN_BLOCKS; b++)
            p->blocks[r][PREFIX_BLOCKS + b] = p->own[r][b] = random_block(d, B, bf16);
        p->view[r] = (kr_kv_view){p->blocks[r], B, d, bf16};
    }
}

static void paths_free(paths *p) {
    for (int b = 0; b < PREFIX_BLOCKS; b++)
        free(p->prefix[b]);
    for (int r = 0; r < p->n_paths; r++)
        for (int b = 0; b < OWN_BLOCKS; b++)
            free(p->own[r][b]);
}

/* The first level's outputs, recorded; each other level's compared with them */
static tu_level_log level_log;

/* n_paths rows over the cases' caches, row r reading n_keys[r] keys: the rows at once equal
 * each row alone, bit for bit */
static void attend_paths(const paths *p, int n_heads, const int *n_keys) {
    int d = p->d, n = p->n_paths, max_keys = (PREFIX_BLOCKS + OWN_BLOCKS) * p->block_len;
    float *q = malloc((size_t)n * d * sizeof(float)), *ref = malloc((size_t)n * d * sizeof(float));
    float *out = malloc((size_t)n * d * sizeof(float));
    float *scratch = malloc(kr_attend_scores_floats(max_keys, n_heads, d) * sizeof(float));
    assert_true(q && ref && out && scratch);
    for (int i = 0; i < n * d; i++)
        q[i] = 2 * tu_lcg(&seed);
    kr_attn_row rows[MAX_PATHS];
    for (int r = 0; r < n; r++) {
        assert_true(n_keys[r] >= PREFIX_BLOCKS * p->block_len && n_keys[r] <= max_keys);
        rows[r] = (kr_attn_row){&p->view[r], n_keys[r]};
        kr_attend(ref + (size_t)r * d, q + (size_t)r * d, &p->view[r], 0, n_keys[r], n_heads,
                  scratch);
    }
    kr_attend_rows(out, q, rows, n, d, 0, n_heads, scratch, max_keys);
    assert_memory_equal(out, ref, (size_t)n * d * sizeof(float));
    tu_level_log_check(&level_log, out, (size_t)n * d);
    free(q), free(ref), free(out), free(scratch);
}

/* The key counts of a decode step: every path as far into its horizon (own keys: none but
 * the step's, part of a block, a block and more, several blocks), then unequal ones */
static void step_cases(const paths *p, int n_heads) {
    int B = p->block_len, prefix = PREFIX_BLOCKS * B, n_keys[MAX_PATHS];
    const int into[] = {1, 5, B, B + 1, 3 * B + 1, OWN_BLOCKS * B};
    for (size_t c = 0; c < sizeof into / sizeof *into; c++) {
        for (int r = 0; r < p->n_paths; r++)
            n_keys[r] = prefix + into[c];
        attend_paths(p, n_heads, n_keys);
    }
    for (int r = 0; r < p->n_paths; r++) /* unequal: some none past the prefix, some whole */
        n_keys[r] = prefix + (r * 7) % (OWN_BLOCKS * B + 1);
    attend_paths(p, n_heads, n_keys);
}

static void run_levels(int d, int n_heads, int B, int n_paths, int bf16) {
    kr_simd best = kr_simd_level();
    for (int level = KR_SIMD_GENERIC; level <= (int)best; level++) {
        assert_int_equal(kr_simd_set((kr_simd)level), 0);
        seed = 12345;
        tu_level_log_start(&level_log, level == KR_SIMD_GENERIC);
        paths p;
        paths_make(&p, d, B, n_paths, bf16);
        step_cases(&p, n_heads);
        paths_free(&p);
        tu_level_log_done(&level_log);
    }
    kr_simd_set(best);
}

/* Kronos-small's heads (8 of 64): 30 paths (one tile), 33 (a tile and a tail of one row),
 * 7; float32 and BF16 elements */
static void test_small_heads(void **state) {
    (void)state;
    const int counts[] = {30, 33, 7};
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
            run_levels(512, 8, 16, counts[c], bf16);
}

/* Heads whose size is no multiple of a level's register tile (Kronos-base's 52, and 40),
 * blocks of 32 keys */
static void test_other_heads(void **state) {
    (void)state;
    run_levels(832, 16, 16, 30, 0);
    run_levels(120, 3, 32, 11, 0);
    run_levels(832, 16, 16, 9, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_heads),
        cmocka_unit_test(test_other_heads),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_level_log_free(&level_log);
    return rc;
}
