/* numfmt.h — numbers written as the shortest decimal that reads back exactly.
 *
 * The core computes in float32, so a response value carries at most float32's precision:
 * writing it with 15 digits (11.3583374023438) only adds noise and bytes. These write the
 * shortest %g form (at most 9 significant digits for a float32, 17 for a double) that
 * strtof/strtod read back to the same value.
 */
#ifndef KD_NUMFMT_H
#define KD_NUMFMT_H

#include <stddef.h>

/* Room for any output of these, with its NUL. */
#define KD_NUM_MAX 32

/* x rounded to float32, written shortest; a value float32 cannot hold (overflow to
 * infinity, or underflow to zero from a nonzero value) is written as a double instead.
 * x must be finite. Returns the length written. */
int kd_fmt_float32(double x, char *buf, size_t n);
/* x written shortest as a double (quantile levels: 0.3333333333 and 0.33333333334 stay
 * apart). x must be finite. */
int kd_fmt_double(double x, char *buf, size_t n);

#endif
