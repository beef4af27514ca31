/* yardstick.h — the sgemm yardstick the phases are measured against, and OpenBLAS on a decode
 * step's own products. Each measures on the core OpenBLAS loaded, then on every core of the
 * kernels' vector width in a child of this program (OPENBLAS_CORETYPE is read only at load):
 * `kronos-bench --sgemm-yardstick` and `--sgemm-step`. */
#ifndef KB_YARDSTICK_H
#define KB_YARDSTICK_H

#include "kronos.h"

/* The yardstick on the core OpenBLAS loaded: sgemm 1024³ with OpenBLAS's own threads, one
 * per CPU (kronosd's kernels parallelise with their own pool and do not use OpenBLAS). */
double kb_yardstick_here(void);

/* The yardstick for the table: sgemm on the loaded core, then on every OpenBLAS core of the
 * vector width kronosd's kernels run at (each in a child, unless it is the loaded one), all
 * printed; the fastest is the yardstick, whatever OPENBLAS_CORETYPE the environment holds
 * (and the bench says so when the environment's core is below the CPU's widest). */
double kb_yardstick(void);

/* ms of OpenBLAS's sgemm over every product of a decode step of `rows` paths, each weight
 * matrix its own (so that, as in a step, the weights come from memory): the fastest of at
 * least 4 passes and 0.6 s, OpenBLAS's threads one per CPU. NAN when out of memory. */
double kb_step_products_ms(int rows, int layers, int d, int ff, int v1, int v2);

/* OpenBLAS on a `rows`-path step's products, on the loaded core and on every core of the
 * yardstick (each in a child): the fastest, printed beside kronosd's whole step. */
void kb_step_products_line(const kr_predictor_config *c, int rows, double kronosd_ms);

#endif
