/* roofline.c — a phase's ceiling from its FLOPs and bytes (roofline.h). */
#include "roofline.h"

#include <math.h>

static double longer(double a, double b) {
    return a > b ? a : b;
}

double kb_phase_ceiling(kb_phase_work w, double peak_gflops, double bw_gbs) {
    if (!(w.flops > 0 && w.attn_flops >= 0 && w.attn_flops <= w.flops && w.weight_bytes >= 0 &&
          w.kv_bytes >= 0 && isfinite(w.flops) && isfinite(w.weight_bytes) && isfinite(w.kv_bytes)))
        return NAN;
    if (!(peak_gflops > 0 && isfinite(peak_gflops) && bw_gbs > 0 && isfinite(bw_gbs))) return NAN;
    double flop_s = peak_gflops * 1e9, byte_s = bw_gbs * 1e9; /* seconds below */
    double products = longer((w.flops - w.attn_flops) / flop_s, w.weight_bytes / byte_s);
    double attention = longer(w.attn_flops / flop_s, w.kv_bytes / byte_s);
    return (w.flops / flop_s) / (products + attention);
}
