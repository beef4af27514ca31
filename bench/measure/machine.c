/* machine.c — the CPU's name, the wall clock and the read bandwidth (machine.h). */
#include "machine.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double kb_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void kb_cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], name[256] = "", family[32] = "?", model[32] = "?";
    while (fgets(line, sizeof line, f) && line[0] != '\n') { /* the first CPU's block */
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1 + (colon[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (strncmp(line, "model name", 10) == 0)
            snprintf(name, sizeof name, "%s", v);
        else if (strncmp(line, "cpu family", 10) == 0)
            snprintf(family, sizeof family, "%s", v);
        else if (strncmp(line, "model\t", 6) == 0)
            snprintf(model, sizeof model, "%s", v);
    }
    fclose(f);
    if (name[0]) snprintf(out, n, "%s (family %s, model %s)", name, family, model);
}

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} read_part;

/* The fastest plain read this CPU does, so that the floor is one: built for each vector
 * width, and each line asked for 4 KiB ahead, past the page edge where the hardware's
 * stream prefetch stops (design.md, tried and dropped). */
#if defined(__x86_64__) && defined(__GNUC__)
#define READ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define READ_CLONES
#endif
#define READ_AHEAD 512 /* words: 4 KiB */
READ_CLONES static void *read_loop(void *arg) {
    read_part *r = arg;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= r->n; i += 8) {
        if (i + READ_AHEAD < r->n) __builtin_prefetch(r->p + i + READ_AHEAD);
        for (int k = 0; k < 8; k++)
            a[k] += r->p[i + k];
    }
    for (int k = 0; k < 8; k++)
        r->sum += a[k];
    return NULL;
}

double kb_read_bandwidth(int threads, size_t bytes) {
    size_t words = bytes / 8;
    uint64_t *buf = malloc(words * 8);
    if (!buf) return NAN;
    for (size_t i = 0; i < words; i++)
        buf[i] = i;
    if (threads > 16) threads = 16;
    double best = INFINITY;
    uint64_t keep = 0;
    for (int pass = 0; pass < 5; pass++) {
        read_part part[16];
        pthread_t t[16];
        double t0 = kb_wall_ms();
        for (int i = 0; i < threads; i++) {
            part[i] = (read_part){buf + words / threads * i, words / threads, 0};
            if (i > 0 && pthread_create(&t[i], NULL, read_loop, &part[i])) exit(1);
        }
        read_loop(&part[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(t[i], NULL);
        double dt = kb_wall_ms() - t0;
        for (int i = 0; i < threads; i++)
            keep += part[i].sum;
        if (dt < best) best = dt;
    }
    free(buf);
    if (keep == 42) puts(""); /* the sums are used */
    return words * 8 / (best * 1e6);
}
