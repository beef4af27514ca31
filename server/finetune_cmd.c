/* finetune_cmd.c — kronosd finetune: fine-tunes a model's predictor on CSV series
 * (core/train's kr_finetune) and writes DIR/tokenizer/ (the base's, unchanged),
 * DIR/predictor/ (the best checkpoint by validation loss, in the released layout) and
 * DIR/finetune.json (the settings, the training loss per step, the validation losses, the
 * best step, and the gate: base and tuned model evaluated walk-forward on the held-out part,
 * side by side), with a progress bar on a terminal. */
#include "finetune_cmd.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candles_csv.h"
#include "candles_json.h"
#include "finetune_out.h"
#include "kronos_train.h"
#include "model_dirs.h"
#include "whole_file.h"

#define MAX_CSV 64

static const char usage[] =
    "usage: kronosd finetune --model BASE --csv DATA.csv [--csv ...] --out DIR\n"
    "  (a --csv file may also hold JSON candles: columns, rows, or {\"candles\": ...})\n"
    "         [--steps N | --epochs N] [--batch N] [--lookback N] [--predict N] [--lr X]\n"
    "         [--depth N] [--s2-condition teacher|sampled] [--seed N] [--validation-share X]\n"
    "         [--eval-every N] [--patience N] [--gate-samples N]\n"
    "  Writes DIR/tokenizer/ (BASE's), DIR/predictor/ (the best checkpoint by validation\n"
    "  loss on the last validation-share of every series, never trained on) and\n"
    "  DIR/finetune.json, with the gate: base and tuned model evaluated walk-forward (as\n"
    "  POST /evaluate, gate-samples paths, 0: no gate) on each validation part, side by\n"
    "  side. Defaults: upstream's finetune/config.py (lookback 90, predict 10,\n"
    "  AdamW 0.9/0.95, weight decay 0.1, clip 3.0, OneCycleLR pct_start 0.03), lr 1e-5,\n"
    "  batch 16, one epoch, validation-share 0.2, depth 0 (every parameter trains).\n";

typedef struct {
    const char *model, *out, *csv[MAX_CSV];
    int n_csv;
    kr_finetune_settings s;
    int gate_samples; /* 0: no gate */
} opts;

static int bad(const char *what, const char *v) {
    fprintf(stderr, "kronosd: finetune: %s: '%s' is not valid\n%s", what, v, usage);
    return -1;
}

static int num(const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) return -1;
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, opts *o) {
    kr_finetune_defaults(&o->s);
    o->gate_samples = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(usage, stdout), 1;
        if (!v) return bad(a, "(missing)");
        i++;
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--out"))
            o->out = v;
        else if (!strcmp(a, "--csv")) {
            if (o->n_csv == MAX_CSV) return bad(a, "(too many)");
            o->csv[o->n_csv++] = v;
        } else if (!strcmp(a, "--s2-condition")) {
            if (strcmp(v, "teacher") && strcmp(v, "sampled")) return bad(a, v);
            o->s.condition = strcmp(v, "teacher") ? KR_S2_SAMPLED : KR_S2_TEACHER;
        } else if (!strcmp(a, "--lr")) {
            if (num(v, -INFINITY, INFINITY, &o->s.lr)) return bad(a, v);
        } else if (!strcmp(a, "--validation-share")) {
            if (num(v, -INFINITY, INFINITY, &o->s.validation_share)) return bad(a, v);
        } else if (!strcmp(a, "--seed")) {
            if (num(v, 0, 9007199254740992.0, &x) || x != floor(x)) return bad(a, v);
            o->s.seed = (uint64_t)x;
        } else {
            static const char *ints[] = {"--steps",      "--epochs",   "--batch",
                                         "--lookback",   "--predict",  "--depth",
                                         "--eval-every", "--patience", "--gate-samples"};
            int *dst[] = {&o->s.steps,      &o->s.epochs,   &o->s.batch,
                          &o->s.lookback,   &o->s.predict,  &o->s.depth,
                          &o->s.eval_every, &o->s.patience, &o->gate_samples};
            size_t k = 0;
            while (k < sizeof ints / sizeof *ints && strcmp(a, ints[k]))
                k++;
            if (k == sizeof ints / sizeof *ints) return bad("unknown option", a);
            if (num(v, -(1 << 30), 1 << 30, &x) || x != floor(x)) return bad(a, v);
            *dst[k] = (int)x;
            if (!strcmp(a, "--steps")) o->s.epochs = 0;
        }
    }
    if (!o->model || !o->out || !o->n_csv) {
        fprintf(stderr, "kronosd: finetune: --model, --csv and --out are required\n%s", usage);
        return -1;
    }
    kr_error err = {0};
    if (kr_finetune_check(&o->s, NULL, &err) ||
        kr_finetune_gate_check(o->gate_samples, &err)) /* the rules the daemon's jobs meet too */
        return fprintf(stderr, "kronosd: finetune: %s\n", err.msg), -1;
    return 0;
}

/* the progress bar on a terminal, a line per validation otherwise */
static int progress(void *ctx, const kr_finetune_progress *p) {
    (void)ctx;
    bool tty = isatty(STDERR_FILENO);
    double left = p->step ? p->seconds / p->step * (p->steps - p->step) : 0;
    if (!tty && !p->evaluated) return 0;
    char bar[31];
    int full = p->steps ? 30 * p->step / p->steps : 30;
    for (int i = 0; i < 30; i++)
        bar[i] = i < full ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "%s[%s] step %d/%d", tty ? "\r" : "", bar, p->step, p->steps);
    if (p->step) fprintf(stderr, "  loss %.4f", p->loss);
    if (p->evaluated) fprintf(stderr, "  validation %.4f%s", p->validation, p->best ? " *" : "");
    fprintf(stderr, "  %.0f tokens/s  %dm%02ds left%s", p->tokens_per_s, (int)left / 60,
            (int)left % 60, tty ? "\033[K" : "\n");
    if (tty && p->step == p->steps) fputc('\n', stderr);
    return 0;
}

/* the gate's table and verdict on stdout */
static void print_gate(const json_t *gate) {
    json_t *g = json_object_get(gate, "series");
    for (size_t i = 0; i < json_array_size(g); i++) {
        json_t *row = json_array_get(g, i), *b = json_object_get(row, "base"),
               *t = json_object_get(row, "tuned");
        printf("gate %s (%d origins from row %d): CRPS base %.6g tuned %.6g, direction "
               "base %.3f tuned %.3f\n",
               json_string_value(json_object_get(row, "csv")),
               (int)json_integer_value(json_object_get(b, "origins")),
               (int)json_integer_value(json_object_get(row, "first_origin")),
               json_real_value(json_object_get(b, "crps")),
               json_real_value(json_object_get(t, "crps")),
               json_real_value(json_object_get(b, "direction_accuracy")),
               json_real_value(json_object_get(t, "direction_accuracy")));
    }
    if (gate)
        printf("the tuned model %s the base on CRPS and %s it on direction: judge before "
               "serving it\n",
               json_is_true(json_object_get(gate, "tuned_better_crps")) ? "beats" : "does not beat",
               json_is_true(json_object_get(gate, "tuned_better_direction")) ? "beats"
                                                                             : "does not beat");
}

static int read_series(const opts *o, kd_owned_candles *c, kr_candles *k) {
    for (int i = 0; i < o->n_csv; i++) {
        size_t len;
        char *text = kd_read_file(o->csv[i], &len), err[512];
        if (!text)
            return fprintf(stderr, "kronosd: finetune: %s: %s\n", o->csv[i], strerror(errno)), -1;
        const char *t = text + strspn(text, " \t\r\n");
        int rc;
        if (*t == '{' || *t == '[') { /* the JSON candle forms, or {"candles": ...} */
            json_error_t je;
            json_t *v = json_loadb(text, len, 0, &je), *inner = json_object_get(v, "candles");
            if (!v) snprintf(err, sizeof err, "not JSON: %s (line %d)", je.text, je.line);
            rc = v ? kd_candles_parse(inner ? inner : v, 2, 0, &c[i], err, sizeof err) : -1;
            json_decref(v);
        } else {
            rc = kd_candles_csv_parse(text, len, 2, 0, &c[i], err, sizeof err);
        }
        free(text);
        if (rc) return fprintf(stderr, "kronosd: finetune: %s: %s\n", o->csv[i], err), -1;
        kd_candles_link(&c[i], &k[i]);
    }
    return 0;
}

int kd_finetune_cmd(int argc, char **argv) {
    opts o = {0};
    int p = parse(argc, argv, &o);
    if (p) return p > 0 ? 0 : 2;
    kd_owned_candles c[MAX_CSV] = {0};
    kr_candles k[MAX_CSV];
    kr_finetune_result r = {0};
    json_t *rep = NULL;
    char tok[1200], pred[1200], msg[1024];
    const kd_ft_run run = {o.model, "csv", o.csv, k, o.n_csv, &o.s, o.gate_samples};
    const kd_ft_place place = {tok, pred, o.out, NULL, progress, NULL};
    int rc = 1;
    snprintf(tok, sizeof tok, "%s/tokenizer", o.model);
    snprintf(pred, sizeof pred, "%s/predictor", o.model);
    if (read_series(&o, c, k)) goto out;
    if (kd_ft_train(&run, &place, &r, &rep, msg, sizeof msg)) {
        fprintf(stderr, "kronosd: finetune: %s\n", msg);
        goto out;
    }
    printf("%s: best step %d of %d, validation loss %.4f (before: %.4f)\n", o.out, r.best_step,
           r.steps, r.n_validation ? r.best_validation : NAN,
           r.n_validation ? r.validation[0] : NAN);
    print_gate(json_object_get(rep, "gate"));
    rc = 0;
out:
    json_decref(rep);
    kr_finetune_result_free(&r);
    for (int i = 0; i < o.n_csv; i++)
        kd_candles_free(&c[i]);
    return rc;
}
