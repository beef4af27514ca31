/* tokens.c — /tokenize and /detokenize (handlers.h): the request checked on the HTTP thread,
 * the tokenizer's work on a worker through the submit path. */
#include "handlers.h"

#include <math.h>
#include <stdlib.h>

#include "intake.h"
#include "json_fields.h"
#include "submit.h"
#include "tokens_json.h"

/* One token request: candles to tokenize (with pinned statistics, if any), or tokens to
 * turn back into candles; what the other does not use stays empty. */
typedef struct {
    kd_work work; /* first: the submit path's pointer is this struct's */
    kd_owned_candles candles;
    kr_norm norm; /* pinned statistics, if any */
    kd_detokenize_input tokens;
    const kd_model *md; /* the model it runs on */
} tokens_job;

static void discard(kd_work *w) {
    tokens_job *t = (tokens_job *)w;
    kd_candles_free(&t->candles);
    kd_detokenize_input_free(&t->tokens);
    free(t);
}

/* The reply of a finished job: 200 with body, or the error; frees the job first. */
static void reply(kd_work *w, const char *what, int rc, json_t *body, const kr_error *err) {
    kd_app *app = w->app;
    kd_request *r = w->r;
    discard(w);
    if (rc == 0)
        kd_reply_json(r, 200, body);
    else
        kd_work_fail(app, r, what, err);
}

/* ---- /tokenize ------------------------------------------------------------------------------ */

static void tokenize_run(kd_work *w) {
    tokens_job *t = (tokens_job *)w;
    const int n = t->candles.n;
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    float mean[KR_D_IN], std[KR_D_IN];
    kr_error err = {0};
    kr_candles candles;
    kd_candles_link(&t->candles, &candles);
    int rc = -1;
    if (!s1 || !s2)
        kr_fail(&err, "out of memory for %d tokens", n);
    else
        rc = kr_tokenize_candles(t->md->m, &candles, &t->norm, s1, s2, mean, std, &err);
    for (int c = 0; rc == 0 && c < KR_D_IN; c++)
        if (!isfinite(mean[c]) || !isfinite(std[c]))
            rc = kr_fail(&err, "candles.%s: its mean or spread overflows float32; scale it down",
                         kr_column_names[c]);
    json_t *body = rc == 0 ? kd_tokenize_response_json(s1, s2, n, mean, std) : NULL;
    free(s1);
    free(s2);
    reply(w, "tokenize", rc, body, &err);
}

static const kd_work_ops tokenize_ops = {.run = tokenize_run, .discard = discard};

static const char *const tokenize_fields[] = {"candles", "normalization", "model", NULL};

/* The candles and statistics of a JSON body; -1 with a message. */
static int parse_tokenize(kd_app *app, const json_t *body, tokens_job *t, char *msg,
                          size_t msglen) {
    return kd_check_fields(body, "", tokenize_fields, msg, msglen) < 0 ||
                   kd_candles_parse(json_object_get(body, "candles"), 1, app->cfg.max_candles,
                                    &t->candles, msg, msglen) < 0 ||
                   kd_normalization_parse(kd_field(body, "normalization"), &t->norm, msg, msglen) <
                       0
               ? -1
               : 0;
}

kd_outcome kd_handle_tokenize(kd_app *app, kd_request *r) {
    char msg[KD_MSG_MAX];
    kd_query q = {0};
    if (!kd_read_query(app, r, &q, msg, sizeof msg)) return KD_REPLIED;
    json_decref(q.opts);
    tokens_job *t = kd_work_new(sizeof *t, &tokenize_ops, app, r, 0);
    if (!t) return KD_REPLIED;
    t->norm = (kr_norm){0};
    json_t *body = q.csv_in ? NULL : kd_model_request_json(app, r);
    const bool read = q.csv_in || body; /* else replied */
    t->md = read ? kd_pick_model(app, r) : NULL;
    int bad = -1;
    if (t->md && q.csv_in)
        bad = kd_body_csv_candles(r, 1, app->cfg.max_candles, &t->candles, msg, sizeof msg);
    else if (t->md)
        bad = parse_tokenize(app, body, t, msg, sizeof msg);
    if (bad && t->md) kd_refuse_invalid(app, r, msg); /* else replied (404 or the body's) */
    json_decref(body);
    if (bad) {
        discard(&t->work);
        return KD_REPLIED;
    }
    return kd_submit(&t->work, KD_ON_WORKER);
}

/* ---- /detokenize ---------------------------------------------------------------------------- */

static void detokenize_run(kd_work *w) {
    tokens_job *t = (tokens_job *)w;
    const int n = t->tokens.n;
    double *out = malloc((size_t)n * KR_D_IN * sizeof *out);
    kr_error err = {0};
    int rc = -1;
    if (!out)
        kr_fail(&err, "out of memory for %d candles", n);
    else
        rc = kr_detokenize(t->md->m, t->tokens.s1, t->tokens.s2, n, t->tokens.mean, t->tokens.std,
                           out, &err);
    json_t *body = rc == 0 ? kd_detokenize_response_json(out, n) : NULL;
    free(out);
    reply(w, "detokenize", rc, body, &err);
}

static const kd_work_ops detokenize_ops = {.run = detokenize_run, .discard = discard};

kd_outcome kd_handle_detokenize(kd_app *app, kd_request *r) {
    char msg[KD_MSG_MAX];
    tokens_job *t = kd_work_new(sizeof *t, &detokenize_ops, app, r, 0);
    kd_token_limits lim;
    json_t *body = t ? kd_token_request_json(app, r, &t->md, &lim) : NULL;
    const int bad =
        !body || kd_detokenize_request_parse(body, &lim, &t->tokens, msg, sizeof msg) < 0;
    if (bad && body) kd_refuse_invalid(app, r, msg); /* else replied */
    json_decref(body);
    if (bad && t) discard(&t->work);
    return bad ? KD_REPLIED : kd_submit(&t->work, KD_ON_WORKER);
}
