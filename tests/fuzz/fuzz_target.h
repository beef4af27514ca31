/* fuzz_target.h — the entry point libFuzzer calls, declared once for every target in
 * tests/fuzz (each target defines it; -Wmissing-prototypes wants a declaration first). */
#ifndef FUZZ_TARGET_H
#define FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
