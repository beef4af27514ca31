/* agreement_eval.c — kronos-bench --agreement's /evaluate half: a reduced-precision mode
 * judged by how far it moves a walk-forward evaluation's scores from float32's, against the
 * sampling noise a user already lives with.
 *
 * Each model (float32, then each mode) runs kr_evaluate over the same series and origins
 * (lookback 256, horizon 8, stride 8) with seeds 1 .. S. Per score (CRPS, MAE, each band's
 * coverage, every origin and step together): float32's seed-to-seed change is the root mean
 * square of score(f32, s + 1) - score(f32, s) over the S - 1 seed pairs; a mode's change the
 * root mean square of score(mode, s) - score(f32, s) over the S seeds. One seed pair is a thin
 * yardstick: a mode soon samples other tokens than float32 with the same seed, so its change
 * is judged against the typical seed-to-seed change, not one draw of it.
 */
#include "agreement.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LOOKBACK = 256, HORIZON = 8, STRIDE = 8, N_SCORES = 4 };

/* the levels scored: two symmetric bands, outermost first as kr_evaluation's pairs */
static const double levels[] = {0.05, 0.1, 0.5, 0.9, 0.95};
static const char *const score_names[N_SCORES] = {"CRPS", "MAE", "coverage 0.05-0.95",
                                                  "coverage 0.1-0.9"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* m's overall scores (every origin and step) with seed into out[N_SCORES]; *origins: how many */
static int evaluate_seed(const kr_model *m, const kr_candles *cd, const kb_eval_opts *o,
                         uint64_t seed, double out[N_SCORES], int *origins, kr_error *err) {
    kr_evaluate_request req;
    kr_evaluate_request_init(&req);
    req.candles = *cd;
    req.lookback = LOOKBACK;
    req.horizon = HORIZON;
    req.stride = STRIDE;
    req.samples = o->samples;
    req.seed = seed;
    req.n_quantiles = (int)(sizeof levels / sizeof *levels);
    memcpy(req.quantiles, levels, sizeof levels);
    const int all = (cd->n - HORIZON - LOOKBACK) / STRIDE + 1;
    if (o->origins > 0 && o->origins < all) req.last_origin = LOOKBACK + (o->origins - 1) * STRIDE;
    kr_evaluation ev;
    if (kr_evaluate(m, NULL, &req, &ev, err)) return -1;
    const int H = ev.horizon;
    out[0] = ev.scores[((size_t)KR_EVAL_MODEL * KR_EVAL_METRICS + KR_EVAL_CRPS) * (H + 1) + H];
    out[1] = ev.scores[((size_t)KR_EVAL_MODEL * KR_EVAL_METRICS + KR_EVAL_MAE) * (H + 1) + H];
    for (int p = 0; p < 2; p++) /* pair 0: 0.05-0.95, pair 1: 0.1-0.9 */
        out[2 + p] = ev.coverage[((size_t)KR_EVAL_MODEL * ev.n_pairs + p) * (H + 1) + H];
    *origins = ev.origins;
    kr_evaluation_free(&ev);
    return 0;
}

/* Every seed's scores of the model in mode md (NULL: float32) into sc[seed][N_SCORES] */
static int evaluate_model(const char *dir, const kb_mode *md, const kr_candles *cd,
                          const kb_eval_opts *o, double *sc, int *origins, FILE *dump,
                          kr_error *err) {
    kr_model *m = kb_mode_load(dir, md, err);
    if (!m) return -1;
    const char *file = md ? md->file : "f32";
    int rc = 0;
    for (int s = 0; rc == 0 && s < o->seeds; s++) {
        const double t0 = now_s();
        rc = evaluate_seed(m, cd, o, (uint64_t)s + 1, sc + (size_t)s * N_SCORES, origins, err);
        if (rc) break;
        fprintf(stderr, "kronos-bench --agreement: %s, seed %d: %.0f s\n", file, s + 1,
                now_s() - t0);
        for (int k = 0; dump && k < N_SCORES; k++)
            fprintf(dump, "%s\t%d\t%s\t%.17g\n", file, s + 1, score_names[k],
                    sc[(size_t)s * N_SCORES + k]);
        if (dump) fflush(dump);
    }
    kr_model_free(m);
    return rc;
}

/* A mode's rows: per score, float32's mean and seed-to-seed change, the mode's change */
static void rows(const char *name, const double *ref, const double *sc, int seeds) {
    for (int k = 0; k < N_SCORES; k++) {
        double mean = 0, noise = 0, change = 0;
        for (int s = 0; s < seeds; s++) {
            const double r = ref[(size_t)s * N_SCORES + k], d = sc[(size_t)s * N_SCORES + k] - r;
            mean += r;
            change += d * d;
            if (s + 1 < seeds) {
                const double e = ref[(size_t)(s + 1) * N_SCORES + k] - r;
                noise += e * e;
            }
        }
        mean /= seeds;
        noise = sqrt(noise / (seeds - 1));
        change = sqrt(change / seeds);
        /* no change at all (a score no path moves, as a coverage of 0) is no ratio */
        const char *verdict = change < noise ? "within" : change == 0 ? "no change" : "missed";
        if (noise > 0)
            printf("| %s | %s | %.5g | %.3e | %.3e | %.3f | %s |\n", name, score_names[k], mean,
                   noise, change, change / noise, verdict);
        else
            printf("| %s | %s | %.5g | %.3e | %.3e | - | %s |\n", name, score_names[k], mean, noise,
                   change, verdict);
    }
    fflush(stdout);
}

/* Whether the comma-separated list holds name (NULL: every name) */
static bool listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0')) return true;
    return !list;
}

/* Each name of o->modes is a mode's */
static int modes_known(const kb_eval_opts *o) {
    for (const char *p = o->modes; p; p = strchr(p, ','), p = p ? p + 1 : NULL) {
        const size_t n = strcspn(p, ",");
        int k = 0;
        while (k < kb_n_modes && (strlen(kb_modes[k].file) != n || strncmp(p, kb_modes[k].file, n)))
            k++;
        if (k == kb_n_modes) {
            fprintf(stderr,
                    "kronos-bench --agreement: --eval-modes: no mode '%.*s'; the modes:", (int)n,
                    p);
            for (k = 0; k < kb_n_modes; k++)
                fprintf(stderr, " %s", kb_modes[k].file);
            fprintf(stderr, "\n");
            return -1;
        }
    }
    return 0;
}

int kb_agreement_eval(const char *model_dir, const int64_t *wall, double *const cols[KR_D_IN],
                      int n, const kb_eval_opts *o, const char *dump) {
    if (o->seeds < 2 || o->samples < 1 || o->origins < 0) {
        fprintf(stderr,
                "kronos-bench --agreement: --eval-seeds %d, --eval-samples %d, "
                "--eval-origins %d: need at least 2 seeds, 1 sample, 0 origins (all)\n",
                o->seeds, o->samples, o->origins);
        return 1;
    }
    if (modes_known(o)) return 1;
    kr_candles cd = {.n = n, .timestamps = wall};
    for (int c = 0; c < KR_D_IN; c++)
        cd.columns[c] = cols[c];
    const size_t per = (size_t)o->seeds * N_SCORES;
    double *ref = malloc(per * sizeof *ref), *sc = malloc(per * sizeof *sc);
    FILE *df = NULL;
    char path[1100];
    kr_error err = {0};
    int rc = 1, origins = 0;
    if (!ref || !sc) {
        fprintf(stderr, "kronos-bench --agreement: out of memory\n");
        goto out;
    }
    if (dump) {
        snprintf(path, sizeof path, "%s/eval_scores.tsv", dump);
        if (!(df = fopen(path, "w"))) {
            perror(path);
            goto out;
        }
        fprintf(df, "mode\tseed\tscore\tvalue\n");
    }
    if (evaluate_model(model_dir, NULL, &cd, o, ref, &origins, df, &err)) goto fail;
    printf("\n/evaluate against float32: lookback %d, horizon %d, stride %d, %d samples, "
           "%d origins, seeds 1 to %d; scores over every origin and step. Float32's seed to "
           "seed: the RMS of score(f32, s + 1) - score(f32, s) over %d seed pairs; a mode's "
           "change: the RMS of score(mode, s) - score(f32, s) over %d seeds; ratio: change / "
           "seed to seed\n\n",
           LOOKBACK, HORIZON, STRIDE, o->samples, origins, o->seeds, o->seeds - 1, o->seeds);
    printf("| mode | score | float32 (mean of seeds) | float32 seed to seed | mode's change | "
           "ratio | |\n|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    for (int k = 0; k < kb_n_modes; k++) {
        if (!listed(o->modes, kb_modes[k].file)) continue;
        if (evaluate_model(model_dir, &kb_modes[k], &cd, o, sc, &origins, df, &err)) goto fail;
        rows(kb_modes[k].name, ref, sc, o->seeds);
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "kronos-bench --agreement: evaluate: %s\n", err.msg);
out:
    if (df && fclose(df) != 0) {
        perror(path);
        rc = 1;
    }
    free(ref);
    free(sc);
    return rc;
}
