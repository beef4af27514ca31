/* generate.c — /generate (handlers.h): the request checked on the HTTP thread, its
 * session acquired (busy until the reply), then a generate job on the submit path. */
#include "handlers.h"

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "intake.h"
#include "log.h"
#include "replies.h"
#include "submit.h"
#include "tokens_json.h"

/* One /generate request: its cache (the session's or a temporary one), buffers for the new
 * tokens, and how the core call ended. */
typedef struct {
    kd_work work; /* first: the submit path's pointer is this struct's */
    kd_generate_input in;
    kd_session *session; /* NULL: a temporary cache */
    const kd_model *md;  /* the model: the session's, or the request's */
    kr_generate_request req;
    kr_cache *c, *tmp;
    int32_t *s1, *s2;
    int length0; /* the session's cache length before */
    double t0;
} generate_job;

static void job_free(generate_job *g) {
    if (g->session) kd_sessions_release(g->work.app->sessions, g->session);
    kr_cache_free(g->tmp);
    free(g->s1);
    free(g->s2);
    kd_generate_input_free(&g->in);
    free(g);
}

static void discard(kd_work *w) {
    job_free((generate_job *)w);
}

static json_t *generate_response(const generate_job *g, double ms, const kr_model *m) {
    json_t *o =
        json_pack("{s:o,s:i,s:{s:i,s:i,s:I,s:f,s:s,s:s}}", "tokens",
                  kd_tokens_json(g->s1, g->s2, g->in.n_new), "length", kr_cache_length(g->c),
                  "usage", "appended", g->in.n_append, "generated", g->in.n_new, "cache_bytes",
                  (json_int_t)kr_cache_bytes(g->c), "elapsed_ms", ms, "weights",
                  kr_precision_name(kr_model_weights(m)), "kv", kr_precision_name(kr_model_kv(m)));
    if (o && g->session && json_object_set_new(o, "session", json_string(g->in.session)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Checks what only the session's state can tell; -1 after refusing. */
static int admit(kd_work *w) {
    const generate_job *g = (const generate_job *)w;
    kd_app *app = w->app;
    const int len = g->session ? kr_cache_length(kd_session_cache(g->session)) : 0;
    const int cap = kr_model_max_context(g->md->m);
    const long need = (long)len + g->in.n_append + g->in.n_new;
    if (need > cap) {
        kd_refuse(app, w->r, KD_REFUSED_TOO_LARGE, 422, "context_overflow",
                  "%d cached + %d tokens + %d max_new_tokens = %ld positions exceed "
                  "max_context %d; start a new session or send fewer tokens",
                  len, g->in.n_append, g->in.n_new, need, cap);
        return -1;
    }
    if (g->in.n_new > 0 && len + g->in.n_append == 0) {
        kd_refuse(app, w->r, KD_REFUSED_INVALID, 422, "no_context",
                  "max_new_tokens: %d, but there is no context to generate from; send "
                  "tokens first",
                  g->in.n_new);
        return -1;
    }
    /* even an empty pool could not hold `need` positions of one cache */
    kr_pool_stats st;
    kr_pool_stats_get(g->md->pool, &st);
    const size_t bytes = kr_pool_bytes_for(g->md->m, (int)need);
    if (bytes <= st.bytes_total) return 0;
    kd_refuse(app, w->r, KD_REFUSED_TOO_LARGE, 422, "pool_too_small",
              "%d positions need %zu bytes of KV cache; the pool holds %zu (pool-bytes)", (int)need,
              bytes, st.bytes_total);
    return -1;
}

/* On the scheduler: its cache and token buffers, then the generation joins the steps. */
static int add(kr_sched *ks, kd_work *w, kr_error *err) {
    generate_job *g = (generate_job *)w;
    const int n_new = g->in.n_new;
    g->t0 = kd_now_ms();
    g->s1 = malloc((size_t)(n_new ? n_new : 1) * sizeof *g->s1);
    g->s2 = malloc((size_t)(n_new ? n_new : 1) * sizeof *g->s2);
    if (!g->s1 || !g->s2)
        return kr_fail_code(err, KR_E_NO_MEMORY, "generate: out of memory for %d new tokens",
                            n_new);
    g->c =
        g->session ? kd_session_cache(g->session) : (g->tmp = kr_cache_create(g->md->pool, 0, err));
    if (!g->c) return -1;
    g->length0 = kr_cache_length(g->c);
    return kr_sched_add_generate(ks, g->c, &g->req, g->s1, g->s2, &w->sjob, err);
}

/* The pairs this generation put in the session's cache (all of them, or as far as it got
 * before failing), in the journal; 0 when there is nothing to write. */
static int journal_generated(generate_job *g, char *msg, size_t msglen) {
    kd_app *app = g->work.app;
    const int n = g->session && g->c ? kr_cache_length(g->c) - g->length0 : 0;
    if (!app->journal || n <= 0) return 0;
    kd_journal_record rec = {.type = KD_REC_GENERATED, .n = n};
    snprintf(rec.id, sizeof rec.id, "%s", kd_session_id(g->session));
    int32_t *s1 = malloc((size_t)n * sizeof *s1), *s2 = malloc((size_t)n * sizeof *s2);
    kr_stamp *stamps = malloc((size_t)n * sizeof *stamps);
    int rc = -1;
    if (!s1 || !s2 || !stamps) {
        snprintf(msg, msglen, "journal: out of memory for %d token pairs", n);
    } else {
        for (int i = 0; i < n; i++) { /* the appended pairs, then the generated ones */
            const bool app_part = i < g->in.n_append;
            const int k = app_part ? i : i - g->in.n_append;
            s1[i] = app_part ? g->in.s1[k] : g->s1[k];
            s2[i] = app_part ? g->in.s2[k] : g->s2[k];
            stamps[i] = app_part ? g->in.stamps[k] : g->in.new_stamps[k];
        }
        rec.s1 = s1;
        rec.s2 = s2;
        rec.stamps = stamps;
        rc = kd_journal_write(app->journal, &rec, msg, msglen);
    }
    free(s1);
    free(s2);
    free(stamps);
    return rc;
}

static void done(kd_work *w, const kr_error *err) {
    generate_job *g = (generate_job *)w;
    kd_app *app = w->app;
    kd_request *r = w->r;
    char jmsg[KD_MSG_MAX];
    if (journal_generated(g, jmsg, sizeof jmsg) < 0) { /* written while the session is held */
        const int end_written = kd_sessions_discard(app->sessions, g->session);
        g->session = NULL;
        job_free(g);
        kd_reply_journal_failed(r,
                                end_written == 0
                                    ? "the tokens could not be written to the journal (state-dir); "
                                      "the session was ended, since a restart would not bring "
                                      "them back"
                                    : "the tokens could not be written to the journal (state-dir); "
                                      "the session was ended here, and since its end could not be "
                                      "written either, a restart brings it back as it was before "
                                      "this request",
                                jmsg);
        return;
    }
    json_t *body = err->code == 0 ? generate_response(g, kd_now_ms() - g->t0, g->md->m) : NULL;
    if (err->code == 0) kd_metrics_add_tokens(app->metrics, (unsigned long long)g->in.n_new);
    if (err->code == 0) kd_model_count_tokens(g->md, (unsigned long long)g->in.n_new);
    const kr_error e = *err;
    job_free(g); /* releases the session before the client can see the answer */
    if (e.code == 0)
        kd_reply_json(r, 200, body);
    else
        kd_work_fail(app, r, "generate", &e);
}

static const kd_work_ops ops = {.admit = admit, .add = add, .done = done, .discard = discard};

/* The session named by the request, busy for it and a token session; false after
 * replying. */
static bool acquire_session(kd_app *app, kd_request *r, generate_job *g) {
    char msg[KD_MSG_MAX];
    const kd_session_status st = kd_sessions_acquire(app->sessions, kd_request_session_owner(r),
                                                     g->in.session, &g->session, msg, sizeof msg);
    if (st != KD_SESSION_OK) {
        kd_reply_session_error(r, st, msg);
        return false;
    }
    if (kd_session_kind_of(g->session)) { /* a candle session has no token cache */
        kd_refuse(app, r, KD_REFUSED_INVALID, 400, "wrong_session_kind",
                  "session %s is a candle session: append candles with POST "
                  "/sessions/{id}/candles and forecast with POST /sessions/{id}/forecast",
                  g->in.session);
        return false;
    }
    return true;
}

kd_outcome kd_handle_generate(kd_app *app, kd_request *r) {
    char path_id[KD_SESSION_ARG_MAX + 2]; /* /sessions/{id}/generate names the session */
    const bool in_path = kd_path_session(kd_request_path(r), path_id, sizeof path_id);
    char msg[KD_MSG_MAX];
    generate_job *g = kd_work_new(sizeof *g, &ops, app, r, 0);
    /* a session's own model may take other tokens: the core checks them again */
    kd_token_limits lim;
    json_t *body = g ? kd_token_request_json(app, r, &g->md, &lim) : NULL;
    const int bad = !body || kd_generate_request_parse(body, &lim, &g->in, msg, sizeof msg) < 0 ||
                    (in_path && kd_generate_set_session(&g->in, path_id, msg, sizeof msg) < 0);
    if (bad && body) kd_refuse_invalid(app, r, msg); /* else replied */
    json_decref(body);
    if (bad) {
        if (g) job_free(g);
        return KD_REPLIED;
    }
    if (g->in.has_session && !acquire_session(app, r, g)) {
        job_free(g);
        return KD_REPLIED;
    }
    if (g->session && !(g->md = kd_session_model_of(app, r, g->session))) {
        job_free(g);
        return KD_REPLIED;
    }
    kd_work_init(&g->work, &ops, app, r, g->in.timeout_ms); /* its own deadline, if asked */
    g->req = (kr_generate_request){.s1 = g->in.s1,
                                   .s2 = g->in.s2,
                                   .stamps = g->in.stamps,
                                   .n_append = g->in.n_append,
                                   .new_stamps = g->in.new_stamps,
                                   .n_new = g->in.n_new,
                                   .sampling = g->in.sampling,
                                   .seed = g->in.seed,
                                   .cancel = g->work.cancel};
    return kd_submit(&g->work, KD_ON_SCHEDULER);
}
