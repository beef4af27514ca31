/* test_bf16_rows.c — weights bf16's rounding of the activations: kr_bf16_rows on every kernel
 * level the CPU has against kr_bf16_round_daz element by element, bit for bit, on NaN (quiet,
 * signalling, payloads that carry into the sign), infinities, denormals, values whose
 * rounding is a tie or reaches a denormal or FLT_MIN, -0, the largest finite floats and random
 * bits; rows of odd and even lengths around the vector widths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kronos.h"
#include "matmul.h"      /* kr_simd_set */
#include "matmul_bf16.h" /* kr_bf16_rows, kr_bf16_round_daz */

#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t rng_next(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* The bit patterns where the rounding's integer steps branch or carry */
static const uint32_t special[] = {
    0x00000000u, 0x80000000u,                           /* +-0 */
    0x00000001u, 0x80000001u, 0x00007fffu, 0x00008000u, /* denormals */
    0x00018000u, 0x007f7fffu, 0x007f8000u, 0x807f8000u, /* to a denormal, to FLT_MIN */
    0x007fffffu, 0x807fffffu, 0x00800000u, 0x80800000u, /* the largest denormal, FLT_MIN */
    0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u, /* ties: to even down, and up */
    0x3f807fffu, 0x3f808001u, 0x3f80ffffu, 0x3fffffffu, /* just below and above a tie */
    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, /* the largest finite: round to inf */
    0x7f800000u, 0xff800000u,                           /* +-inf */
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, /* quiet and signalling NaN */
    0x7fff8000u, 0x7fffffffu, 0xffffffffu, 0x7f80ffffu, /* payloads that carry */
    0x3f800000u, 0xc0490fdbu, 0x42f6e979u, 0x33d6bf95u, /* ordinary values */
};
#define N_SPECIAL (sizeof special / sizeof special[0])

/* Rows of `in` values (specials first, then random bits) on every level against the scalar */
static void one_shape(int n, int in, uint32_t seed) {
    int np = kr_bf16_pairs(in);
    float *x = malloc(sizeof(float) * (size_t)n * in);
    uint32_t *xb = malloc(sizeof(uint32_t) * (size_t)n * np);
    assert_non_null(x);
    assert_non_null(xb);
    for (int i = 0; i < n * in; i++)
        x[i] = from_bits(i < (int)N_SPECIAL    ? special[(i * 7 + seed) % N_SPECIAL]
                         : rng_next(&seed) % 4 ? special[rng_next(&seed) % N_SPECIAL]
                                               : rng_next(&seed));
    int levels = 0;
    for (int s = KR_SIMD_GENERIC; s <= KR_SIMD_AMX; s++) {
        if (kr_simd_set((kr_simd)s) != 0) continue;
        levels++;
        memset(xb, 0xa5, sizeof(uint32_t) * (size_t)n * np);
        kr_bf16_rows(xb, x, n, in, (kr_simd)s);
        for (int r = 0; r < n; r++)
            for (int j = 0; j < np; j++) {
                const float *xr = x + (size_t)r * in;
                uint32_t want = kr_bf16_round_daz(xr[2 * j]);
                if (2 * j + 1 < in) want |= (uint32_t)kr_bf16_round_daz(xr[2 * j + 1]) << 16;
                if (xb[(size_t)r * np + j] != want)
                    fail_msg("level %s, %d rows of %d: row %d pair %d: 0x%08x, want 0x%08x",
                             kr_simd_name((kr_simd)s), n, in, r, j, xb[(size_t)r * np + j], want);
            }
    }
    assert_true(levels >= 1);
    kr_simd_set(kr_simd_level());
    free(x);
    free(xb);
}

/* The rounding itself, against its definition on the specials: nearest BF16, ties to even, a
 * denormal result a zero of its sign */
static void test_round_daz_cases(void **state) {
    (void)state;
    assert_int_equal(kr_bf16_round_daz(from_bits(0x3f808000u)), 0x3f80); /* tie, even below */
    assert_int_equal(kr_bf16_round_daz(from_bits(0x3f818000u)), 0x3f82); /* tie, even above */
    assert_int_equal(kr_bf16_round_daz(from_bits(0x3f808001u)), 0x3f81);
    assert_int_equal(kr_bf16_round_daz(from_bits(0x80000001u)), 0x8000); /* -denormal: -0 */
    assert_int_equal(kr_bf16_round_daz(from_bits(0x007f7fffu)), 0x0000); /* to a denormal */
    assert_int_equal(kr_bf16_round_daz(from_bits(0x007f8000u)), 0x0080); /* up to FLT_MIN */
    assert_int_equal(kr_bf16_round_daz(from_bits(0x7f7fffffu)), 0x7f80); /* to inf */
    assert_int_equal(kr_bf16_round_daz(from_bits(0xff800000u)), 0xff80);
    assert_int_equal(kr_bf16_round_daz(from_bits(0x7fc00000u)), 0x7fc0);
}

static void test_rows_every_level(void **state) {
    (void)state;
    static const int ins[] = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 512, 1025};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        for (int n = 1; n <= 3; n++)
            one_shape(n, ins[i], 1000u + (uint32_t)(i * 3 + n));
    one_shape(30, 1024, 77u); /* a decode step's rows */
    print_message("# bf16 rows: every level's bits equal kr_bf16_round_daz's\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_daz_cases),
        cmocka_unit_test(test_rows_every_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
