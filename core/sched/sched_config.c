/* sched_config.c — the step scheduler's tuning defaults: what kr_sched_config_default
 * returns, and the rule that a knob left 0 in a caller's config takes that default
 * (sched_config_resolve, at kr_sched_create).
 */
#include "sched_config.h"

kr_sched_config kr_sched_config_default(void) {
    return (kr_sched_config){
        .step_tokens = 256,
        .max_rows = 512,
        .light_flops = 20e9,
        .light_step_factor = 1.5,
        .step_fixed_rows = 0, /* no default figure: measured from the steps */
        .sit_out_steps = 8,
        .sit_out_ms = 40.0,
        .light_wait = 0.5,
        .light_recent_ms = 10000.0,
    };
}

void sched_config_resolve(kr_sched_config *c) {
    const kr_sched_config d = kr_sched_config_default();
    if (c->step_tokens <= 0) c->step_tokens = d.step_tokens;
    if (c->max_rows <= 0) c->max_rows = d.max_rows;
    if (c->light_flops <= 0) c->light_flops = d.light_flops;
    if (c->light_step_factor <= 1) c->light_step_factor = d.light_step_factor;
    /* negative sit_out_steps (none sit out) and light_recent_ms (never) are kept */
    if (c->sit_out_steps == 0) c->sit_out_steps = d.sit_out_steps;
    if (c->sit_out_ms <= 0) c->sit_out_ms = d.sit_out_ms;
    if (c->light_wait <= 0) c->light_wait = d.light_wait;
    if (c->light_recent_ms == 0) c->light_recent_ms = d.light_recent_ms;
}
