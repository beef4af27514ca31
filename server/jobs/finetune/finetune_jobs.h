/* finetune_jobs.h — the daemon's fine-tuning jobs (POST /finetune): a short queue, one job
 * training at a time on a thread of its own at the lowest CPU priority (SCHED_IDLE: training
 * takes only what serving leaves), progress for GET and event streams, cancelling, and a
 * finished job's checkpoint written under state-dir's models/ folder and registered as a
 * model (kd_models_add, as POST /models). At start the checkpoints found there are loaded
 * again and their jobs listed from their finetune.json. */
#ifndef KD_FINETUNE_JOBS_H
#define KD_FINETUNE_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "candles_json.h"
#include "kronos_train.h"
#include "stream.h"

#define KD_FT_QUEUE_MAX 4  /* jobs queued or running; beyond, 429 */
#define KD_FT_JOBS_MAX  64 /* jobs listed; the oldest finished one makes room */

typedef struct kd_ft_jobs kd_ft_jobs;

/* A job as POST /finetune asks for it. kd_ft_submit takes series and names on success. */
typedef struct {
    const char *model_id; /* the id to register as; NULL: BASE-ft-N */
    const kd_model *base;
    kr_finetune_settings s;
    int gate_samples;
    kd_owned_candles *series; /* [n] */
    char **names;             /* [n] */
    int n;
} kd_ft_request;

typedef enum {
    KD_FT_OK,
    KD_FT_BUSY,    /* KD_FT_QUEUE_MAX jobs queued or running */
    KD_FT_EXISTS,  /* the model id is loaded or another job's */
    KD_FT_INVALID, /* the model id is not one */
    KD_FT_NOMEM,
    KD_FT_STOPPED, /* the daemon is stopping */
} kd_ft_submit_rc;

/* The jobs' folder (state-dir/models, or a folder of its own under $TMPDIR without
 * state-dir), the checkpoints in it loaded and listed, the training thread started; NULL
 * with a message. */
kd_ft_jobs *kd_ft_jobs_start(kd_app *app, char *err, size_t errlen);
/* Cancels the running job, ends the thread and every stream; later submits are refused
 * (before draining: a stream would hold it). NULL: nothing. */
void kd_ft_jobs_stop(kd_ft_jobs *j);
/* Frees j after kd_ft_jobs_stop (NULL: nothing). */
void kd_ft_jobs_free(kd_ft_jobs *j);
/* Where checkpoints go. */
const char *kd_ft_jobs_root(const kd_ft_jobs *j);

/* Queues req; *answer the new job's state (as kd_ft_get). On a refusal msg says why. */
kd_ft_submit_rc kd_ft_submit(kd_ft_jobs *j, kd_ft_request *req, json_t **answer, char *msg,
                             size_t msglen);
/* A job's state ({"id", "state", "step", "steps", "loss", ...}), or NULL when unknown. */
json_t *kd_ft_get(kd_ft_jobs *j, const char *id);
/* {"jobs": [...]} without the per-step arrays. */
json_t *kd_ft_list(kd_ft_jobs *j);
/* Cancels a queued or running job: 0 (*answer its state), -1 unknown, 1 finished already. */
int kd_ft_cancel(kd_ft_jobs *j, const char *id, json_t **answer);
/* Streams a job's progress on s: a "state" event now, a "progress" event per step, and a
 * final "done", "failed" or "cancelled" event, then the stream ends (at once when the job
 * has finished). -1 when the job is unknown (s untouched). */
int kd_ft_watch(kd_ft_jobs *j, const char *id, kd_stream *s);

/* ---- a tuned model's checkpoint, kept or removed (DELETE /models/{id}) ---- */

typedef enum {
    KD_FT_CKPT_NONE,     /* no checkpoint of that id */
    KD_FT_CKPT_KEPT,     /* state-dir/models/ID: loaded again at every start */
    KD_FT_CKPT_THIS_RUN, /* the temporary folder (no state-dir): gone at the daemon's end */
} kd_ft_ckpt;

/* Whether model_id is a fine-tuned model's checkpoint under the jobs' folder (ID/ with
 * tokenizer/, predictor/ and finetune.json: what a start loads as model ID); its folder in
 * dir (n bytes). */
kd_ft_ckpt kd_ft_checkpoint(kd_ft_jobs *j, const char *model_id, char *dir, size_t n);
/* The checkpoint of model_id removed for good (first renamed to a ".ID.partial" name, which
 * the next start removes should this removal stop halfway) and the finished jobs that
 * registered it dropped from the list. -1 with a message (nothing removed) when there is
 * no such checkpoint or a job is queued or running as model_id. */
int kd_ft_purge(kd_ft_jobs *j, const char *model_id, char *msg, size_t n);

#endif
