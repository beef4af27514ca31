/* app.h — the state that every part of the server shares, set up by serve.c.
 *
 * Everything here is written before `state` first becomes KD_READY and only read after:
 * the model is read-only, and the pool, session table, workers and metrics are
 * thread-safe. A request's own state lives in its kd_request and its job. The exceptions
 * are SIGHUP's: the key sets are swapped atomically (old sets are freed at exit, since a
 * request may still be reading one), and the reloadable numbers of cfg (limits, timeouts,
 * access-log) are plain ints and bools, each stored whole; a request sees the old value
 * or the new one. */
#ifndef KD_APP_H
#define KD_APP_H

#include <stdatomic.h>

#include "config.h"
#include "journal.h"
#include "keys.h"
#include "kronos.h"
#include "metrics.h"
#include "models.h"
#include "scheduler.h"
#include "sessions.h"
#include "workers.h"

typedef enum { KD_STARTING, KD_READY, KD_DRAINING } kd_state;

typedef struct {
    kd_config cfg;
    _Atomic(kd_keys *) api_keys;   /* NULL: no authentication */
    _Atomic(kd_keys *) admin_keys; /* NULL: no admin */
    kd_keys **retired_keys;        /* replaced by SIGHUP, freed at exit */
    int n_retired_keys;
    int n_workers;    /* resolved from cfg.workers */
    kd_models models; /* every model, the default first (models.h) */
    /* the default model's (models.v[0]): its weights, fingerprint in hex (what a calibration
     * object names) and pool */
    kr_model *model;
    char model_id[24];
    kr_pool *pool;
    kd_sessions *sessions;
    kd_journal *journal; /* NULL without state-dir */
    kd_workers *workers; /* tokenizer work, and the reference path (use_cache false) */
    kd_sched *sched;     /* forecasts and generations (NULL only while starting) */
    kd_metrics *metrics;
    struct kd_ft_jobs *finetune; /* POST /finetune's jobs (finetune_jobs.h) */
    atomic_int state;            /* kd_state */
} kd_app;

#endif
