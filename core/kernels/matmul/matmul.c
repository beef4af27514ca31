/* matmul.c — the linear layers' products, y[R][out] = x[R][in] W^T + b, on kernels of
 * our own chosen at run time (AVX-512, AVX2+FMA, or portable C).
 *
 * Why not BLAS: OpenBLAS rounds a row differently depending on how many rows share the
 * call and where the row sits among them (measured on every core type it ships), so a
 * request's numbers would depend on what else was batched with it. Here every output
 * element is one chain of fused multiply-adds over k = 0 .. in-1, in that order, then
 * plus the bias: the same bits for a row whether it is computed alone, in a batch of
 * 2048, on any thread, or on any of the three kernels.
 *
 * Weights are packed at load into panels of 16 output columns, [panel][in][16], so each
 * step of the chain reads 16 consecutive columns: one AVX-512 register, two AVX2 ones.
 *
 * A model loaded with weights bf16 or int8 holds BF16 pairs or int8 blocks instead
 * (matmul_bf16.c and matmul_q8.c own their arithmetic); forward_tiles below splits their
 * rows and columns into tasks.
 */
#include "matmul.h"
#include "matmul_bf16.h"
#include "matmul_q8.h"
#include "parallel.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KR_X86 1
#endif

#define PANEL       16 /* output columns per panel */
#define TASK_PANELS 8  /* panels per parallel task: 128 columns */
#define TASK_ROWS                                                                                  \
    128              /* at most this many rows per parallel task: rows split in equal tasks (a     \
                      * multiple of 8 rows each), so that the threads finish together */
#define ROW_CHUNK 64 /* rows whose x stays in cache while a task's panels stream past */
/* One or two rows (a decode step of one path) stream the weights from memory at 2 flops a
 * float: the threads split the panels in equal runs, in whole 8-panel kernel calls, instead
 * of 8-panel tasks whose last one leaves the other thread idle (docs/performance.md has the
 * one-path step timed). On two threads one run each: each streams one contiguous half, and
 * a product takes two claims instead of four, which measured faster than two runs a thread
 * (a helper that comes late finds its run unclaimed, or the caller has taken it). More
 * threads take NARROW_TASKS runs each: with runs rounded up to 8 panels, one a thread would
 * leave some threads without. */
#define NARROW_ROWS  2
#define NARROW_TASKS 2

/* Where output column o of row r goes: part[o / width] + r * width + o % width. One part
 * of width out is the plain y[T][out]; several let a stacked layer (q|k|v, w1|w3) write
 * each block of columns to its own array (width a multiple of PANEL: no panel straddles). */
typedef struct {
    float *const *part;
    int width;
    bool add; /* y += the product: y[o] + v, v = the chain + bias rounded first (the sum a
               * residual x += y of the stored product gives) */
} y_map;

static inline float *y_at(const y_map *y, int r, int o) {
    return y->part[o / y->width] + (size_t)r * y->width + o % y->width;
}

/* One finished element v (the chain + bias) into *yo: stored, or added (y->add). */
static inline void y_put(const y_map *y, float *yo, float v) {
    *yo = y->add ? *yo + v : v;
}

/* ---- packing ------------------------------------------------------------------------------ */

size_t kr_linear_packed_floats(int out, int in) {
    return (size_t)((out + PANEL - 1) / PANEL) * PANEL * (size_t)in;
}

void kr_linear_pack(float *dst, const float *w, int out, int in) {
    int panels = (out + PANEL - 1) / PANEL;
    for (int p = 0; p < panels; p++)
        for (int k = 0; k < in; k++)
            for (int c = 0; c < PANEL; c++) {
                int o = p * PANEL + c;
                dst[((size_t)p * in + k) * PANEL + c] = o < out ? w[(size_t)o * in + k] : 0.0f;
            }
}

/* ---- kernel choice ------------------------------------------------------------------------ */

static atomic_int chosen = -1;

static kr_simd detect_best(void) {
    kr_simd best = KR_SIMD_GENERIC;
#ifdef KR_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = KR_SIMD_AVX2;
    if (best == KR_SIMD_AVX2 && __builtin_cpu_supports("avx512f")) best = KR_SIMD_AVX512;
    if (best == KR_SIMD_AVX512 && kr_q8_amx_ready()) best = KR_SIMD_AMX;
#endif
    return best;
}

static kr_simd detect(void) {
    const char *force = getenv("KRONOS_SIMD");
    kr_simd best = detect_best();
    if (force) { /* tests pin each level the machine supports; never above what it has */
        for (int s = KR_SIMD_GENERIC; s <= (int)best; s++)
            if (strcmp(force, kr_simd_name((kr_simd)s)) == 0) return (kr_simd)s;
    }
    return best;
}

kr_simd kr_simd_level(void) {
    int s = atomic_load(&chosen);
    if (s < 0) {
        s = (int)detect();
        atomic_store(&chosen, s);
    }
    return (kr_simd)s;
}

int kr_simd_set(kr_simd s) {
    if (s < KR_SIMD_GENERIC || s > detect_best()) return -1;
    atomic_store(&chosen, (int)s);
    return 0;
}

const char *kr_simd_name(kr_simd s) {
    static const char *const names[] = {"generic", "avx2", "avx512", "amx"};
    return s > KR_SIMD_GENERIC && s <= KR_SIMD_AMX ? names[s] : names[0];
}

/* ---- portable kernel -------------------------------------------------------------------- */

/* Rows [r0, r1) x panels [p0, p1). fmaf is the same single rounding as the vector FMAs. */
static void panels_generic(const y_map *y, const float *x, int r0, int r1, int p0, int p1,
                           const kr_linear *l) {
    int in = l->in, out = l->out;
    for (int p = p0; p < p1; p++) {
        size_t at = (size_t)p * in * PANEL;
        for (int r = r0; r < r1; r++) {
            float acc[PANEL] = {0};
            const float *xr = x + (size_t)r * in;
            for (int k = 0; k < in; k++)
                for (int c = 0; c < PANEL; c++) {
                    size_t i = at + (size_t)k * PANEL + c;
                    acc[c] = fmaf(xr[k], l->wp[i], acc[c]);
                }
            for (int c = 0; c < PANEL && p * PANEL + c < out; c++) {
                int o = p * PANEL + c;
                y_put(y, y_at(y, r, o), l->b ? acc[c] + l->b[o] : acc[c]);
            }
        }
    }
}

/* The unpacked form (layers built by hand in tests): the same chain per element. */
static void rows_unpacked(const y_map *y, const float *x, int T, const kr_linear *l) {
    for (int r = 0; r < T; r++)
        for (int o = 0; o < l->out; o++) {
            const float *wr = l->w + (size_t)o * l->in, *xr = x + (size_t)r * l->in;
            float acc = 0.0f;
            for (int k = 0; k < l->in; k++)
                acc = fmaf(xr[k], wr[k], acc);
            y_put(y, y_at(y, r, o), l->b ? acc + l->b[o] : acc);
        }
}

#ifdef KR_X86
/* ---- AVX-512 kernel ----------------------------------------------------------------------- */

/* RN rows x CB panels of accumulators, one chain each; the compiler unrolls both loops
 * for each constant (RN, CB) so the accumulators live in registers. Blocks of many rows
 * take 6 rows x 4 panels in a task's whole 8 panels, else 8 rows x 3 (24 accumulators); one or two
 * rows (a decode step) take up to 8 panels, so that 8 or 16 independent chains hide the FMA latency
 * (each chain still runs over k in order: the bits do not change).
 *
 * pf, when not NULL: one cache line a step of k, pf + 64 k, fetched into L2 while the FMAs run.
 * A few rows (a decode step of 30 paths) read each block of 4 panels (in x 256 bytes) only
 * five times, the first straight from memory: the block of 6 rows waiting on it ran at memory
 * speed. Each of the first four row blocks of a panel group fetches a quarter of the group
 * read next, so the next group is in L2 when its first block starts (docs/performance.md).
 * The weight streams themselves stay on the hardware's prefetcher. */
#define AVX512_RB     8
#define AVX512_CB     3
#define AVX512_CB_MAX 8 /* panels for blocks of at most AVX512_NARROW rows */
#define AVX512_NARROW 2

__attribute__((target("avx512f"), always_inline)) static inline void
micro512(int RN, int CB, const y_map *y, const float *x, int r, int p, const kr_linear *l,
         const char *pf) {
    int in = l->in, out = l->out;
    size_t at = (size_t)p * in * PANEL;
    const float *xr = x + (size_t)r * in;
    __m512 acc[AVX512_RB][AVX512_CB_MAX];
#pragma GCC unroll 8
    for (int i = 0; i < RN; i++)
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++) {
            acc[i][c] = _mm512_setzero_ps();
            /* the sums it adds to: often last written on another core, here by the end */
            if (y->add) _mm_prefetch((const char *)y_at(y, r + i, (p + c) * PANEL), _MM_HINT_T0);
        }
    for (int k = 0; k < in; k++) {
        if (pf) _mm_prefetch(pf + (size_t)k * 64, _MM_HINT_T1);
        __m512 w[AVX512_CB_MAX];
#pragma GCC unroll 8
        for (int c = 0; c < CB; c++)
            w[c] = _mm512_loadu_ps(l->wp + at + ((size_t)c * in + k) * PANEL);
#pragma GCC unroll 8
        for (int i = 0; i < RN; i++) {
            __m512 xb = _mm512_set1_ps(xr[(size_t)i * in + k]);
#pragma GCC unroll 8
            for (int c = 0; c < CB; c++)
                acc[i][c] = _mm512_fmadd_ps(xb, w[c], acc[i][c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < CB; c++) {
        int o = (p + c) * PANEL, n = out - o < PANEL ? out - o : PANEL;
        __mmask16 mask = (__mmask16)((1u << n) - 1u);
        __m512 b = l->b ? _mm512_maskz_loadu_ps(mask, l->b + o) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int i = 0; i < RN; i++) {
            __m512 v = l->b ? _mm512_add_ps(acc[i][c], b) : acc[i][c];
            float *yo = y_at(y, r + i, o);
            if (y->add) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yo), v);
            _mm512_mask_storeu_ps(yo, mask, v);
        }
    }
}

#define M512(RN, CB)                                                                               \
    __attribute__((target("avx512f"))) static void micro512_##RN##_##CB(                           \
        const y_map *y, const float *x, int r, int p, const kr_linear *l, const char *pf) {        \
        micro512(RN, CB, y, x, r, p, l, pf);                                                       \
    }
#define M512_ROW(RN)  M512(RN, 1) M512(RN, 2) M512(RN, 3)
#define M512_WIDE(RN) M512(RN, 4) M512(RN, 5) M512(RN, 6) M512(RN, 7) M512(RN, 8)
M512_ROW(1)
M512_ROW(2)
M512_ROW(3)
M512_ROW(4)
M512_ROW(5)
M512_ROW(6)
M512_ROW(7)
M512_ROW(8)
M512_WIDE(1)
M512_WIDE(2)
M512(3, 4)
M512(4, 4)
M512(5, 4)
M512(6, 4)

typedef void (*micro_fn)(const y_map *, const float *, int, int, const kr_linear *, const char *);
#define M512_ENTRY(RN)                                                                             \
    { micro512_##RN##_1, micro512_##RN##_2, micro512_##RN##_3 }
static const micro_fn micro512_table[AVX512_RB][AVX512_CB] = {
    M512_ENTRY(1), M512_ENTRY(2), M512_ENTRY(3), M512_ENTRY(4),
    M512_ENTRY(5), M512_ENTRY(6), M512_ENTRY(7), M512_ENTRY(8)};
#define M512_WIDE_ENTRY(RN)                                                                        \
    {                                                                                              \
        micro512_##RN##_1, micro512_##RN##_2, micro512_##RN##_3, micro512_##RN##_4,                \
            micro512_##RN##_5, micro512_##RN##_6, micro512_##RN##_7, micro512_##RN##_8             \
    }
/* 6 rows x 4 panels (24 accumulators, 10 loads a step of k against 8 x 3's 11): a
 * task's 8 panels split 4 + 4 instead of 3 + 3 + 2, and 30 rows (a decode step of 30
 * paths) are 5 whole blocks instead of 8 + 8 + 8 + 6. */
static const micro_fn micro512_6x4[6] = {micro512_1_4, micro512_2_4, micro512_3_4,
                                         micro512_4_4, micro512_5_4, micro512_6_4};
static const micro_fn micro512_narrow[AVX512_NARROW][AVX512_CB_MAX] = {M512_WIDE_ENTRY(1),
                                                                       M512_WIDE_ENTRY(2)};

/* ---- AVX2 kernel -------------------------------------------------------------------------- */

/* A panel is two registers; 6 rows x 1 panel = 12 accumulators of the 16 registers. */
#define AVX2_RB 6

__attribute__((target("avx2,fma"), always_inline)) static inline void
micro256(int RN, const y_map *y, const float *x, int r, int p, const kr_linear *l, const char *pf) {
    int in = l->in, out = l->out;
    size_t at = (size_t)p * in * PANEL;
    const float *xr = x + (size_t)r * in;
    __m256 lo[AVX2_RB], hi[AVX2_RB];
#pragma GCC unroll 6
    for (int i = 0; i < RN; i++)
        lo[i] = hi[i] = _mm256_setzero_ps();
    for (int k = 0; k < in; k++) {
        if (pf) _mm_prefetch(pf + (size_t)k * 64, _MM_HINT_T1);
        size_t ik = at + (size_t)k * PANEL;
        __m256 w0 = _mm256_loadu_ps(l->wp + ik), w1 = _mm256_loadu_ps(l->wp + ik + 8);
#pragma GCC unroll 6
        for (int i = 0; i < RN; i++) {
            __m256 xb = _mm256_broadcast_ss(xr + (size_t)i * in + k);
            lo[i] = _mm256_fmadd_ps(xb, w0, lo[i]);
            hi[i] = _mm256_fmadd_ps(xb, w1, hi[i]);
        }
    }
    int o = p * PANEL, n = out - o < PANEL ? out - o : PANEL;
    /* unrolled like the loops above: an accumulator indexed by a variable would keep the
     * array in memory, stored back on every step of k (half the speed, measured) */
#pragma GCC unroll 6
    for (int i = 0; i < RN; i++) {
        float tmp[PANEL];
        _mm256_storeu_ps(tmp, lo[i]);
        _mm256_storeu_ps(tmp + 8, hi[i]);
        float *yr = y_at(y, r + i, o);
        for (int c = 0; c < n; c++)
            y_put(y, yr + c, l->b ? tmp[c] + l->b[o + c] : tmp[c]);
    }
}

/* One row over 4 panels (8 chains in flight, 8 accumulators): a decode step's row. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
row4_256(const y_map *y, const float *x, int r, int p, const kr_linear *l) {
    int in = l->in, out = l->out;
    size_t at = (size_t)p * in * PANEL;
    const float *xr = x + (size_t)r * in;
    size_t ps = (size_t)in * PANEL; /* floats from one panel to the next */
    __m256 a[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++)
        a[c] = _mm256_setzero_ps();
    for (int k = 0; k < in; k++) {
        __m256 xb = _mm256_broadcast_ss(xr + k);
        size_t i = at + (size_t)k * PANEL;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            size_t ic = i + c * ps;
            __m256 w0 = _mm256_loadu_ps(l->wp + ic), w1 = _mm256_loadu_ps(l->wp + ic + 8);
            a[2 * c] = _mm256_fmadd_ps(xb, w0, a[2 * c]);
            a[2 * c + 1] = _mm256_fmadd_ps(xb, w1, a[2 * c + 1]);
        }
    }
#pragma GCC unroll 4 /* constant indices keep the accumulators in registers (micro256) */
    for (int c = 0; c < 4; c++) {
        int o = (p + c) * PANEL, n = out - o < PANEL ? out - o : PANEL;
        float tmp[PANEL];
        _mm256_storeu_ps(tmp, a[2 * c]);
        _mm256_storeu_ps(tmp + 8, a[2 * c + 1]);
        float *yr = y_at(y, r, o);
        for (int i = 0; i < n; i++)
            y_put(y, yr + i, l->b ? tmp[i] + l->b[o + i] : tmp[i]);
    }
}

__attribute__((target("avx2,fma"))) static void
micro256_row4(const y_map *y, const float *x, int r, int p, const kr_linear *l, const char *pf) {
    (void)pf;
    row4_256(y, x, r, p, l);
}

#define M256(RN)                                                                                   \
    __attribute__((target("avx2,fma"))) static void micro256_##RN(                                 \
        const y_map *y, const float *x, int r, int p, const kr_linear *l, const char *pf) {        \
        micro256(RN, y, x, r, p, l, pf);                                                           \
    }
M256(1)
M256(2)
M256(3)
M256(4)
M256(5)
M256(6)
static const micro_fn micro256_table[AVX2_RB] = {micro256_1, micro256_2, micro256_3,
                                                 micro256_4, micro256_5, micro256_6};
#endif

/* ---- dispatch ----------------------------------------------------------------------------- */

typedef struct {
    const y_map *y;
    const float *x;
    int T, col_tasks, task_rows, tasks;
    /* A task holds `runs` runs of run_panels panels: one run (the plain product), or the same
     * columns of each of the n parts, run i in part i (part_panels apart), so that an epilogue
     * sees matching columns of every part (w1|w3: h1 and h3 side by side). */
    int runs, run_panels, part_panels;
    const kr_linear *l;
    kr_simd simd;
    kr_linear_epilogue epi;
    void *epi_ctx;
} linear_job;

/* Panels [*p0, *p1) of run `run` of column task c. */
static void run_range(const linear_job *j, int c, int run, int *p0, int *p1) {
    int base = run * j->part_panels,
        end = j->runs > 1 ? base + j->part_panels : (j->l->out + PANEL - 1) / PANEL;
    *p0 = base + c * j->run_panels;
    *p1 = *p0 + j->run_panels < end ? *p0 + j->run_panels : end;
}

/* The n panels from `want` that a task's thread reads next (for pf, see micro512): `want`
 * itself while it is below its run's end p1, else the start of the task's next run, else
 * (after the task's last row chunk) the first of the task its thread runs next, claimed now
 * (*next_task: -2 until then; a guess such as task + threads is wrong whenever one thread runs
 * ahead of the other, and both then start their next task from memory). *got: how many of
 * the n exist (0: none). */
static const char *next_panels(const linear_job *j, int task, int run, int want, int n, int p1,
                               bool last_chunk, int *next_task, int *got) {
    int panels = (j->l->out + PANEL - 1) / PANEL, np = panels, e = panels;
    if (want < p1)
        np = want, e = p1;
    else if (run + 1 < j->runs)
        run_range(j, task % j->col_tasks, run + 1, &np, &e);
    else if (last_chunk) {
        if (*next_task == -2) *next_task = kr_parallel_claim_next();
        if (*next_task >= 0) run_range(j, *next_task % j->col_tasks, 0, &np, &e);
    }
    *got = e - np < n ? e - np : n;
    size_t at = (size_t)np * j->l->in * PANEL;
    return (const char *)(j->l->wp + at);
}

/* Rows [rc, rc1) x panels [p0, p1) of a task: the kernel level's blocks. */
static void task_block(const linear_job *j, int task, int run, int rc, int rc1, int p0, int p1,
                       bool last_chunk, int *next_task) {
    const kr_linear *l = j->l;
    switch (j->simd) {
#ifdef KR_X86
    case KR_SIMD_AMX:
    case KR_SIMD_AVX512:
        if (rc1 - rc <= AVX512_NARROW) { /* a decode step's rows: wide, streaming */
            for (int p = p0; p < p1; p += AVX512_CB_MAX) {
                int cb = p1 - p < AVX512_CB_MAX ? p1 - p : AVX512_CB_MAX;
                micro512_narrow[rc1 - rc - 1][cb - 1](j->y, j->x, rc, p, l, NULL);
            }
            break;
        }
        if ((p1 - p0) % 4 == 0) { /* whole groups of 4 panels: 6 x 4 blocks */
            for (int p = p0; p < p1; p += 4) {
                int np_n;
                const char *next =
                    next_panels(j, task, run, p + 4, 4, p1, last_chunk, next_task, &np_n);
                for (int r = rc, b = 0; r < rc1; r += 6, b++) {
                    int rn = rc1 - r < 6 ? rc1 - r : 6;
                    const char *pf = b < np_n ? next + (size_t)b * l->in * 64 : NULL;
                    micro512_6x4[rn - 1](j->y, j->x, r, p, l, pf);
                }
            }
            break;
        }
        for (int p = p0; p < p1; p += AVX512_CB) {
            int cb = p1 - p < AVX512_CB ? p1 - p : AVX512_CB;
            for (int r = rc; r < rc1; r += AVX512_RB) {
                int rn = rc1 - r < AVX512_RB ? rc1 - r : AVX512_RB;
                micro512_table[rn - 1][cb - 1](j->y, j->x, r, p, l, NULL);
            }
        }
        break;
    case KR_SIMD_AVX2:
        if (rc1 - rc == 1) { /* one row: four panels at a time, then one */
            int p = p0;
            for (; p + 4 <= p1; p += 4)
                micro256_row4(j->y, j->x, rc, p, l, NULL);
            for (; p < p1; p++)
                micro256_1(j->y, j->x, rc, p, l, NULL);
            break;
        }
        for (int p = p0; p < p1; p++) {
            int np_n; /* the first row block fetches the next panel whole (in lines) */
            const char *next =
                next_panels(j, task, run, p + 1, 1, p1, last_chunk, next_task, &np_n);
            for (int r = rc; r < rc1; r += AVX2_RB) {
                int rn = rc1 - r < AVX2_RB ? rc1 - r : AVX2_RB;
                micro256_table[rn - 1](j->y, j->x, r, p, l, r == rc && np_n ? next : NULL);
            }
        }
        break;
#endif
    default:
        (void)task, (void)run, (void)last_chunk, (void)next_task;
        panels_generic(j->y, j->x, rc, rc1, p0, p1, l);
        break;
    }
}

/* One task: rows [r0, r1) x its runs of panels, in row chunks so that a chunk of x stays in
 * cache while the task's panels stream past it; then the epilogue on what it wrote, still in
 * cache. */
static void linear_task(void *arg, int task, int worker) {
    (void)worker;
    const linear_job *j = arg;
    int c = task % j->col_tasks, r0 = task / j->col_tasks * j->task_rows;
    int r1 = r0 + j->task_rows < j->T ? r0 + j->task_rows : j->T, next = -2;
    for (int rc = r0; rc < r1; rc += ROW_CHUNK) {
        int rc1 = rc + ROW_CHUNK < r1 ? rc + ROW_CHUNK : r1;
        for (int run = 0; run < j->runs; run++) {
            int p0, p1;
            run_range(j, c, run, &p0, &p1);
            task_block(j, task, run, rc, rc1, p0, p1, rc1 == r1, &next);
        }
    }
    if (j->epi) {
        int p0, p1, width = j->y->width;
        run_range(j, c, 0, &p0, &p1);
        j->epi(j->epi_ctx, r0, r1, p0 * PANEL, p1 * PANEL < width ? p1 * PANEL : width);
    }
}

/* ---- BF16 and int8 weights ---------------------------------------------------------------- */

/* A task rounds (BF16) or quantises (int8) its rows once, on its stack (at most ROWS_BYTES),
 * then walks its panels in tiles that write y themselves. Many rows: a task takes all the
 * columns of its rows (each row converted once). A decode step's few rows (at most STEP_ROWS):
 * one row task, its columns split among the threads, so that each weight is read from memory
 * once a step (rows split in two tasks read every weight twice); the caller converts the rows
 * once for all those tasks. */
#define ROWS_BYTES 131072
#define STEP_ROWS  48

/* Whether a product's tiles fetch their next panels into L2 ahead: for a decode step's few
 * rows, not one path's (NARROW_ROWS), which streams at the bandwidth's limit: there the
 * hardware's prefetch keeps up alone and more requests slowed it (design.md, int8 weights). */
static int tiles_prefetch(int T) {
    return T > NARROW_ROWS && T <= STEP_ROWS;
}

typedef struct { /* rows converted: BF16 pairs, or int8 blocks and their scales */
    union {
        int8_t q[ROWS_BYTES];
        uint32_t h[ROWS_BYTES / 4];
    } u __attribute__((aligned(64)));
    float d[ROWS_BYTES / KR_Q8_BLOCK];
    int32_t neg[ROWS_BYTES / KR_Q8_BLOCK];
} tile_rows;

typedef struct {
    const y_map *y;
    const float *x;
    int T, rows, col_tasks, col_panels;
    int prefetch; /* tiles_prefetch(T) */
    const kr_linear *l;
    kr_simd simd;
    tile_rows *shared; /* the one row task's rows, converted by the caller; or NULL */
} tiles_job;

static kr_q8_rows q8_rows(tile_rows *c, const tiles_job *j) {
    kr_q8_rows xq = {.q = c->u.q,
                     .d = c->d,
                     .neg = c->neg,
                     .nb = kr_q8_blocks(j->l->in),
                     .prefetch = j->prefetch};
    return xq;
}

/* Rows [r0, r0 + rn) of x into c */
static void convert_rows(tile_rows *c, const tiles_job *j, int r0, int rn) {
    const kr_linear *l = j->l;
    kr_q8_rows xq = q8_rows(c, j);
    if (l->wh)
        kr_bf16_rows(c->u.h, j->x + (size_t)r0 * l->in, rn, l->in, j->simd);
    else
        kr_q8_quantise_rows(&xq, j->x + (size_t)r0 * l->in, rn, l->in, j->simd);
}

/* Where the tile of rows from r0, panels from p (up to cb, within p's part of y) writes */
static kr_tile_out tile_at(const y_map *y, int r0, int p, int *cb, const kr_linear *l) {
    int o0 = p * PANEL, end = (o0 / y->width + 1) * y->width;
    if (end > l->out) end = l->out;
    if (o0 + *cb * PANEL > end) *cb = (end - o0 + PANEL - 1) / PANEL; /* no tile straddles parts */
    int m = end - o0 < *cb * PANEL ? end - o0 : *cb * PANEL;
    kr_tile_out t = {y_at(y, r0, o0), (size_t)y->width, l->b ? l->b + o0 : NULL, y->add, m};
    return t;
}

static void tiles_task(void *arg, int task, int worker) {
    (void)worker;
    const tiles_job *j = arg;
    const kr_linear *l = j->l;
    int panels = (l->out + PANEL - 1) / PANEL;
    int p0 = task % j->col_tasks * j->col_panels, r0 = task / j->col_tasks * j->rows;
    int p1 = p0 + j->col_panels < panels ? p0 + j->col_panels : panels;
    int rn = j->T - r0 < j->rows ? j->T - r0 : j->rows;
    tile_rows own, *c = j->shared;
    if (!c) convert_rows(c = &own, j, r0, rn);
    kr_q8_rows xq = q8_rows(c, j);
    int tp = l->wh ? KR_BF16_TILE_PANELS : KR_Q8_TILE_PANELS;
    for (int p = p0, cb; p < p1; p += cb) {
        cb = p1 - p < tp ? p1 - p : tp;
        kr_tile_out t = tile_at(j->y, r0, p, &cb, l);
        if (l->wh)
            kr_bf16_tile(&t, c->u.h, l->in, rn, p, cb, l, j->simd, j->prefetch);
        else
            kr_q8_tile(&t, &xq, 0, rn, p, cb, l, j->simd);
    }
}

/* Every element is its own chain (kr_bf16_tile, kr_q8_tile): tasks of any shape give the same
 * bits. The epilogue runs after the join, over all rows. */
static void forward_tiles(const y_map *y, const float *x, int T, const kr_linear *l,
                          kr_linear_epilogue epi, void *epi_ctx) {
    int panels = (l->out + PANEL - 1) / PANEL, rows, many;
    if (l->wh) { /* >= 1: the loader keeps in <= KR_BF16_MAX_IN */
        rows = ROWS_BYTES / (4 * kr_bf16_pairs(l->in));
        many = KR_BF16_TILE_ROWS;
    } else { /* >= 1: the loader keeps in <= KR_Q8_MAX_IN */
        rows = ROWS_BYTES / (kr_q8_blocks(l->in) * KR_Q8_BLOCK);
        many = KR_Q8_TILE_ROWS;
    }
    if (T <= STEP_ROWS && T <= rows)
        rows = T;
    else if (rows > many)
        rows = many;
    int row_tasks = (T + rows - 1) / rows, threads = kr_parallel_threads(), col_tasks = 1;
    if (row_tasks < 2 * threads) { /* few rows: split the columns too, in whole panels */
        col_tasks = (2 * threads + row_tasks - 1) / row_tasks;
        if (col_tasks > panels) col_tasks = panels;
    }
    int col_panels = (panels + col_tasks - 1) / col_tasks;
    tiles_job j = {.y = y,
                   .x = x,
                   .T = T,
                   .rows = rows,
                   .col_tasks = (panels + col_panels - 1) / col_panels,
                   .col_panels = col_panels,
                   .prefetch = tiles_prefetch(T),
                   .l = l,
                   .simd = kr_simd_level()};
    tile_rows once;
    if (row_tasks == 1 && j.col_tasks > 1) convert_rows(j.shared = &once, &j, 0, T);
    kr_parallel_for(j.col_tasks * row_tasks, tiles_task, &j);
    if (epi) epi(epi_ctx, 0, T, 0, y->width);
}

/* n parts of y (1: the plain product); with an epilogue, each task holds the same columns
 * of every part (runs, above). */
static void forward(const y_map *y, int n, const float *x, int T, const kr_linear *l,
                    kr_linear_epilogue epi, void *epi_ctx) {
    if (T < 1) return;
    if (l->wq || l->wh) {
        forward_tiles(y, x, T, l, epi, epi_ctx);
        return;
    }
    if (!kr_linear_is_packed(l)) {
        rows_unpacked(y, x, T, l);
        if (epi) epi(epi_ctx, 0, T, 0, y->width);
        return;
    }
    if (epi && T <= NARROW_ROWS) { /* a decode step of one path: the plain product (each
                                    * thread streams one contiguous run), then the epilogue of
                                    * a row or two after the join (in-task epilogues on paired
                                    * runs measured slower for a one-path step) */
        forward(y, n, x, T, l, NULL, NULL);
        epi(epi_ctx, 0, T, 0, y->width);
        return;
    }
    int panels = (l->out + PANEL - 1) / PANEL, runs = epi ? n : 1;
    int part_panels = runs > 1 ? panels / n : panels;
    int row_tasks = (T + TASK_ROWS - 1) / TASK_ROWS, per = (T + row_tasks - 1) / row_tasks;
    per = (per + 7) / 8 * 8;
    row_tasks = (T + per - 1) / per;
    int threads = kr_parallel_threads(), rp = TASK_PANELS / runs > 0 ? TASK_PANELS / runs : 1;
    if (T <= NARROW_ROWS) { /* bandwidth-bound: one or NARROW_TASKS runs a thread */
        int tasks = threads * (threads <= 2 ? 1 : NARROW_TASKS);
        rp = (part_panels + tasks - 1) / tasks;
        rp = (rp + 7) / 8 * 8;
    }
    int col_tasks = (part_panels + rp - 1) / rp;
    linear_job j = {.y = y,
                    .x = x,
                    .T = T,
                    .col_tasks = col_tasks,
                    .task_rows = per,
                    .tasks = col_tasks * row_tasks,
                    .runs = runs,
                    .run_panels = rp,
                    .part_panels = part_panels,
                    .l = l,
                    .simd = kr_simd_level(),
                    .epi = epi,
                    .epi_ctx = epi_ctx};
    kr_parallel_for(j.tasks, linear_task, &j);
}

void kr_linear_forward(float *y, const float *x, int T, const kr_linear *l) {
    y_map m = {&y, l->out, false};
    forward(&m, 1, x, T, l, NULL, NULL);
}

void kr_linear_forward_add(float *y, const float *x, int T, const kr_linear *l) {
    y_map m = {&y, l->out, true};
    forward(&m, 1, x, T, l, NULL, NULL);
}

int kr_linear_forward_parts(float *const *ys, int n, const float *x, int T, const kr_linear *l) {
    if (n < 1 || l->out % n || l->out / n % PANEL) return -1;
    y_map m = {ys, l->out / n, false};
    forward(&m, n, x, T, l, NULL, NULL);
    return 0;
}

int kr_linear_forward_then(float *const *ys, int n, const float *x, int T, const kr_linear *l,
                           kr_linear_epilogue epi, void *ctx) {
    if (n < 1 || l->out % n || (n > 1 && l->out / n % PANEL)) return -1;
    y_map m = {ys, l->out / n, false};
    forward(&m, n, x, T, l, epi, ctx);
    return 0;
}
