/* train_data.c — a training batch from a series of candles, as upstream's
 * finetune/dataset.py makes one: windows of lookback + predict + 1 candles, each normalised
 * by its first lookback rows (forecast/'s float32 statistics, numpy's pairwise sums), the
 * frozen tokenizer's tokens and the calendar stamps. */
#include "train_model.h"

#include "forecast_impl.h"

#include <stdlib.h>
#include <string.h>

int kr_train_windows(const kr_model *m, const kr_candles *s, const int *starts, int B, int lookback,
                     int predict, float *xn, int32_t *s1, int32_t *s2, kr_stamp *stamps,
                     kr_error *err) {
    if (lookback < 1 || predict < 0)
        return kr_fail_code(err, KR_E_INVALID,
                            "lookback: must be >= 1 and predict >= 0, got %d and %d", lookback,
                            predict);
    int W = lookback + predict + 1;
    for (int b = 0; b < B; b++)
        if (starts[b] < 0 || starts[b] > s->n - W)
            return kr_fail_code(err, KR_E_INVALID,
                                "windows[%d]: rows [%d, %d) are outside the series' %d rows", b,
                                starts[b], starts[b] + W, s->n);
    /* a window's raw candles, normalised candles and kr_normalise's scratch: one buffer */
    const size_t WD = (size_t)W * KR_D_IN;
    float *raw = malloc(3 * WD * sizeof(float));
    if (!raw)
        return kr_fail_code(err, KR_E_NO_MEMORY, "windows: out of memory for a window of %d", W);
    float *x = raw + WD, *scratch = raw + 2 * WD;
    int rc = -1;
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)b * W;
        kr_candles win = {W, s->timestamps + starts[b], {NULL}};
        for (int c = 0; c < KR_D_IN; c++)
            win.columns[c] = s->columns[c] ? s->columns[c] + starts[b] : NULL;
        kr_raw_candles(&win, raw);
        for (int t = 0; t < W; t++)
            stamps[o + t] = kr_stamp_from_wall(win.timestamps[t]);
        float mean[KR_D_IN], std[KR_D_IN];
        if (kr_normalise(raw, lookback, scratch, mean, std, err)) goto out;
        kr_normalise_rows(raw, W, mean, std, x);
        if (xn) memcpy(xn + o * KR_D_IN, x, (size_t)W * KR_D_IN * sizeof(float));
        if (kr_tokenizer_encode(m, x, W, s1 + o, s2 + o, err)) goto out;
    }
    rc = 0;
out:
    free(raw);
    return rc;
}
