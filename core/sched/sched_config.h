/* sched_config.h — the step scheduler's rule for a caller's tuning knobs (sched_config.c),
 * apart from its jobs: it needs only the public kr_sched_config. Internal to core/. */
#ifndef KR_SCHED_CONFIG_H
#define KR_SCHED_CONFIG_H

#include "kronos.h"

/* Each knob of c left 0 (or out of its range) set to kr_sched_config_default's. */
void sched_config_resolve(kr_sched_config *c);

#endif
