/* finetune_out.c — the files and the report of a fine-tuning run (finetune_out.h), shared by
 * kronosd finetune and the daemon's fine-tuning jobs so that both write the same. */
#include "finetune_out.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fail.h"
#include "model_dirs.h"
#include "whole_file.h"

static int copy_file(const char *from, const char *to) {
    size_t len;
    char *b = kd_read_file(from, &len);
    FILE *f = b ? fopen(to, "wb") : NULL;
    int ok = f && fwrite(b, 1, len, f) == len;
    if (f && fclose(f)) ok = 0;
    free(b);
    return ok ? 0 : -1;
}

int kd_ft_prepare_out(const char *base_tokenizer_dir, const char *out, char *pred, size_t n,
                      char *err, size_t errlen) {
    char tok[1200], from[1200], to[1300];
    snprintf(tok, sizeof tok, "%s/tokenizer", out);
    snprintf(pred, n, "%s/predictor", out);
    if ((mkdir(out, 0777) && errno != EEXIST) || (mkdir(tok, 0777) && errno != EEXIST))
        return kd_fail(err, errlen, "%s: %s", out, strerror(errno));
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/%s", base_tokenizer_dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", tok, files[i]);
        if (copy_file(from, to)) return kd_fail(err, errlen, "copying %s to %s failed", from, to);
    }
    return 0;
}

json_t *kd_ft_report(const kd_ft_run *run, const kr_finetune_result *r) {
    const kr_finetune_settings *s = run->s;
    json_t *names = json_array(), *loss = json_array(), *val = json_array();
    for (int i = 0; i < run->n; i++)
        json_array_append_new(names, json_string(run->names[i]));
    for (int i = 0; i < r->steps; i++)
        json_array_append_new(loss, json_real(r->loss[i]));
    for (int i = 0; i < r->n_validation; i++)
        json_array_append_new(
            val, json_pack("{s:i, s:f}", "step", r->validation_step[i], "loss", r->validation[i]));
    json_t *settings = json_pack(
        "{s:s, s:o, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:i, s:i, s:i}",
        "model", run->base, run->names_key, names, "steps", r->steps, "batch", s->batch, "lookback",
        s->lookback, "predict", s->predict, "depth", s->depth, "lr", s->lr, "epochs", s->epochs,
        "s2_condition", s->condition == KR_S2_SAMPLED ? "sampled" : "teacher", "seed",
        (json_int_t)s->seed, "validation_share", s->validation_share, "weight_decay",
        s->weight_decay, "clip", s->clip, "pct_start", s->pct_start, "beta1", s->beta1, "beta2",
        s->beta2, "eval_every", s->eval_every, "patience", s->patience, "gate_samples",
        run->gate_samples);
    return json_pack("{s:o, s:o, s:o, s:i, s:o, s:I, s:I, s:b}", "settings", settings, "loss", loss,
                     "validation", val, "best_step", r->best_step, "best_validation",
                     r->n_validation ? json_real(r->best_validation) : json_null(), "train_windows",
                     (json_int_t)r->train_windows, "validation_windows",
                     (json_int_t)r->validation_windows, "stopped_early", r->stopped_early);
}

/* one evaluation's overall CRPS and direction accuracy into obj */
static int scores(const kr_model *m, const kr_evaluate_request *req, json_t *obj, double *crps,
                  double *dir, kr_error *err) {
    kr_evaluation ev;
    if (kr_evaluate(m, NULL, req, &ev, err)) return -1;
    int H = req->horizon + 1;
    *crps = ev.scores[(KR_EVAL_MODEL * KR_EVAL_METRICS + KR_EVAL_CRPS) * H + req->horizon];
    *dir = ev.scores[(KR_EVAL_MODEL * KR_EVAL_METRICS + KR_EVAL_DIRECTION) * H + req->horizon];
    json_object_set_new(obj, "origins", json_integer(ev.origins));
    kr_evaluation_free(&ev);
    return 0;
}

/* origins from the first validation row, about 50 of them, by /evaluate's engine */
int kd_ft_gate(const kd_ft_run *run, const kr_model *base, const kr_model *tuned, json_t *rep,
               char *err, size_t errlen) {
    const kr_finetune_settings *s = run->s;
    json_t *list = json_array();
    double sum[2][2] = {{0}};
    for (int i = 0; list && i < run->n; i++) {
        int n = run->series[i].n, H = s->predict, first = n - (int)floor(n * s->validation_share);
        if (first < s->lookback) first = s->lookback;
        if (first + H > n) continue; /* no origin with its actuals */
        kr_evaluate_request req;
        kr_evaluate_request_init(&req);
        req.candles = run->series[i], req.lookback = s->lookback, req.horizon = H;
        req.first_origin = first, req.samples = run->gate_samples, req.seed = s->seed;
        req.stride = (n - H - first) / 50 > H ? (n - H - first) / 50 : H;
        json_t *row = json_pack("{s:s, s:i, s:i}", run->names_key, run->names[i], "first_origin",
                                first, "stride", req.stride);
        const kr_model *ms[2] = {base, tuned};
        const char *sides[2] = {"base", "tuned"};
        for (int j = 0; row && j < 2; j++) {
            json_t *sc = json_object();
            double crps, dir;
            kr_error e = {0};
            if (!sc || scores(ms[j], &req, sc, &crps, &dir, &e)) {
                json_decref(sc), json_decref(row), json_decref(list);
                return kd_fail(err, errlen, "the gate on %s: %s", run->names[i],
                               sc ? e.msg : "out of memory");
            }
            json_object_set_new(sc, "crps", json_real(crps));
            json_object_set_new(sc, "direction_accuracy", json_real(dir));
            json_object_set_new(row, sides[j], sc);
            sum[j][0] += crps, sum[j][1] += dir;
        }
        if (!row || json_array_append_new(list, row)) list = (json_decref(list), NULL);
    }
    bool crps_better = json_array_size(list) && sum[1][0] < sum[0][0];
    bool dir_better = json_array_size(list) && sum[1][1] > sum[0][1];
    json_t *g = list ? json_pack("{s:o, s:b, s:b}", "series", list, "tuned_better_crps",
                                 crps_better, "tuned_better_direction", dir_better)
                     : NULL;
    if (!g || json_object_set_new(rep, "gate", g)) return kd_fail(err, errlen, "out of memory");
    return 0;
}

int kd_ft_train(const kd_ft_run *run, const kd_ft_place *p, kr_finetune_result *r, json_t **rep,
                char *err, size_t errlen) {
    char pred[1200], path[1300];
    kr_error ke = {0};
    kr_model *base = NULL, *tuned = NULL;
    kr_train_model *m = NULL;
    int rc = -1;
    *rep = NULL;
    if (kd_ft_prepare_out(p->tokenizer_dir, p->out, pred, sizeof pred, err, errlen)) goto out;
    if (!(base = kd_model_open(NULL, p->tokenizer_dir, p->predictor_dir, 512, KR_PREC_F32,
                               KR_PREC_F32, &ke)) ||
        !(m = kr_train_load(p->predictor_dir, &ke)) ||
        kr_finetune(base, m, run->series, run->n, run->s, pred, p->heard, p->ctx, r, &ke)) {
        rc = ke.code == KR_E_CANCELLED ? -2 : -1;
        kd_fail(err, errlen, "%s", ke.msg);
        goto out;
    }
    if (!(*rep = kd_ft_report(run, r)) || (p->members && json_object_update(*rep, p->members))) {
        kd_fail(err, errlen, "out of memory");
        goto out;
    }
    if (run->gate_samples > 0 && run->s->predict > 0) {
        if (!(tuned = kd_model_open(p->out, NULL, NULL, 512, KR_PREC_F32, KR_PREC_F32, &ke))) {
            kd_fail(err, errlen, "the tuned model: %s", ke.msg);
            goto out;
        }
        if (kd_ft_gate(run, base, tuned, *rep, err, errlen)) goto out;
    }
    snprintf(path, sizeof path, "%s/finetune.json", p->out);
    if (json_dump_file(*rep, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9))) {
        kd_fail(err, errlen, "cannot write %s", path);
        goto out;
    }
    rc = 0;
out:
    kr_train_free(m);
    kr_model_free(base);
    kr_model_free(tuned);
    return rc;
}
