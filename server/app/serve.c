/* serve.c — `kronosd serve`: configure, listen, load, serve, drain, exit.
 *
 * The HTTP listener starts before the model loads, so that /health can say "starting"
 * (503) during a long load; READY=1 goes to systemd once requests can be served. On
 * SIGTERM or SIGINT: /health turns 503 "draining" and STOPPING=1 goes to systemd, while
 * the listener stays open (so a load balancer sees the 503 instead of a refused
 * connection, and new model requests get 503 + Retry-After to retry elsewhere); requests
 * in flight finish (up to shutdown-timeout seconds), and the process frees everything and
 * exits 0. SIGHUP reopens the log file and reloads what can change while running
 * (reload.c's list); it never stops the process.
 *
 * Threads: the workers run requests side by side; inside a request, the core splits its
 * matrix products and attention over its own thread pool (compute-threads), which one
 * worker at a time may use while the others compute on their own thread. OpenBLAS always
 * runs single-threaded, so no answer depends on the thread settings.
 */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "session_handlers.h"
#include "http.h"
#include "log.h"
#include "model_dirs.h"
#include "finetune_jobs.h"
#include "model_fingerprint.h"
#include "notify.h"
#include "reload.h"
#include "routes.h"
#include "clock.h"

#define EXIT_USAGE 2

/* ---- signals: a self-pipe, since any thread (OpenBLAS's included) may take the signal -- */

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    const int saved = errno;
    const unsigned char b = (unsigned char)sig;
    if (write(signal_pipe[1], &b, 1) < 0) { /* full pipe: a signal is already pending */
    }
    errno = saved;
}

static int install_signals(char *err, size_t errlen) {
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "signals: pipe: %s", strerror(errno));
        return -1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0 ||
        sigaction(SIGHUP, &sa, NULL) < 0 || sigaction(SIGPIPE, &ign, NULL) < 0) {
        snprintf(err, errlen, "signals: sigaction: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The signal that arrived within timeout_ms, or 0. */
static int wait_signal(int timeout_ms) {
    struct pollfd p = {.fd = signal_pipe[0], .events = POLLIN};
    unsigned char b;
    if (poll(&p, 1, timeout_ms) > 0 && read(signal_pipe[0], &b, 1) == 1) return b;
    return 0;
}

static void close_signals(void) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_IGN); /* a late reload must not kill a process that is exiting */
    close(signal_pipe[0]);
    close(signal_pipe[1]);
}

/* ---- start-up --------------------------------------------------------------------------- */

/* api-key-file and admin-key-file, each when given. */
static int read_keys(kd_app *app, char *err, size_t errlen) {
    kd_keys *api = NULL, *admin = NULL;
    const kd_config *c = &app->cfg;
    if ((c->api_key_file &&
         !(api = kd_read_keys(app, KD_API_KEYS, c->api_key_file, err, errlen))) ||
        (c->admin_key_file &&
         !(admin = kd_read_keys(app, KD_ADMIN_KEYS, c->admin_key_file, err, errlen)))) {
        kd_keys_free(api);
        return -1;
    }
    atomic_store(&app->api_keys, api);
    atomic_store(&app->admin_keys, admin);
    return 0;
}

static int resolve_workers(const kd_config *c) {
    if (c->workers > 0) return c->workers;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long n = cpus > 0 ? cpus : 1;
    return n > 0 ? (int)n : 1;
}

/* The pool ran dry under the scheduler: the least recently used idle session goes (one
 * on that pool: a model's). */
static bool make_room(void *ctx) {
    kd_app *app = ctx;
    return kd_sessions_evict_lru(app->sessions);
}

static bool make_room_in(kr_pool *pool, void *ctx) {
    kd_app *app = ctx;
    return kd_sessions_evict_lru_in(app->sessions, pool);
}

/* A request's first model step is next: its queueing delay by class. */
static void request_started(void *ctx, bool light, double waited_s) {
    kd_app *app = ctx;
    kd_metrics_observe_queue_delay(app->metrics, light ? KD_CLASS_LIGHT : KD_CLASS_HEAVY, waited_s);
}

/* ---- run ---------------------------------------------------------------------------------- */

/* A session ended (deleted, expired, evicted): the journal says so. */
static int session_gone(void *ctx, const char *id, char *msg, size_t msglen) {
    kd_app *app = ctx;
    return app->journal ? kd_journal_gone(app->journal, id, msg, msglen) : 0;
}

/* A session's model: its end drops the session's reference; an info's is the caller's. */
static void session_model_unbound(void *ctx, const void *model) {
    kd_app *app = ctx;
    kd_models_unbind_session(&app->models, model);
}

static void session_model_held(void *ctx, const void *model) {
    kd_app *app = ctx;
    kd_models_hold(&app->models, model);
}

static kd_replay_status replay(void *ctx, const kd_journal_record *rec, char *msg, size_t msglen) {
    kd_app *app = ctx;
    switch (rec->type) {
    case KD_REC_CANDLES:
    case KD_REC_APPEND:
    case KD_REC_CALIB:
        return kd_replay_candle_record(app, rec, msg, msglen);
    case KD_REC_TOKENS:
    case KD_REC_GENERATED:
        return kd_replay_token_record(app, rec, msg, msglen);
    case KD_REC_GONE:
        break;
    }
    return KD_REPLAY_OK;
}

/* state-dir: the journal opened and its sessions replayed, before any request. */
static int open_journal(kd_app *app, char *err, size_t errlen) {
    const kd_config *c = &app->cfg;
    if (!c->state_dir) return 0;
    const kd_model *dm = &app->models.v[0];
    /* the header names the default model; each session's record names its own, and a token
     * pair's range is checked by its model's core at replay when there are several */
    kd_journal_config jc = {.dir = c->state_dir,
                            .fsync = (kd_fsync_policy)kd_fsync_policy_parse(c->journal_fsync),
                            .rewrite_min = c->journal_rewrite_min,
                            .model = dm->desc,
                            .fingerprint = dm->fingerprint,
                            .m = app->models.n > 1 ? NULL : dm->m,
                            .node_id = c->node_id,
                            .max_sessions = c->max_sessions};
    const double t0 = kd_now_s();
    kd_journal *j = kd_journal_open(&jc, replay, app, err, errlen);
    if (!j) return -1;
    kd_journal_stats st;
    kd_journal_stats_get(j, &st);
    kd_log("journal %s/journal: %llu session%s restored (%llu refused), %zu bytes, journal-fsync "
           "%s, in %.2f s",
           c->state_dir, st.restored, st.restored == 1 ? "" : "s", st.refused, st.bytes,
           c->journal_fsync, kd_now_s() - t0);
    app->journal = j;
    return 0;
}

/* A model freed while serving: the scheduler's figures of its address go. */
static void forget_model(void *sched, const kr_model *m) {
    kd_sched_forget_model(sched, m);
}

/* Model, pool, sessions, workers, scheduler: everything requests need. */
static int load(kd_app *app, char *err, size_t errlen) {
    const kd_config *c = &app->cfg;
    if (kd_models_load(&app->models, c, err, errlen) < 0) return -1;
    const kd_model *dm = &app->models.v[0];
    app->model = dm->m;
    app->pool = dm->pool;
    snprintf(app->model_id, sizeof app->model_id, "%s", dm->fp_hex);
    for (int i = 0; i < app->models.n; i++) {
        const kd_model *md = &app->models.v[i];
        kd_log("model %s%s: hash %s, %zu parameters, max-context %d, weights %s, kv %s%s", md->id,
               i ? "" : " (default)", md->hash, kr_model_param_count(md->m), md->set.max_context,
               kr_precision_name(md->set.weights), kr_precision_name(md->set.kv),
               md->tokenizer_of >= 0 ? ", its tokenizer shared" : "");
    }
    const kd_sessions_limits sl = {.max_sessions = c->max_sessions,
                                   .ttl_seconds = c->session_ttl,
                                   .min_idle_seconds = c->session_min_idle,
                                   .max_per_owner = c->max_sessions_per_key,
                                   .heap_budget = c->session_memory_bytes,
                                   .pool_percent = c->session_pool_percent,
                                   .max_bytes_per_owner = c->max_session_bytes_per_key,
                                   .node_id = c->node_id,
                                   .on_gone = session_gone,
                                   .gone_ctx = app,
                                   .model_unbound = session_model_unbound,
                                   .model_held = session_model_held};
    if (!(app->sessions = kd_sessions_create(app->pool, &sl))) {
        snprintf(err, errlen, "sessions: out of memory for %d sessions", c->max_sessions);
        return -1;
    }
    if (open_journal(app, err, errlen) < 0) return -1;
    if (!(app->workers = kd_workers_start(app->n_workers, c->queue_size, err, errlen))) return -1;
    kd_sched_config sc = {.steps = kd_config_steps(c),
                          .queue_size = c->queue_size,
                          .owner_queue_percent = c->key_queue_percent,
                          .hooks = {make_room, make_room_in, request_started, app}};
    if (!(app->sched = kd_sched_start(app->model, app->pool, &sc, err, errlen))) return -1;
    app->models.on_free = forget_model;
    app->models.on_free_ctx = app->sched;
    if (!(app->finetune = kd_ft_jobs_start(app, err, errlen))) return -1;
    kd_log("finetune: checkpoints go to %s", kd_ft_jobs_root(app->finetune));
    return 0;
}

static void unload(kd_app *app) {
    pthread_mutex_lock(&app->models.lock); /* the scheduler goes first: models freed later */
    app->models.on_free = NULL;            /* at the end need no figures dropped */
    pthread_mutex_unlock(&app->models.lock);
    kd_ft_jobs_free(app->finetune); /* its thread trains on models the table holds */
    kd_sched_stop(app->sched);
    kd_workers_stop(app->workers);
    kd_journal_close(app->journal);
    app->journal = NULL; /* the table's last frees are no sessions' ends */
    kd_sessions_free(app->sessions);
    kd_models_free(&app->models);
    kd_metrics_free(app->metrics);
    kd_keys_free(atomic_load(&app->api_keys));
    kd_keys_free(atomic_load(&app->admin_keys));
    for (int i = 0; i < app->n_retired_keys; i++)
        kd_keys_free(app->retired_keys[i]);
    free(app->retired_keys);
    kd_config_free(&app->cfg);
}

static void notify(const char *state) {
    if (kd_notify(state) < 0) kd_log("sd_notify %.20s: %s", state, strerror(errno));
}

/* Every connection is a descriptor: make room for max-connections of them, plus the
 * model's files and some slack, up to the hard limit. */
static void raise_fd_limit(const kd_config *c) {
    struct rlimit rl;
    const rlim_t want = (rlim_t)c->max_connections + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
        kd_log("open files limited to %llu, below max-connections %d + 256: raise LimitNOFILE",
               (unsigned long long)rl.rlim_cur, c->max_connections);
}

/* Serves until SIGTERM or SIGINT (SIGHUP reloads and goes on); then the housekeeping
 * stops and draining starts. */
static int serve_until_signal(kd_app *app, kd_http *http, int argc, char **argv) {
    for (;;) {
        const int sig = wait_signal(1000);
        if (sig == SIGHUP) {
            kd_reload(app, argc, argv);
            kd_http_set_timeouts(http, app->cfg.read_timeout, app->cfg.connection_timeout);
            continue;
        }
        if (sig) return sig;
        const int expired = kd_sessions_expire(app->sessions);
        if (expired) kd_log("%d idle session%s expired", expired, expired == 1 ? "" : "s");
    }
}

/* Lets requests in flight finish; false when the timeout (or a second signal) cut it short. */
static bool drain(kd_app *app, kd_http *http) {
    const double deadline = kd_now_s() + app->cfg.shutdown_timeout;
    while (kd_http_in_flight(http) > 0) {
        if (kd_now_s() >= deadline) return false;
        const int sig = wait_signal(20);
        if (sig == SIGHUP) {
            kd_reopen_log(app);
        } else if (sig) {
            kd_log("%s again: not waiting for requests in flight", strsignal(sig));
            return false;
        }
    }
    return true;
}

int kd_serve(int argc, char **argv) {
    kd_app app;
    char err[1024];
    memset(&app, 0, sizeof app);
    atomic_init(&app.state, KD_STARTING);

    const int parsed = kd_config_load(&app.cfg, argc, argv, err, sizeof err);
    if (parsed != 0) {
        if (parsed < 0) fprintf(stderr, "kronosd: serve: %s\n", err);
        kd_config_free(&app.cfg);
        return parsed > 0 ? EXIT_SUCCESS : EXIT_USAGE;
    }
    if (kd_reopen_log(&app) < 0) {
        kd_config_free(&app.cfg);
        return EXIT_FAILURE;
    }
    raise_fd_limit(&app.cfg);
    app.n_workers = resolve_workers(&app.cfg);
    app.metrics = kd_metrics_create(kd_endpoint_names, kd_endpoint_count);
    if (!app.metrics) snprintf(err, sizeof err, "metrics: out of memory");
    if (!app.metrics || read_keys(&app, err, sizeof err) < 0 ||
        install_signals(err, sizeof err) < 0) {
        kd_log("%s", err);
        unload(&app);
        return EXIT_FAILURE;
    }
    kr_set_threads(app.cfg.compute_threads); /* before the core starts its pool */

    kd_http *http = kd_http_start(&app, &kd_routes, err, sizeof err);
    if (!http) {
        kd_log("%s", err);
        close_signals();
        unload(&app);
        return EXIT_FAILURE;
    }
    const bool v6 = strchr(app.cfg.host, ':') != NULL;
    kd_log("listening on http://%s%s%s:%u (loading the model)", v6 ? "[" : "", app.cfg.host,
           v6 ? "]" : "", kd_http_port(http));
    if (load(&app, err, sizeof err) < 0) {
        kd_log("%s", err);
        kd_http_stop(http);
        close_signals();
        unload(&app);
        return EXIT_FAILURE;
    }
    atomic_store(&app.state, KD_READY);
    notify("READY=1\nSTATUS=serving");
    const kd_keys *api = atomic_load(&app.api_keys), *admin = atomic_load(&app.admin_keys);
    kd_log("ready: %d worker%s, %d compute threads, %d HTTP threads, pool %zu MiB, api keys %d%s, "
           "admin keys %d",
           app.n_workers, app.n_workers == 1 ? "" : "s", kr_threads(), app.cfg.http_threads,
           app.cfg.pool_bytes >> 20, api ? api->n : 0, api ? " (required)" : " (off)",
           admin ? admin->n : 0);

    const int sig = serve_until_signal(&app, http, argc, argv);
    atomic_store(&app.state, KD_DRAINING);
    kd_ft_jobs_stop(app.finetune); /* a training run cancelled, its event streams ended */
    notify("STOPPING=1\nSTATUS=draining");
    kd_log("%s: draining %d request%s in flight", strsignal(sig), kd_http_in_flight(http),
           kd_http_in_flight(http) == 1 ? "" : "s");
    if (!drain(&app, http)) {
        /* workers cannot be interrupted mid-product: leave without waiting for them */
        kd_log("exiting with %d request%s unfinished", kd_http_in_flight(http),
               kd_http_in_flight(http) == 1 ? "" : "s");
        _exit(EXIT_SUCCESS);
    }
    kd_http_stop(http);
    close_signals();
    unload(&app);
    kd_log("stopped");
    return EXIT_SUCCESS;
}
