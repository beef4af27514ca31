/* finetune_jobs.c — the fine-tuning jobs (finetune_jobs.h): the job table under one lock,
 * the training thread (SCHED_IDLE, its loops kept off the shared thread pool), each job's
 * progress as GET answers it and streams send it, and a finished run's folder registered as
 * a model. */
#include "finetune_jobs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fail.h"
#include "finetune_out.h"
#include "finetune_store.h"
#include "log.h"
#include "model_dirs.h"
#include "thread.h"

#define WATCHERS_MAX 16

typedef enum { QUEUED, RUNNING, DONE, FAILED, CANCELLED } job_state;
static const char *const state_names[] = {"queued", "running", "done", "failed", "cancelled"};

typedef struct {
    char id[24], model_id[KD_MODEL_ID_MAX + 1], base_id[KD_MODEL_ID_MAX + 1];
    char *tok_dir, *pred_dir; /* the base's */
    kr_finetune_settings s;
    int gate_samples;
    kd_owned_candles *series;
    char **names;
    int n;
    job_state state;
    bool cancel;
    int step, steps, best_step;
    json_t *loss, *validation; /* [steps] reals, [{"step", "loss"}] */
    json_t *gate;              /* the report's, when done */
    char error[1024];
    kd_stream *watchers[WATCHERS_MAX];
    int n_watchers;
} job;

struct kd_ft_jobs {
    kd_app *app;
    char root[1024];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *v[KD_FT_JOBS_MAX];
    int n, next; /* jobs listed; the next job's number */
    bool stop, started;
    bool temporary; /* no state-dir: root is made at the first run and removed at the end */
    pthread_t thread;
};

const char *kd_ft_jobs_root(const kd_ft_jobs *j) {
    return j->root;
}

static void job_free(job *jb) {
    if (!jb) return;
    for (int i = 0; i < jb->n; i++) {
        kd_candles_free(&jb->series[i]);
        free(jb->names[i]);
    }
    free(jb->series);
    free(jb->names);
    free(jb->tok_dir);
    free(jb->pred_dir);
    json_decref(jb->loss);
    json_decref(jb->validation);
    json_decref(jb->gate);
    free(jb);
}

/* A job's answer (full: with the per-step arrays); under the lock. */
static json_t *job_json(const job *jb, bool full) {
    bool done = jb->state == DONE;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o}", "id", jb->id, "state",
                          state_names[jb->state], "base", jb->base_id, "registers_as", jb->model_id,
                          "step", jb->step, "steps", jb->steps, "best_step", jb->best_step, "model",
                          done ? json_string(jb->model_id) : json_null());
    if (o && full) {
        json_object_set_new(o, "loss", json_deep_copy(jb->loss));
        json_object_set_new(o, "validation", json_deep_copy(jb->validation));
        json_object_set_new(o, "gate", jb->gate ? json_deep_copy(jb->gate) : json_null());
    }
    if (o && jb->state == FAILED) json_object_set_new(o, "error", json_string(jb->error));
    return o;
}

/* Sends an event to every watcher, dropping those whose client left; under the lock. */
static void broadcast(job *jb, const char *event, json_t *data, bool last) {
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    int keep = 0;
    for (int i = 0; i < jb->n_watchers; i++) {
        kd_stream *s = jb->watchers[i];
        if (text && !kd_stream_closed(s) && kd_stream_event(s, event, text) == 0 && !last) {
            jb->watchers[keep++] = s;
        } else {
            kd_stream_end(s);
        }
    }
    jb->n_watchers = keep;
    free(text);
    json_decref(data);
}

static void finish(kd_ft_jobs *J, job *jb, job_state st, const char *why) {
    pthread_mutex_lock(&J->mu);
    jb->state = st;
    if (why) snprintf(jb->error, sizeof jb->error, "%s", why);
    broadcast(jb, state_names[st], job_json(jb, true), true);
    pthread_cond_broadcast(&J->cv);
    pthread_mutex_unlock(&J->mu);
}

typedef struct {
    kd_ft_jobs *J;
    job *jb;
} run_ctx;

/* a loss as JSON: null when it is not finite (a run that diverged) */
static json_t *loss_json(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

/* kr_finetune's report: the step's numbers kept and streamed; nonzero cancels the run */
static int on_progress(void *ctx, const kr_finetune_progress *p) {
    run_ctx *c = ctx;
    job *jb = c->jb;
    pthread_mutex_lock(&c->J->mu);
    jb->step = p->step, jb->steps = p->steps;
    if (p->step > 0) json_array_append_new(jb->loss, loss_json(p->loss));
    if (p->evaluated)
        json_array_append_new(jb->validation, json_pack("{s:i, s:o}", "step", p->step, "loss",
                                                        loss_json(p->validation)));
    if (p->best) jb->best_step = p->step;
    json_t *ev = json_pack("{s:s, s:i, s:i, s:f, s:f}", "id", jb->id, "step", p->step, "steps",
                           p->steps, "seconds", p->seconds, "tokens_per_s", p->tokens_per_s);
    if (ev && p->step > 0) json_object_set_new(ev, "loss", loss_json(p->loss));
    if (ev && p->evaluated) json_object_set_new(ev, "validation", loss_json(p->validation));
    if (ev) broadcast(jb, "progress", ev, false); /* out of memory: this event skipped */
    int stop = jb->cancel || c->J->stop;
    pthread_mutex_unlock(&c->J->mu);
    return stop;
}

/* The run into tmp: the checkpoint, the gate, finetune.json; -1 with a message (cancelled:
 * *cancelled). */
static int train(run_ctx *c, const char *tmp, bool *cancelled, char *msg, size_t n) {
    job *jb = c->jb;
    kr_finetune_result r = {0};
    json_t *rep = NULL;
    kr_candles *k = calloc((size_t)jb->n, sizeof *k);
    json_t *members = json_pack("{s:s, s:s}", "job", jb->id, "model", jb->model_id);
    const kd_ft_run run = {jb->base_id, "series",        (const char *const *)jb->names, k, jb->n,
                           &jb->s,      jb->gate_samples};
    const kd_ft_place place = {jb->tok_dir, jb->pred_dir, tmp, members, on_progress, c};
    int rc = -1;
    if (!k || !members) {
        kd_fail(msg, n, "out of memory");
    } else {
        for (int i = 0; i < jb->n; i++)
            kd_candles_link(&jb->series[i], &k[i]);
        rc = kd_ft_train(&run, &place, &r, &rep, msg, n);
        *cancelled = rc == -2;
    }
    if (rc == 0) {
        pthread_mutex_lock(&c->J->mu);
        jb->best_step = r.best_step;
        jb->gate = json_incref(json_object_get(rep, "gate"));
        pthread_mutex_unlock(&c->J->mu);
    }
    json_decref(members);
    json_decref(rep);
    kr_finetune_result_free(&r);
    free(k);
    return rc == 0 ? 0 : -1;
}

/* One job: trained in ROOT/.ID.partial, renamed to ROOT/ID, registered as model ID. */
static void run_job(kd_ft_jobs *J, job *jb) {
    char tmp[1200], dir[1200], msg[768];
    bool cancelled = false;
    run_ctx c = {J, jb};
    snprintf(tmp, sizeof tmp, "%s/.%s.partial", J->root, jb->model_id);
    snprintf(dir, sizeof dir, "%s/%s", J->root, jb->model_id);
    kd_ft_remove_tree(tmp);
    if (mkdir(J->root, 0700) && errno != EEXIST) {
        kd_fail(msg, sizeof msg, "%s: %s", J->root, strerror(errno));
        finish(J, jb, FAILED, msg);
        return;
    }
    kd_log("finetune %s: training %s on %d series as %s", jb->id, jb->base_id, jb->n, jb->model_id);
    if (train(&c, tmp, &cancelled, msg, sizeof msg)) {
        kd_ft_remove_tree(tmp);
        kd_log("finetune %s: %s", jb->id, cancelled ? "cancelled" : msg);
        finish(J, jb, cancelled ? CANCELLED : FAILED, cancelled ? NULL : msg);
        return;
    }
    pthread_mutex_lock(&J->mu);
    cancelled = jb->cancel || J->stop; /* asked during the gate */
    pthread_mutex_unlock(&J->mu);
    if (cancelled) {
        kd_ft_remove_tree(tmp);
        finish(J, jb, CANCELLED, NULL);
        return;
    }
    const kd_model *md = NULL;
    kd_app *app = J->app;
    if (rename(tmp, dir)) {
        kd_fail(msg, sizeof msg, "moving %s to %s: %s", tmp, dir, strerror(errno));
        kd_ft_remove_tree(tmp);
        finish(J, jb, FAILED, msg);
        return;
    }
    if (kd_models_add(&app->models, &app->cfg, jb->model_id, dir, NULL, &md, msg, sizeof msg) !=
        KD_MODEL_ADD_OK) {
        kd_log("finetune %s: registering %s: %s", jb->id, dir, msg);
        kd_ft_remove_tree(dir);
        finish(J, jb, FAILED, msg);
        return;
    }
    kd_log("finetune %s: done, model %s (hash %s) from %s", jb->id, md->id, md->hash, dir);
    kd_models_release(&app->models, md); /* the registry keeps it listed */
    finish(J, jb, DONE, NULL);
}

/* Between its work items the training waits while serving has work: the lowest priority
 * alone leaves it on a core while a serving thread waits runnable on the other. Under a load
 * that never stops it still advances: a wait of PAUSE_MAX_MS ends, and PAUSE_RUN_MS of
 * training follow before the next. */
enum { PAUSE_MAX_MS = 250, PAUSE_RUN_MS = 25 };
static _Thread_local double run_until_ms; /* the trainer's own */
static void pause_while_serving(void *ctx) {
    kd_app *app = ctx;
    if (!app->sched || kd_now_ms() < run_until_ms) return;
    const struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
    for (int i = 0; kd_sched_busy(app->sched); i++) {
        if (i == PAUSE_MAX_MS) {
            run_until_ms = kd_now_ms() + PAUSE_RUN_MS;
            return;
        }
        nanosleep(&ms, NULL);
    }
}

/* The lowest CPU priority for this thread: SCHED_IDLE, else nice 19 on its Linux thread id;
 * its loops on this thread, pausing while serving has work. */
static void lower_priority(kd_app *app) {
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0 &&
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0)
        kd_log("finetune: cannot lower the training thread's priority: %s", strerror(errno));
    kr_finetune_this_thread_alone(true);
    kr_finetune_this_thread_pauses(pause_while_serving, app);
}

static void *trainer(void *arg) {
    kd_ft_jobs *J = arg;
    lower_priority(J->app);
    pthread_mutex_lock(&J->mu);
    for (;;) {
        job *next = NULL;
        for (int i = 0; i < J->n && !next; i++)
            if (J->v[i]->state == QUEUED) next = J->v[i];
        if (J->stop) break;
        if (!next) {
            pthread_cond_wait(&J->cv, &J->mu);
            continue;
        }
        next->state = RUNNING;
        broadcast(next, "state", job_json(next, false), false);
        pthread_mutex_unlock(&J->mu);
        run_job(J, next);
        pthread_mutex_lock(&J->mu);
    }
    pthread_mutex_unlock(&J->mu);
    return NULL;
}

/* ---- the table (HTTP threads) ------------------------------------------------------------ */

static job *find(kd_ft_jobs *J, const char *id) {
    for (int i = 0; i < J->n; i++)
        if (!strcmp(J->v[i]->id, id)) return J->v[i];
    return NULL;
}

/* room for one more listed job: the oldest finished one goes; false when none has */
static bool make_room(kd_ft_jobs *J) {
    if (J->n < KD_FT_JOBS_MAX) return true;
    for (int i = 0; i < J->n; i++)
        if (J->v[i]->state >= DONE && !J->v[i]->n_watchers) {
            job_free(J->v[i]);
            memmove(&J->v[i], &J->v[i + 1], (size_t)(J->n - i - 1) * sizeof *J->v);
            J->n--;
            return true;
        }
    return false;
}

static job *new_job(const char *id, const char *model_id, const char *base_id) {
    job *jb = calloc(1, sizeof *jb);
    if (!jb) return NULL;
    snprintf(jb->id, sizeof jb->id, "%s", id);
    snprintf(jb->model_id, sizeof jb->model_id, "%s", model_id);
    snprintf(jb->base_id, sizeof jb->base_id, "%s", base_id);
    jb->loss = json_array();
    jb->validation = json_array();
    if (!jb->loss || !jb->validation) job_free(jb), jb = NULL;
    return jb;
}

/* whether id is taken: a loaded model, a job's that has not failed, or a folder under root */
static bool id_taken(kd_ft_jobs *J, const char *id, char *msg, size_t n) {
    char dir[1200];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/%s", J->root, id);
    const kd_model *loaded = kd_models_acquire(&J->app->models, id);
    kd_models_release(&J->app->models, loaded);
    if (loaded) return kd_fail(msg, n, "id: model '%s' is loaded already", id), true;
    for (int i = 0; i < J->n; i++)
        if (J->v[i]->state <= DONE && !strcmp(J->v[i]->model_id, id))
            return kd_fail(msg, n, "id: job %s registers '%s'", J->v[i]->id, id), true;
    if (stat(dir, &st) == 0) return kd_fail(msg, n, "id: %s exists already", dir), true;
    return false;
}

kd_ft_submit_rc kd_ft_submit(kd_ft_jobs *J, kd_ft_request *req, json_t **answer, char *msg,
                             size_t msglen) {
    char id[24], model_id[KD_MODEL_ID_MAX + 24];
    kd_ft_submit_rc rc = KD_FT_OK;
    pthread_mutex_lock(&J->mu);
    int active = 0;
    for (int i = 0; i < J->n; i++)
        active += J->v[i]->state <= RUNNING;
    snprintf(id, sizeof id, "ft-%d", J->next);
    snprintf(model_id, sizeof model_id, "%s", req->model_id ? req->model_id : "");
    if (!req->model_id) snprintf(model_id, sizeof model_id, "%s-ft-%d", req->base->id, J->next);
    size_t len = strlen(model_id);
    job *jb = NULL;
    if (J->stop) {
        rc = KD_FT_STOPPED, kd_fail(msg, msglen, "the daemon is stopping");
    } else if (active >= KD_FT_QUEUE_MAX || !make_room(J)) {
        rc = KD_FT_BUSY;
        kd_fail(msg, msglen, "%d fine-tuning jobs are queued or running (at most %d)", active,
                KD_FT_QUEUE_MAX);
    } else if (!len || len > KD_MODEL_ID_MAX || strspn(model_id, KD_MODEL_ID_CHARS) != len) {
        rc = KD_FT_INVALID;
        kd_fail(msg, msglen,
                "id: '%.80s' is not a model id (1 to %d letters, digits, '_', '.' "
                "or '-')",
                model_id, KD_MODEL_ID_MAX);
    } else if (id_taken(J, model_id, msg, msglen)) {
        rc = KD_FT_EXISTS;
    } else if (!(jb = new_job(id, model_id, req->base->id)) ||
               !(jb->tok_dir = strdup(req->base->tokenizer_dir)) ||
               !(jb->pred_dir = strdup(req->base->predictor_dir))) {
        job_free(jb);
        rc = KD_FT_NOMEM, kd_fail(msg, msglen, "out of memory");
    } else {
        jb->s = req->s, jb->gate_samples = req->gate_samples;
        jb->series = req->series, jb->names = req->names, jb->n = req->n;
        req->series = NULL, req->names = NULL, req->n = 0; /* the job's now */
        J->v[J->n++] = jb;
        J->next++;
        *answer = job_json(jb, true);
        pthread_cond_broadcast(&J->cv);
    }
    pthread_mutex_unlock(&J->mu);
    return rc;
}

json_t *kd_ft_get(kd_ft_jobs *J, const char *id) {
    pthread_mutex_lock(&J->mu);
    job *jb = find(J, id);
    json_t *o = jb ? job_json(jb, true) : NULL;
    pthread_mutex_unlock(&J->mu);
    return o;
}

json_t *kd_ft_list(kd_ft_jobs *J) {
    json_t *list = json_array();
    pthread_mutex_lock(&J->mu);
    for (int i = 0; list && i < J->n; i++)
        if (json_array_append_new(list, job_json(J->v[i], false))) list = (json_decref(list), NULL);
    pthread_mutex_unlock(&J->mu);
    return list ? json_pack("{s:o}", "jobs", list) : NULL;
}

int kd_ft_cancel(kd_ft_jobs *J, const char *id, json_t **answer) {
    pthread_mutex_lock(&J->mu);
    job *jb = find(J, id);
    int rc = !jb ? -1 : jb->state >= DONE ? 1 : 0;
    if (rc == 0) {
        jb->cancel = true; /* a running job stops at its next step */
        if (jb->state == QUEUED) {
            jb->state = CANCELLED;
            broadcast(jb, "cancelled", job_json(jb, true), true);
        }
    }
    if (jb) *answer = job_json(jb, true);
    pthread_mutex_unlock(&J->mu);
    return rc;
}

int kd_ft_watch(kd_ft_jobs *J, const char *id, kd_stream *s) {
    pthread_mutex_lock(&J->mu);
    job *jb = find(J, id);
    if (jb) {
        json_t *o = job_json(jb, true);
        char *now = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        bool ended = jb->state >= DONE || jb->n_watchers == WATCHERS_MAX || !now;
        kd_stream_event(s, ended ? state_names[jb->state] : "state", now ? now : "{}");
        free(now);
        if (ended)
            kd_stream_end(s);
        else
            jb->watchers[jb->n_watchers++] = s;
    }
    pthread_mutex_unlock(&J->mu);
    return jb ? 0 : -1;
}

/* ---- a tuned model's checkpoint ---------------------------------------------------------- */

/* root/id holding a run's files; under the lock or the folder's own risk */
static bool is_checkpoint(const kd_ft_jobs *J, const char *id, char *dir, size_t n) {
    struct stat st;
    char path[1400];
    size_t len = strlen(id);
    if (!len || len > KD_MODEL_ID_MAX || strspn(id, KD_MODEL_ID_CHARS) != len || id[0] == '.')
        return false; /* never a path outside root */
    snprintf(dir, n, "%s/%s", J->root, id);
    const char *parts[] = {"tokenizer", "predictor", "finetune.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, parts[i]);
        if (stat(path, &st) != 0 || (i < 2 ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
            return false;
    }
    return true;
}

kd_ft_ckpt kd_ft_checkpoint(kd_ft_jobs *J, const char *model_id, char *dir, size_t n) {
    pthread_mutex_lock(&J->mu);
    bool found = is_checkpoint(J, model_id, dir, n);
    pthread_mutex_unlock(&J->mu);
    return !found ? KD_FT_CKPT_NONE : J->temporary ? KD_FT_CKPT_THIS_RUN : KD_FT_CKPT_KEPT;
}

int kd_ft_purge(kd_ft_jobs *J, const char *model_id, char *msg, size_t n) {
    char dir[1200], gone[1200];
    int rc = -1;
    pthread_mutex_lock(&J->mu); /* no job registers model_id meanwhile (id_taken) */
    for (int i = 0; i < J->n; i++)
        if (J->v[i]->state <= RUNNING && !strcmp(J->v[i]->model_id, model_id)) {
            kd_fail(msg, n, "job %s is to register '%s'", J->v[i]->id, model_id);
            goto out;
        }
    if (!is_checkpoint(J, model_id, dir, sizeof dir)) {
        kd_fail(msg, n, "'%s' has no checkpoint under %s", model_id, J->root);
        goto out;
    }
    snprintf(gone, sizeof gone, "%s/.%s.partial", J->root, model_id);
    kd_ft_remove_tree(gone);
    if (rename(dir, gone)) {
        kd_fail(msg, n, "moving %s to %s: %s", dir, gone, strerror(errno));
        goto out;
    }
    kd_ft_remove_tree(gone);
    int keep = 0;
    for (int i = 0; i < J->n; i++) {
        job *jb = J->v[i];
        if (jb->state == DONE && !strcmp(jb->model_id, model_id) && !jb->n_watchers)
            job_free(jb);
        else
            J->v[keep++] = jb;
    }
    J->n = keep;
    rc = 0;
out:
    pthread_mutex_unlock(&J->mu);
    return rc;
}

/* ---- start and stop ---------------------------------------------------------------------- */

/* a finished run found under root: listed as a done job */
static void found(void *ctx, const char *job_id, const char *model_id, json_t *rep) {
    kd_ft_jobs *J = ctx;
    json_t *settings = json_object_get(rep, "settings");
    const char *base = json_string_value(json_object_get(settings, "model"));
    job *jb = J->n < KD_FT_JOBS_MAX && !find(J, job_id)
                  ? new_job(job_id, model_id, base ? base : "")
                  : NULL;
    if (jb) {
        jb->state = DONE;
        json_decref(jb->loss), json_decref(jb->validation);
        jb->loss = json_incref(json_object_get(rep, "loss"));
        jb->validation = json_incref(json_object_get(rep, "validation"));
        jb->gate = json_incref(json_object_get(rep, "gate"));
        jb->step = jb->steps = (int)json_array_size(jb->loss);
        jb->best_step = (int)json_integer_value(json_object_get(rep, "best_step"));
        J->v[J->n++] = jb;
        int number = 0;
        if (sscanf(job_id, "ft-%d", &number) == 1 && number >= J->next) J->next = number + 1;
    }
    json_decref(rep);
}

kd_ft_jobs *kd_ft_jobs_start(kd_app *app, char *err, size_t errlen) {
    kd_ft_jobs *J = calloc(1, sizeof *J);
    if (!J) return kd_fail(err, errlen, "finetune: out of memory"), NULL;
    J->app = app, J->next = 1;
    const char *tmpdir = getenv("TMPDIR");
    if (app->cfg.state_dir)
        snprintf(J->root, sizeof J->root, "%s/models", app->cfg.state_dir);
    else
        snprintf(J->root, sizeof J->root, "%s/kronosd-finetune-%ld",
                 tmpdir && *tmpdir ? tmpdir : "/tmp", (long)getpid());
    J->temporary = !app->cfg.state_dir;
    if (!J->temporary && mkdir(J->root, 0700) && errno != EEXIST) {
        kd_fail(err, errlen, "finetune: %s: %s", J->root, strerror(errno));
        free(J);
        return NULL;
    }
    pthread_mutex_init(&J->mu, NULL);
    pthread_cond_init(&J->cv, NULL);
    if (!J->temporary) kd_ft_restore(app, J->root, found, J);
    if (kd_thread_start(&J->thread, trainer, J, "finetune", err, errlen) < 0) {
        kd_ft_jobs_free(J);
        return NULL;
    }
    J->started = true;
    return J;
}

void kd_ft_jobs_stop(kd_ft_jobs *J) {
    if (!J) return;
    kd_thread_ask_stop(&J->mu, &J->cv, &J->stop);
    if (J->started) pthread_join(J->thread, NULL);
    J->started = false;
    pthread_mutex_lock(&J->mu);
    for (int i = 0; i < J->n; i++)
        broadcast(J->v[i], "state", NULL, true); /* the streams end */
    pthread_mutex_unlock(&J->mu);
}

void kd_ft_jobs_free(kd_ft_jobs *J) {
    if (!J) return;
    kd_ft_jobs_stop(J);
    for (int i = 0; i < J->n; i++)
        job_free(J->v[i]);
    if (J->temporary) kd_ft_remove_tree(J->root); /* its models go with the daemon */
    pthread_mutex_destroy(&J->mu);
    pthread_cond_destroy(&J->cv);
    free(J);
}
