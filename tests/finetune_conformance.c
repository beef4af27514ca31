/* finetune_conformance.c — kronos-finetune-conformance MODEL_DIR FIXTURE_DIR: upstream's
 * training step (FIXTURE_DIR/golden.json and its safetensors, made by
 * peers/finetune_step.py golden) reproduced by core/train: the batch from the CSV beside
 * MODEL_DIR (normalised windows, stamps, the tokenizer's tokens: exactly), the losses (1e-5
 * relative), every gradient tensor (largest difference within 1e-4 of its largest element), the
 * weights after three clipped AdamW steps (1e-4 absolute) for each conditioning of the s2 head, and
 * OneCycleLR's rates (1e-6 relative). Prints the worst difference per tensor; exits 1 when anything
 * is outside. */
#include "kronos.h"
#include "kronos_train.h"
#include "safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *fixture;
    json_t *golden;
    int B, W; /* windows, tokens per window (lookback + predict + 1) */
    int32_t *s1, *s2;
    kr_stamp *stamps;
    int failures;
} ctx;

static void verdict(ctx *c, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(ctx *c, bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) c->failures++;
}

static double rel(double a, double b) {
    return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
}

static int load_batch(ctx *c) {
    json_t *s1 = json_object_get(c->golden, "s1"), *s2 = json_object_get(c->golden, "s2");
    json_t *st = json_object_get(c->golden, "stamps");
    c->B = (int)json_array_size(s1);
    c->W = c->B ? (int)json_array_size(json_array_get(s1, 0)) : 0;
    if (c->B < 1 || c->W < 2 || json_array_size(s2) != (size_t)c->B ||
        json_array_size(st) != (size_t)c->B)
        return fprintf(stderr, "golden.json: s1, s2, stamps must be [B][T] with T >= 2\n"), -1;
    size_t n = (size_t)c->B * c->W;
    c->s1 = malloc(n * sizeof(int32_t));
    c->s2 = malloc(n * sizeof(int32_t));
    c->stamps = malloc(n * sizeof(kr_stamp));
    if (!c->s1 || !c->s2 || !c->stamps) return fprintf(stderr, "out of memory\n"), -1;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->W; t++) {
            size_t i = (size_t)b * c->W + t;
            json_t *f = json_array_get(json_array_get(st, (size_t)b), (size_t)t);
            c->s1[i] = (int32_t)json_integer_value(json_array_get(json_array_get(s1, b), t));
            c->s2[i] = (int32_t)json_integer_value(json_array_get(json_array_get(s2, b), t));
            c->stamps[i] = (kr_stamp){(int)json_number_value(json_array_get(f, 0)),
                                      (int)json_number_value(json_array_get(f, 1)),
                                      (int)json_number_value(json_array_get(f, 2)),
                                      (int)json_number_value(json_array_get(f, 3)),
                                      (int)json_number_value(json_array_get(f, 4))};
        }
    return 0;
}

static int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int yoe = (int)(y - era * 400), doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    return era * 146097 + (int64_t)yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* the fixture's CSV (golden.json's "data", beside MODEL_DIR), or n = 0 when it is not there */
static int read_csv(ctx *c, int64_t **wall, double *cols[KR_D_IN]) {
    const char *name = json_string_value(json_object_get(c->golden, "data"));
    char path[1200], line[512];
    snprintf(path, sizeof path, "%s/../%s", c->model, name ? name : "");
    FILE *f = name ? fopen(path, "r") : NULL;
    int n = 0, cap = 1 << 16;
    if (!f || !fgets(line, sizeof line, f)) goto out;
    *wall = malloc((size_t)cap * sizeof **wall);
    for (int k = 0; k < KR_D_IN; k++)
        cols[k] = malloc((size_t)cap * sizeof(double));
    while (n < cap && fgets(line, sizeof line, f)) {
        int y, mo, d, h, mi, sec;
        double v[KR_D_IN];
        if (sscanf(line, "%d-%d-%d %d:%d:%d,%lf,%lf,%lf,%lf,%lf,%lf", &y, &mo, &d, &h, &mi, &sec,
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 12)
            break;
        (*wall)[n] = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
        for (int k = 0; k < KR_D_IN; k++)
            cols[k][n] = v[k];
        n++;
    }
out:
    if (f) fclose(f);
    return n;
}

/* the batch as kr_train_windows makes it from the CSV: normalised candles, stamps and the
 * frozen tokenizer's tokens, each exactly the fixture's; without the CSV, the tokens of the
 * fixture's normalised candles */
static void check_data(ctx *c) {
    char tok[1100], pred[1100];
    snprintf(tok, sizeof tok, "%s/tokenizer", c->model);
    snprintf(pred, sizeof pred, "%s/predictor", c->model);
    kr_model_paths paths = {.tokenizer_dir = tok, .predictor_dir = pred};
    kr_error err = {0};
    kr_model *m = kr_model_load(&paths, &err);
    if (!m) return verdict(c, false, "tokenizer: %s", err.msg);
    int64_t *wall = NULL;
    double *cols[KR_D_IN] = {0};
    int n = read_csv(c, &wall, cols), B = c->B, W = c->W;
    json_t *norm = json_object_get(c->golden, "normalized");
    float *x = malloc((size_t)B * W * 6 * sizeof(float));
    int32_t *s1 = malloc((size_t)B * W * 4), *s2 = malloc((size_t)B * W * 4);
    kr_stamp *st = malloc((size_t)B * W * sizeof *st);
    int starts[64], lookback = (int)json_integer_value(json_object_get(c->golden, "lookback"));
    for (int b = 0; b < B && b < 64; b++)
        starts[b] = (int)json_integer_value(
            json_array_get(json_object_get(c->golden, "window_starts"), (size_t)b));
    int wrong_x = 0, wrong_tok = 0, wrong_st = 0;
    if (n > 0 && x && s1 && s2 && st && B <= 64) {
        kr_candles s = {n, wall, {cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]}};
        if (kr_train_windows(m, &s, starts, B, lookback, W - 1 - lookback, x, s1, s2, st, &err))
            verdict(c, false, "windows: %s", err.msg);
        for (int i = 0; i < B * W; i++) {
            const kr_stamp *a = &st[i], *r = &c->stamps[i];
            wrong_st += a->minute != r->minute || a->hour != r->hour || a->weekday != r->weekday ||
                        a->day != r->day || a->month != r->month;
            for (int k = 0; k < 6; k++)
                wrong_x +=
                    x[i * 6 + k] != (float)json_number_value(json_array_get(
                                        json_array_get(json_array_get(norm, i / W), i % W), k));
        }
    } else
        for (int b = 0; x && s1 && s2 && b < B; b++) {
            for (int t = 0; t < W; t++)
                for (int k = 0; k < 6; k++)
                    x[t * 6 + k] = (float)json_number_value(
                        json_array_get(json_array_get(json_array_get(norm, b), t), k));
            if (kr_tokenizer_encode(m, x, W, s1 + b * W, s2 + b * W, &err)) wrong_tok = -1;
        }
    for (int i = 0; x && s1 && s2 && wrong_tok >= 0 && i < B * W; i++)
        wrong_tok += s1[i] != c->s1[i] || s2[i] != c->s2[i];
    if (n > 0)
        verdict(c, wrong_x == 0 && wrong_st == 0,
                "data: %d windows from the CSV, %d normalised values and %d stamps differ", B,
                wrong_x, wrong_st);
    verdict(c, x && s1 && s2 && wrong_tok == 0,
            "tokens: the tokenizer's encode of the %d windows%s, "
            "%d pairs differ",
            B, n > 0 ? " from the CSV" : "", wrong_tok);
    free(x);
    free(s1);
    free(s2);
    free(st);
    free(wall);
    for (int k = 0; k < KR_D_IN; k++)
        free(cols[k]);
    kr_model_free(m);
}

static kr_train_model *load_model(ctx *c) {
    char pred[1100];
    snprintf(pred, sizeof pred, "%s/predictor", c->model);
    kr_error err = {0};
    kr_train_model *m = kr_train_load(pred, &err);
    if (!m) verdict(c, false, "load %s: %s", pred, err.msg);
    return m;
}

/* mine[i] against the file's tensors: each tensor's worst |difference|, judged relative to
 * its largest element (grads) or absolute (weights) */
static void compare_file(ctx *c, kr_train_model *m, const char *file, bool grads,
                         const char *label) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", c->fixture, file);
    st_file f;
    kr_error err = {0};
    if (st_open(&f, path, &err)) return verdict(c, false, "%s: %s", label, err.msg);
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        if (t->dtype == ST_OTHER) continue; /* an integer buffer: nothing trains it */
        int k = kr_train_tensor_find(m, t->name);
        size_t n = 0;
        const float *mine = NULL;
        if (k >= 0)
            mine = grads ? kr_train_tensor_gradient(m, k) : kr_train_tensor_weights(m, k, &n);
        if (k >= 0 && grads) kr_train_tensor_weights(m, k, &n);
        float *ref = malloc((t->numel ? t->numel : 1) * sizeof(float));
        if (!mine || n != t->numel || !ref || st_read_f32(&f, t, ref, &err)) {
            verdict(c, false, "%s %s: %s", label, t->name,
                    !mine ? "missing here" : "a different size");
            free(ref);
            continue;
        }
        double worst = 0, big = 0;
        for (size_t e = 0; e < n; e++) {
            double dif = fabs((double)mine[e] - ref[e]);
            if (dif > worst) worst = dif;
            if (fabs(ref[e]) > big) big = fabs(ref[e]);
        }
        if (grads)
            verdict(c, worst <= 1e-4 * big, "%s %-45s max diff %.3e (%.2e of its largest %.3e)",
                    label, t->name, worst, big > 0 ? worst / big : 0.0, big);
        else
            verdict(c, worst <= 1e-4, "%s %-45s max abs diff %.3e", label, t->name, worst);
        free(ref);
    }
    if (grads) /* nothing trains here that has no gradient upstream */
        for (int k = 0; k < kr_train_tensor_count(m); k++)
            if (kr_train_tensor_gradient(m, k) && !st_find(&f, kr_train_tensor_name(m, k)))
                verdict(c, false, "%s %s: a gradient here, none upstream", label,
                        kr_train_tensor_name(m, k));
    st_close(&f);
}

static int32_t *siblings(ctx *c, json_t *cs) {
    json_t *sib = json_object_get(cs, "sibling_s1");
    if (!json_is_array(sib)) return NULL;
    int T = c->W - 1;
    int32_t *s = malloc((size_t)c->B * T * sizeof(int32_t));
    for (int b = 0; s && b < c->B; b++)
        for (int t = 0; t < T; t++)
            s[b * T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(sib, b), t));
    return s;
}

static void check_losses(ctx *c, const char *label, const kr_train_losses *l, json_t *ref) {
    double r0 = json_number_value(json_object_get(ref, "loss"));
    double r1 = json_number_value(json_object_get(ref, "ce_s1"));
    double r2 = json_number_value(json_object_get(ref, "ce_s2"));
    double worst = fmax(rel(l->loss, r0), fmax(rel(l->ce_s1, r1), rel(l->ce_s2, r2)));
    verdict(c, worst <= 1e-5,
            "%s loss %.7f ce_s1 %.7f ce_s2 %.7f (upstream %.7f %.7f %.7f), "
            "max rel diff %.2e",
            label, l->loss, l->ce_s1, l->ce_s2, r0, r1, r2, worst);
}

static void check_case(ctx *c, json_t *cs) {
    const char *mode = json_string_value(json_object_get(cs, "mode"));
    if (!mode) return verdict(c, false, "a case without a mode");
    kr_train_batch b = {c->B,  c->W - 1,  c->s1,
                        c->s2, c->stamps, strcmp(mode, "teacher") ? KR_S2_SAMPLED : KR_S2_TEACHER,
                        NULL,  1};
    int32_t *sib = siblings(c, cs);
    b.sibling = sib;
    kr_train_model *m = load_model(c);
    kr_error err = {0};
    kr_train_losses l;
    char label[64];
    if (!m) goto out;
    if (kr_train_gradients(m, &b, &l, &err)) {
        verdict(c, false, "%s: %s", mode, err.msg);
        goto out;
    }
    snprintf(label, sizeof label, "%s:", mode);
    check_losses(c, label, &l, cs);
    snprintf(label, sizeof label, "%s grad", mode);
    compare_file(c, m, json_string_value(json_object_get(cs, "grads")), true, label);
    kr_train_free(m);
    if (!(m = load_model(c))) goto out;
    double clip = json_number_value(json_object_get(cs, "clip_grad_norm"));
    json_t *step;
    size_t i;
    json_array_foreach(json_object_get(cs, "steps"), i, step) {
        if (kr_train_gradients(m, &b, &l, &err)) {
            verdict(c, false, "%s step %zu: %s", mode, i, err.msg);
            goto out;
        }
        snprintf(label, sizeof label, "%s step %zu:", mode, i);
        check_losses(c, label, &l, step);
        double norm, ref = json_number_value(json_object_get(step, "grad_norm_before_clip"));
        kr_train_clip(m, clip, &norm);
        verdict(c, rel(norm, ref) <= 1e-4, "%s step %zu: gradient norm %.7f (upstream %.7f)", mode,
                i, norm, ref);
        kr_adamw o = {json_number_value(json_object_get(step, "lr")), 0.9, 0.95, 1e-8, 0.1};
        json_t *opt = json_object_get(c->golden, "optimizer");
        if (opt) {
            o.beta1 = json_number_value(json_array_get(json_object_get(opt, "betas"), 0));
            o.beta2 = json_number_value(json_array_get(json_object_get(opt, "betas"), 1));
            o.eps = json_number_value(json_object_get(opt, "eps"));
            o.weight_decay = json_number_value(json_object_get(opt, "weight_decay"));
        }
        kr_train_adamw(m, &o);
    }
    snprintf(label, sizeof label, "%s after %zu steps", mode,
             json_array_size(json_object_get(cs, "steps")));
    compare_file(c, m, json_string_value(json_object_get(cs, "after_steps")), false, label);
out:
    kr_train_free(m);
    free(sib);
}

static void check_one_cycle(ctx *c) {
    json_t *oc = json_object_get(c->golden, "one_cycle");
    kr_one_cycle s = {json_number_value(json_object_get(oc, "max_lr")),
                      json_number_value(json_object_get(oc, "pct_start")),
                      json_number_value(json_object_get(oc, "div_factor")),
                      json_number_value(json_object_get(oc, "final_div_factor")),
                      (int)json_integer_value(json_object_get(oc, "total_steps"))};
    json_t *lrs = json_object_get(oc, "lr_before_each_step");
    double worst = 0;
    for (size_t i = 0; i < json_array_size(lrs); i++)
        worst = fmax(worst,
                     rel(kr_one_cycle_lr(&s, (int)i), json_number_value(json_array_get(lrs, i))));
    verdict(c, json_array_size(lrs) > 0 && worst <= 1e-6, "one_cycle: %zu rates, max rel diff %.2e",
            json_array_size(lrs), worst);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL_DIR FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    ctx c = {.model = argv[1], .fixture = argv[2]};
    char path[1100];
    snprintf(path, sizeof path, "%s/golden.json", c.fixture);
    json_error_t je;
    c.golden = json_load_file(path, 0, &je);
    if (!c.golden) {
        fprintf(stderr, "%s: %s\n", path, je.text);
        return 2;
    }
    if (load_batch(&c)) return 2;
    check_data(&c);
    json_t *cs;
    size_t i;
    json_array_foreach(json_object_get(c.golden, "cases"), i, cs) check_case(&c, cs);
    if (json_array_size(json_object_get(c.golden, "cases")) == 0) verdict(&c, false, "no cases");
    check_one_cycle(&c);
    printf("%s: %d failure(s)\n", c.failures ? "FAIL" : "PASS", c.failures);
    free(c.s1);
    free(c.s2);
    free(c.stamps);
    json_decref(c.golden);
    return c.failures ? 1 : 0;
}
