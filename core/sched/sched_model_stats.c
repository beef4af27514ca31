/* sched_model_stats.c — what each model's rows took in the scheduler's steps (kronos.h's
 * kr_sched_model_stats): counted as the steps run, read by the caller between steps. */
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

static sched_model_stat *entry(kr_sched *s, const kr_model *m) {
    for (int i = 0; i < s->n_mstats; i++)
        if (s->mstats[i].pub.m == m) return &s->mstats[i];
    if (s->n_mstats == s->mstats_cap) {
        const int cap = s->mstats_cap ? 2 * s->mstats_cap : 4;
        sched_model_stat *grown = realloc(s->mstats, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        s->mstats = grown;
        s->mstats_cap = cap;
    }
    sched_model_stat *e = &s->mstats[s->n_mstats++];
    *e = (sched_model_stat){.pub = {.m = m}};
    return e;
}

void sched_model_time(kr_sched *s, const kr_model *m, int rows, double ms) {
    sched_model_stat *e = entry(s, m);
    if (!e) return;
    if (e->last_step != s->stats.steps) {
        e->last_step = s->stats.steps;
        e->pub.steps++;
    }
    e->pub.rows += (unsigned long long)rows;
    e->pub.ms += ms;
}

void kr_sched_model_stats_forget(kr_sched *s, const kr_model *m) {
    for (int i = 0; i < s->n_mstats; i++)
        if (s->mstats[i].pub.m == m) {
            memmove(&s->mstats[i], &s->mstats[i + 1],
                    (size_t)(s->n_mstats - i - 1) * sizeof *s->mstats);
            s->n_mstats--;
            return;
        }
}

int kr_sched_model_stats_get(const kr_sched *s, kr_sched_model_stats *out, int max) {
    for (int i = 0; i < s->n_mstats && i < max; i++)
        out[i] = s->mstats[i].pub;
    return s->n_mstats;
}
