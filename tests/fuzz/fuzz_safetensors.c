/* fuzz_safetensors.c — libFuzzer target: a safetensors file (length, header JSON, data),
 * parsed from memory as st_open parses a mapped file, then every tensor read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "safetensors.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f = {0};
    kr_error err = {0};
    if (st_parse(&f, data, size, "fuzz.safetensors", &err) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const st_tensor *t = &f.tensors[i];
            if (t->numel > (1u << 20) || t->dtype == ST_OTHER) continue;
            float *dst = malloc(t->numel * sizeof *dst + 1);
            if (dst) st_read_f32(&f, t, dst, &err);
            free(dst);
        }
    }
    st_close(&f);
    return 0;
}
