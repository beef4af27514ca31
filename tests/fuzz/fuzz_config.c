/* fuzz_config.c — libFuzzer target: the config file, as `--config` reads it. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) return 0;
    kd_config c;
    memset(&c, 0, sizeof c);
    char err[1024];
    kd_config_parse_stream(&c, f, "fuzz.conf", err, sizeof err);
    fclose(f);
    kd_config_free(&c);
    return 0;
}
