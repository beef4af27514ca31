/* machine.h — the machine under the bench: its CPU's name, its wall clock and how fast it
 * reads memory. */
#ifndef KB_MACHINE_H
#define KB_MACHINE_H

#include <stddef.h>

/* "model name (family F, model M)" of /proc/cpuinfo's first CPU, or "unknown CPU" (a
 * virtual machine may name only the vendor; the family and model still tell the core). */
void kb_cpu_model(char *out, size_t n);

/* ms on the monotonic wall clock. */
double kb_wall_ms(void);

/* GB/s of reading a buffer of `bytes` with `threads` threads, the best of 5 passes back to
 * back. A single-path decode step reads the same weights and KV cache every token, so the
 * floor reads a buffer of that size the same way: from memory where it is larger than the
 * last-level cache, from that cache where it fits (a cache that holds the step's weights is
 * read faster than memory: a buffer larger than it would put the floor below what the step
 * itself does). */
double kb_read_bandwidth(int threads, size_t bytes);

#endif
