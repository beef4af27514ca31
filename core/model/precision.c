/* precision.c — the names of what a model's numbers are stored in (kr_precision), as the
 * config, the flags and the answers spell them, and of the product each runs. */
#include "kronos.h"

#include <string.h>

const char *kr_precision_name(kr_precision p) {
    return p == KR_PREC_BF16 ? "bf16" : p == KR_PREC_INT8 ? "int8" : "f32";
}

const char *kr_weights_product_name(kr_precision weights, kr_simd level) {
    if (weights == KR_PREC_BF16) return kr_bf16_product_name(level);
    if (weights == KR_PREC_INT8) return kr_q8_product_name(level);
    return level == KR_SIMD_GENERIC ? "c" : "fma";
}

int kr_precision_parse(const char *s, const char *field, kr_precision *out, kr_error *err) {
    if (s && strcmp(s, "f32") == 0) {
        *out = KR_PREC_F32;
        return 0;
    }
    if (s && strcmp(s, "bf16") == 0) {
        *out = KR_PREC_BF16;
        return 0;
    }
    if (s && strcmp(s, "int8") == 0) {
        *out = KR_PREC_INT8;
        return 0;
    }
    return kr_fail_code(err, KR_E_INVALID, "%s: must be f32, bf16 or int8, got '%s'", field,
                        s ? s : "(none)");
}

int kr_kv_precision_parse(const char *s, const char *field, kr_precision *out, kr_error *err) {
    if (s && (strcmp(s, "f32") == 0 || strcmp(s, "bf16") == 0))
        return kr_precision_parse(s, field, out, err);
    return kr_fail_code(err, KR_E_INVALID, "%s: must be f32 or bf16, got '%s'", field,
                        s ? s : "(none)");
}
