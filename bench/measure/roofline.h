/* roofline.h — a phase's ceiling on this machine: the share of the sgemm yardstick it can
 * reach when its arithmetic runs at the yardstick (the products' and attention's alike: both
 * are fused multiply-adds, attention.c) and each of its two parts waits for the bytes it reads
 * at the machine's read bandwidth. */
#ifndef KB_ROOFLINE_H
#define KB_ROOFLINE_H

/* What a phase does: all its FLOPs, attention's share of them, the bytes of weights its
 * products read and of keys and values its attention reads (each byte counted once). */
typedef struct {
    double flops, attn_flops;
    double weight_bytes, kv_bytes;
} kb_phase_work;

/* The ceiling of w at peak_gflops (the yardstick) and bw_gbs (GB/s): the products take the
 * longer of their FLOPs at the peak and the weights at the bandwidth, attention the longer of
 * its FLOPs and the keys and values; the two add, as a layer's attention waits for its
 * queries and its output for the next products. 1 when neither part is bound by memory. NAN
 * for counts that mean nothing (flops <= 0, attn_flops outside [0, flops], bytes < 0) or a
 * rate that is not positive and finite. */
double kb_phase_ceiling(kb_phase_work w, double peak_gflops, double bw_gbs);

#endif
