/* bench.c — how fast kronosd forecasts, measured in one run so that the ratios hold on a
 * shared, noisy machine.
 *
 *   kronos-bench --model DIR [--csv FILE] [--lookback N]  [--reps N] [--full] [--decode-only]
 *                [--cached-only] [--phases-cpu] [--only PHASE] [--weights f32|bf16|int8]
 *                [--kv f32|bf16]
 *   kronos-bench --model DIR --agreement [--agreement-dump DIR] [--csv FILE] [--lookback N]
 *                [--eval-seeds N] [--eval-origins N] [--eval-samples N] [--eval-modes M,...]
 *                [--eval-only]
 *   kronos-bench --model DIR --train-step [--batch 16] [--lookback 90] [--predict 10] [--reps 5]
 *
 * Reports the machine (CPU model, the OpenBLAS core, kronosd's own kernel level), then ms per
 * forecast, uncached reference vs KV-cached, horizons 112 (the window never slides at
 * max_context 512) and 120 (it slides for 8 steps), 1 and 30 sample paths; then each phase
 * (prefill, cached decode step at 1 and 30 paths, and at 30 paths KB_MID_HORIZON tokens into the
 * horizon, sliding-window recompute step, tokenizer decode) with its time and GFLOP/s as a
 * fraction of OpenBLAS's sgemm 1024³ measured in the same run (before and after the phases,
 * the better of the two) and, with float32 weights, its ceiling (the fraction it reaches with
 * its FLOPs at that yardstick and its products and its attention each no faster than their
 * bytes at the read bandwidth measured below: measure/roofline.c), OpenBLAS on a 30-path step's
 * own products (weights from memory, at 30 rows) beside that step, and single-path decode against
 * weight bytes ÷ memory bandwidth in three rounds, each between two reads of memory (the median
 * round, and the same with the KV cache's bytes added); and a parity check, the
 * KV-cached forecast against the reference path, to the bit (the bench exits 1 if they differ). The
 * reference at 30 paths takes many minutes (its paths run one after another); it is measured only
 * with --full, and otherwise shown as 30 × its one-path time. --only PHASE (prefill, step1, step30,
 * step30mid, recompute1, recompute30, tokenizer) times one phase over --reps rounds and nothing
 * else: a profiler's loop.
 *
 * Steady state: every phase first runs once untimed, and cached forecasts share one KV pool,
 * so that the timed calls find their KV blocks and per-thread scratch already touched, as a
 * server's long-lived pool and threads are after their first requests (a fresh pool's pages
 * are faulted in and zeroed by the kernel on first write).
 *
 * The sgemm yardstick runs on the best core OpenBLAS has for this CPU at the vector width of
 * kronosd's kernels (AVX-512: SkylakeX and Cooperlake; AVX2, as with KRONOS_SIMD=avx2:
 * Haswell and Zen; the portable kernels: the CPU's widest), the fastest of them measured
 * here: OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so the bench runs itself
 * again as a child with the variable set to each core (`kronos-bench --sgemm-yardstick`,
 * which prints "CORE GFLOPS"; `--sgemm-step ROWS LAYERS D FF V1 V2` prints "CORE MS" for
 * a step's products), prints every figure and says when the environment's core is
 * below the CPU's best; the table's percentages use the fastest.
 */
#include "agreement.h"
#include "bench_train.h"
#include "bench_models.h"
#include "blas_core.h"
#include "kronos.h"
#include "machine.h"
#include "phases.h"
#include "roofline.h"
#include "work.h"
#include "yardstick.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SINGLE_ROUNDS 3 /* single-path step rounds, each between two reads of memory */
_Static_assert(SINGLE_ROUNDS == 3, "median3 and the single-path line print three rounds");
static double median3(const double x[3]) {
    double a = x[0], b = x[1], c = x[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* A phase's work for its ceiling: its FLOPs, the weights its products read and the keys and
 * values its attention reads. */
static kb_phase_work work(kb_flops f, double weights, double kv) {
    return (kb_phase_work){f.all, f.attn, weights, kv};
}

/* One row of the phase table: its share of the yardstick `peak`, and its ceiling at peak and
 * bandwidth bw (NAN: not shown). */
static void phase(const char *name, double ms, kb_phase_work w, double peak, double bw) {
    double gf = w.flops / (ms * 1e6);
    printf("| %s | %.2f | %.2f | %.1f | %.0f%% |", name, ms, w.flops / 1e9, gf, 100 * gf / peak);
    double ceiling = kb_phase_ceiling(w, peak, bw);
    if (isnan(ceiling))
        printf(" – |\n");
    else
        printf(" %.0f%% |\n", 100 * ceiling);
}

int main(int argc, char **argv) {
    const char *model = NULL, *csv = "tests/data/kline_5min.csv";
    int L = -1, reps = -1; /* defaults after the flags: 400 and 2, a training step's 90 and 5 */
    bool full = false, decode_only = false, cached_only = false, phases_cpu = false;
    const char *only = NULL;
    kr_precision weights = KR_PREC_F32, kv_mode = KR_PREC_F32;
    bool agreement = false;
    const char *agreement_dump = NULL;
    kb_eval_opts eval = {.seeds = 4, .origins = 0, .samples = 32};
    bool eval_only = false;
    bool train_step = false; /* bench_train.c */
    int batch = 16, predict = 10;
    openblas_set_num_threads(1); /* OpenBLAS's threads run only for the yardstick */
    if (argc >= 2 && !strcmp(argv[1], "--models-overhead")) return kb_models_overhead(argc, argv);
    if (argc == 2 && !strcmp(argv[1], "--sgemm-yardstick")) { /* a child of measured_on */
        double gf = kb_yardstick_here();
        printf("%s %.3f\n", kb_blas_core(), gf);
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "--sgemm-step")) { /* a child of kb_step_products_line */
        double ms = kb_step_products_ms(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                                        atoi(argv[6]), atoi(argv[7]));
        printf("%s %.4f\n", kb_blas_core(), ms);
        return isnan(ms) ? 1 : 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv = argv[++i];
        else if (!strcmp(argv[i], "--lookback") && i + 1 < argc)
            L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--full"))
            full = true;
        else if (!strcmp(argv[i], "--decode-only"))
            decode_only = true;
        else if (!strcmp(argv[i], "--cached-only"))
            cached_only = true;
        else if (!strcmp(argv[i], "--phases-cpu"))
            phases_cpu = decode_only = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i], decode_only = true;
        else if (!strcmp(argv[i], "--agreement"))
            agreement = true;
        else if (!strcmp(argv[i], "--agreement-dump") && i + 1 < argc)
            agreement = true, agreement_dump = argv[++i];
        else if (!strcmp(argv[i], "--eval-seeds") && i + 1 < argc)
            eval.seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-origins") && i + 1 < argc)
            eval.origins = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-samples") && i + 1 < argc)
            eval.samples = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--eval-modes") && i + 1 < argc)
            eval.modes = argv[++i];
        else if (!strcmp(argv[i], "--eval-only"))
            agreement = eval_only = true;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            kr_error err = {0};
            if (kr_kv_precision_parse(argv[++i], "--kv", &kv_mode, &err)) {
                fprintf(stderr, "kronos-bench: %s\n", err.msg);
                return 2;
            }
        } else if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
            kr_error err = {0};
            if (kr_precision_parse(argv[++i], "--weights", &weights, &err)) {
                fprintf(stderr, "kronos-bench: %s\n", err.msg);
                return 2;
            }
        } else if (!strcmp(argv[i], "--train-step"))
            train_step = true;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--predict") && i + 1 < argc)
            predict = atoi(argv[++i]);
        else {
            fprintf(
                stderr,
                "usage: kronos-bench --model DIR [--csv FILE] [--lookback N] [--reps N] "
                "[--full] [--decode-only] [--cached-only] [--phases-cpu] [--only PHASE] "
                "[--weights f32|bf16|int8] [--kv f32|bf16]\n"
                "       kronos-bench --model DIR --agreement [--agreement-dump DIR] [--csv FILE] "
                "[--lookback N] [--eval-seeds N] [--eval-origins N] [--eval-samples N] "
                "[--eval-modes M,...] [--eval-only]\n"
                "       kronos-bench --model DIR --train-step [--batch N] [--lookback N] "
                "[--predict N] [--reps N]\n"
                "       kronos-bench --models-overhead --model DIR [--models N] [--reps N] ...\n");
            return 2;
        }
    }
    if (L < 0) L = train_step ? 90 : 400;
    if (reps < 0) reps = train_step ? 5 : 2;
    if (!model) {
        fprintf(stderr, "kronos-bench: --model DIR is required (make one with kronos-mkmodel)\n");
        return 2;
    }
    char cpu[256];
    kb_cpu_model(cpu, sizeof cpu);
    if (agreement) { /* each reduced mode against float32: no timing */
        kb_series a;
        printf("machine: %s, kronosd kernels %s\n", cpu, kr_simd_name(kr_simd_level()));
        if (kb_read_csv(csv, &a)) return 1;
        int rc = eval_only ? 0 : kb_agreement(model, a.wall, a.col, a.n, L, agreement_dump);
        if (rc == 0 && eval.seeds > 0) /* --eval-seeds 0: the teacher-forced table alone */
            rc = kb_agreement_eval(model, a.wall, a.col, a.n, &eval, agreement_dump);
        kb_series_free(&a);
        return rc;
    }
    printf("machine: %s, %d threads; OpenBLAS core %s; kronosd kernels %s (bf16 products %s, "
           "int8 %s); weights %s, kv %s\n",
           cpu, kr_threads(), kb_blas_core(), kr_simd_name(kr_simd_level()),
           kr_bf16_product_name(kr_simd_level()), kr_q8_product_name(kr_simd_level()),
           kr_precision_name(weights), kr_precision_name(kv_mode));
    kr_error err;
    kr_model *m = kb_mode_load(model, &(kb_mode){.weights = weights, .kv = kv_mode}, &err);
    if (!m) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    kb_series s;
    if (kb_read_csv(csv, &s)) return 1;
    if (s.n < L + 120) {
        fprintf(stderr, "kronos-bench: %s: need %d rows\n", csv, L + 120);
        kb_series_free(&s);
        return 1;
    }
    if (train_step) {
        if (batch < 1 || predict < 0 || L < 1 || reps < 1) {
            fprintf(stderr, "kronos-bench: --train-step needs batch, lookback, reps >= 1\n");
            return 2;
        }
        kb_train_args ta = {
            {s.n, s.wall, {s.col[0], s.col[1], s.col[2], s.col[3], s.col[4], s.col[5]}},
            batch,
            L,
            predict,
            reps,
            kb_yardstick()};
        char pred[1024];
        snprintf(pred, sizeof pred, "%s/predictor", model);
        const int rc = kb_train_step(m, pred, &ta);
        kr_model_free(m);
        kb_series_free(&s);
        return rc;
    }
    const kr_predictor_config *c = kr_model_predictor_config(m);
    printf("model: d_model %d, %d layers, %d heads, ff %d; %zu parameters; max_context 512\n",
           c->d_model, c->n_layers, c->n_heads, c->ff_dim, kr_model_param_count(m));
    printf("data: %s, lookback %d, best of %d runs (cached)\n\n", csv, L, reps);

    if (!decode_only)
        printf("| horizon | paths | reference ms | cached ms | speed-up | cached / recomputed "
               "steps |\n|---|---|---|---|---|---|\n");
    int horizons[2] = {112, 120}, samples[2] = {1, 30};
    /* one pool for every cached forecast, as a server keeps one: 32 windows of max_context */
    kr_pool *fc_pool = decode_only ? NULL : kr_pool_create(m, kr_pool_bytes_for(m, 512) * 32, &err);
    if (!decode_only && !fc_pool) {
        fprintf(stderr, "kronos-bench: %s\n", err.msg);
        return 1;
    }
    double ref1[2] = {0}, cached1[2] = {0}, cached30[2] = {0};
    for (int h = 0; h < 2 && !decode_only; h++)
        for (int k = 0; k < 2; k++) {
            int P = horizons[h], S = samples[k];
            kr_forecast_result res;
            double cached = kb_forecast_ms(m, fc_pool, &s, L, P, S, true, reps, &res);
            double ref;
            const char *note = "";
            if (cached_only) {
                ref = NAN;
            } else if (S == 1 || full) {
                ref = kb_forecast_ms(m, NULL, &s, L, P, S, false, 1, NULL);
            } else {
                ref = ref1[h] * S;
                note = " (30 × 1 path)";
            }
            if (S == 1) {
                ref1[h] = ref;
                cached1[h] = cached;
            } else {
                cached30[h] = cached;
            }
            printf("| %d | %d | %.0f%s | %.0f | %.1f× | %d / %d |\n", P, S, ref, note, cached,
                   ref / cached, res.usage.cached_steps, res.usage.recomputed_steps);
            fflush(stdout);
            kr_forecast_result_free(&res);
        }
    if (!decode_only)
        printf("\n30 paths cost %.2f× one path (horizon 112), %.2f× (horizon 120); cached "
               "forecasts share one KV pool (as a server's), the first call touching its pages\n",
               cached30[0] / cached1[0], cached30[1] / cached1[1]);
    kr_pool_free(fc_pool);

    const kr_tokenizer_config *tc = kr_model_tokenizer_config(m);
    int mc = 512, P = 120, g = P - 4; /* a recompute step past the slide: window of mc */
    if (only) {                       /* one phase, `reps` times (for a profiler), its time alone */
        if (phases_cpu) kb_phases_in_cpu_time();
        double ms = NAN, a_ms, b_ms;
        if (!strcmp(only, "prefill")) {
            kb_window_ms(m, &s, L, 0, 1, reps, &ms, &a_ms);
        } else if (!strcmp(only, "step1") || !strcmp(only, "step30")) {
            ms = kb_decode_step_ms(m, &s, L, only[4] == '1' ? 1 : 30, 0, reps);
        } else if (!strcmp(only, "step30mid")) {
            if (!kb_mid_horizon_fits(L, mc)) {
                fprintf(stderr,
                        "kronos-bench: --only step30mid: lookback %d + %d + %d steps is past the "
                        "context window of %d\n",
                        L, KB_MID_HORIZON, KB_TIMED_STEPS, mc);
                return 2;
            }
            ms = kb_decode_step_ms(m, &s, L, 30, KB_MID_HORIZON, reps);
        } else if (!strcmp(only, "recompute1") || !strcmp(only, "recompute30")) {
            kb_window_ms(m, &s, mc - g, g, only[9] == '1' ? 1 : 30, reps, &a_ms, &b_ms);
            ms = a_ms + b_ms;
        } else if (!strcmp(only, "tokenizer")) {
            ms = kb_detok_ms(m, L + P, reps);
        } else {
            fprintf(stderr,
                    "kronos-bench: --only %s: not prefill, step1, step30, step30mid, "
                    "recompute1, recompute30 or tokenizer\n",
                    only);
            return 2;
        }
        printf("%s: %.3f ms (%s time, best of %d; steps: the median)\n", only, ms,
               phases_cpu ? "CPU" : "wall", reps);
        kr_model_free(m);
        kb_series_free(&s);
        return 0;
    }

    /* the yardstick before and after the phases, the best of the two per core (a shared
     * machine's neighbours depress one or the other) */
    double peak = phases_cpu ? NAN : kb_yardstick();
    double bw = NAN;
    if (phases_cpu) {
        kb_phases_in_cpu_time();
        printf("phases in CPU time of the whole process (--phases-cpu), no yardstick\n");
    }

    double pre_ms, own1_ms, own30_ms, rpre_ms;
    kb_window_ms(m, &s, L, 0, 1, reps, &pre_ms, &own1_ms);
    kb_window_ms(m, &s, mc - g, g, 1, reps, &rpre_ms, &own1_ms);
    kb_window_ms(m, &s, mc - g, g, 30, reps, &rpre_ms, &own30_ms);
    /* the single-path step in SINGLE_ROUNDS rounds between reads of memory (each the best of
     * 5 passes): a round's floor divides by the better of the reads beside it, the nearest in
     * time a shared machine's bandwidth can be had (its neighbours move it by a third from
     * one minute to the next); the table takes the rounds' median step */
    int mid = KB_TIMED_STEPS / 2; /* the timed steps' median position past their start */
    double bytes = kb_weight_bytes(c, kr_model_weights(m)),
           kv = kb_kv_bytes(c, L + mid) / (kr_model_kv(m) == KR_PREC_BF16 ? 2 : 1);
    double step1 = NAN, read[SINGLE_ROUNDS + 1], round_ms[SINGLE_ROUNDS];
    double ratio[SINGLE_ROUNDS], ratio_kv[SINGLE_ROUNDS];
    if (phases_cpu) {
        step1 = kb_decode_step_ms(m, &s, L, 1, 0, reps);
    } else {
        size_t reads = (size_t)(bytes + kv); /* what a step reads: weights and KV cache */
        double memory = kb_read_bandwidth(kr_threads(), (size_t)256 << 20);
        read[0] = kb_read_bandwidth(kr_threads(), reads);
        for (int k = 0; k < SINGLE_ROUNDS; k++) {
            round_ms[k] = kb_decode_step_ms(m, &s, L, 1, 0, reps);
            read[k + 1] = kb_read_bandwidth(kr_threads(), reads);
            double near = read[k] > read[k + 1] ? read[k] : read[k + 1];
            ratio[k] = round_ms[k] / (bytes / (near * 1e6));
            ratio_kv[k] = round_ms[k] / (reads / (near * 1e6));
            if (!(near <= bw)) bw = near;
        }
        printf("read of %.1f MB, a step's weights and KV (%d threads), around %d single-path "
               "rounds:",
               reads / 1e6, kr_threads(), SINGLE_ROUNDS);
        for (int k = 0; k <= SINGLE_ROUNDS; k++)
            printf(" %.1f", read[k]);
        printf(" GB/s; the horizon's floor uses %.1f (a 256 MiB buffer: %.1f GB/s)\n", bw, memory);
        step1 = median3(round_ms);
    }
    double step30 = kb_decode_step_ms(m, &s, L, 30, 0, reps);
    double step30mid =
        kb_mid_horizon_fits(L, mc) ? kb_decode_step_ms(m, &s, L, 30, KB_MID_HORIZON, reps) : NAN;
    double det_ms = kb_detok_ms(m, L + P, reps);
    if (!phases_cpu) {
        printf("again after the phases:\n");
        double again = kb_yardstick();
        if (again > peak) peak = again;
        printf("the table's yardstick: %.1f GFLOP/s (the better of the two)\n", peak);
    }
    /* the ceilings: float32's products against the float32 yardstick (a reduced mode's
     * products are not held to it), each part's bytes at the bandwidth of the single-path
     * rounds; a cache's bytes each read once: the shared prefix once for all paths */
    double cbw = kr_model_weights(m) == KR_PREC_F32 ? bw : NAN;
    double kv_elt = kr_model_kv(m) == KR_PREC_BF16 ? 0.5 : 1.0;
#define KV(n) (kv_elt * kb_kv_bytes(c, (n)))
    kb_flops f_own = kb_append_flops(c, mc - g, g), f_pre = kb_append_flops(c, 0, mc - g);
    char name[96];
    printf("\n| phase | ms | GFLOP | GFLOP/s | of sgemm peak | ceiling |\n"
           "|---|---|---|---|---|---|\n");
    phase("prefill, lookback (1 cache)", pre_ms, work(kb_append_flops(c, 0, L), bytes, KV(L)), peak,
          cbw);
    phase("cached decode step, 1 path", step1, work(kb_step_flops(c, L + mid), bytes, KV(L + mid)),
          peak, NAN);
    phase("cached decode step, 30 paths", step30,
          work(kb_flops_times(30, kb_step_flops(c, L + mid)), bytes, KV(L) + 30 * KV(mid)), peak,
          cbw);
    snprintf(name, sizeof name, "cached decode step, 30 paths, %d tokens in", KB_MID_HORIZON);
    if (!isnan(step30mid))
        phase(name, step30mid,
              work(kb_flops_times(30, kb_step_flops(c, L + KB_MID_HORIZON + mid)), bytes,
                   KV(L) + 30 * KV(KB_MID_HORIZON + mid)),
              peak, cbw);
    /* a recompute's products run twice: over the prefix, then over the paths' own rows */
    snprintf(name, sizeof name, "sliding recompute step, 1 path (%d + %d)", mc - g, g);
    phase(name, rpre_ms + own1_ms, work(kb_flops_plus(f_pre, f_own), 2 * bytes, KV(mc)), peak, cbw);
    snprintf(name, sizeof name, "sliding recompute step, 30 paths (%d + 30 × %d)", mc - g, g);
    phase(name, rpre_ms + own30_ms,
          work(kb_flops_plus(f_pre, kb_flops_times(30, f_own)), 2 * bytes, KV(mc - g) + 30 * KV(g)),
          peak, cbw);
#undef KV
    snprintf(name, sizeof name, "tokenizer decode, %d tokens", L + P);
    phase(name, det_ms,
          work(kb_detok_flops(tc, L + P), kb_detok_weight_bytes(tc), kb_detok_kv_bytes(tc, L + P)),
          peak, cbw);
    if (!isnan(cbw))
        printf("(ceiling: the share of the yardstick a phase reaches with its FLOPs at the "
               "yardstick, its products no faster than their weights and its attention than its "
               "keys and values at %.1f GB/s, one after the other; the single-path step is bound "
               "by memory, below)\n",
               cbw);
    /* the yardstick multiplies matrices that stay in the caches; a decode step's products
     * stream their weights from memory at a few rows: OpenBLAS on those, for scale */
    if (!phases_cpu) {
        printf("\n");
        kb_step_products_line(c, 30, step30);
    }

    int diff = kb_parity_check(m, &s, mc);
    printf("\nparity: horizon 12 from lookback %d (the window slides for 6 steps), KV-cached vs "
           "the reference path: %s\n",
           mc - 6, diff ? "DIFFERENT" : "the same forecast, bit for bit");
    if (diff) fprintf(stderr, "kronos-bench: %d numbers differ between the paths\n", diff);

    double floor_tok = bytes / (bw * 1e6);
    if (!phases_cpu) {
        printf("\nsingle-path decode: %.2f ms a token (the median of %d rounds: %.2f, %.2f, "
               "%.2f); %.1f MB of weights a token ÷ each round's bandwidth: %.2f×, %.2f×, "
               "%.2f× its floor, median %.2f×\n",
               step1, SINGLE_ROUNDS, round_ms[0], round_ms[1], round_ms[2], bytes / 1e6, ratio[0],
               ratio[1], ratio[2], median3(ratio));
        printf("  with the KV cache the step reads too (%.1f MB at %d positions): median %.2f× "
               "of (weights + KV) ÷ bandwidth\n",
               kv / 1e6, L + 8, median3(ratio_kv));
    }
    if (!decode_only) {
        double floor112 = 112 * floor_tok + kb_append_flops(c, 0, L).all / (peak * 1e6);
        printf("horizon 112, 1 path: %.0f ms against a floor of %.0f ms (112 tokens' weights ÷ "
               "bandwidth + prefill FLOPs ÷ peak) = %.2f× the floor\n",
               cached1[0], floor112, cached1[0] / floor112);
    }
    kr_model_free(m);
    kb_series_free(&s);
    return diff ? 1 : 0;
}
