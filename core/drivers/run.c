/* run.c — kr_run: the one driver that runs jobs to completion over the step scheduler, for
 * every one-shot entry point (run_forecast.c, run_generate.c). Steps are as large as the
 * scheduler allows (no other work waits on them); a job's answer is the same whatever
 * shares its steps. */
#include "run.h"

#include <stdint.h>

static void run_done(void *tag, const kr_error *err, void *ctx) {
    kr_error *errs = ctx;
    errs[(intptr_t)tag] = *err;
}

int kr_run(const kr_model *m, kr_pool *pool, int n, kr_run_add add, void *ctx, kr_error *errs) {
    if (n <= 0) return 0;
    kr_sched_config cfg = kr_sched_config_default();
    cfg.step_tokens = 2048;
    cfg.max_rows = 1 << 30;
    cfg.done = run_done;
    cfg.ctx = errs;
    kr_error e;
    kr_sched *s = kr_sched_create(m, pool, &cfg, &e);
    for (int i = 0; i < n; i++) {
        errs[i] = (kr_error){.code = KR_OK};
        if (!s)
            errs[i] = e;
        else /* a failure to queue (or to run at once) is in errs[i] already */
            add(s, i, ctx, &errs[i]);
    }
    while (s && kr_sched_step(s) > 0)
        ;
    kr_sched_free(s);
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed += errs[i].code != KR_OK;
    return failed ? -1 : 0;
}
