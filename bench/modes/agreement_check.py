"""agreement_check.py BENCH SRC WORK — kronos-bench --agreement's teacher-forced table
recomputed with numpy from the logits it dumps: for each reduced mode against float32 on tests/data/tiny, the share
of positions whose greedy s1 and s2 agree and the KL divergences of the s1 and s2
distributions (log-softmax in float64 here, written independently of agreement.c). The
tokenizer column (pairs the mode's own tokenizer encodes alike) is only checked to be a
share of the window, k / 400.

Prints "ok ..." or "FAIL ..." a check; exits 1 when any failed."""
import os
import sys

import numpy as np

from checks import check, finish, run_or_exit

bench, src, work = sys.argv[1:4]
out = run_or_exit([bench, "--model", f"{src}/tests/data/tiny", "--csv",
                   f"{src}/tests/data/kline_5min.csv", "--agreement", "--agreement-dump", work,
                   "--eval-seeds", "0"],
                  "kronos-bench --agreement runs")
V = 1024  # tests/data/tiny: 10 bits each


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def kl(p, q):
    lp, lq = log_softmax(p), log_softmax(q)
    return (np.exp(lp) * (lp - lq)).sum(axis=1)


def load(name, P):
    return np.fromfile(os.path.join(work, name), dtype=np.float32).astype(np.float64).reshape(P, V)


for label, file in (("weights bf16", "weights_bf16"), ("kv bf16", "kv_bf16"),
                    ("weights and kv bf16", "both_bf16"),
                    ("weights bf16, heads f32", "weights_bf16_heads"),
                    ("weights bf16, heads and embeddings f32", "weights_bf16_edges")):
    rows = [l for l in out.stdout.splitlines() if l.startswith(f"| {label} |")]
    check(len(rows) == 1, f"the table has a row {label}", out.stdout)
    if not rows:
        continue
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    P = int(cells[1])
    tok_same, s1_same, s2_same, kl1, kl1_max, kl2 = (float(c) for c in cells[2:8])
    a1, a2 = load("f32_s1.bin", P), load("f32_s2.bin", P)
    b1, b2 = load(f"{file}_s1.bin", P), load(f"{file}_s2.bin", P)
    check(P == 399, f"{label}: 399 positions of a 400-candle window", P)
    check(not np.array_equal(a1, b1), f"{label}: logits differ from float32's")
    want = np.mean(a1.argmax(1) == b1.argmax(1))
    check(abs(want - s1_same) < 6e-5, f"{label}: s1 top-1 agreement", (want, s1_same))
    want = np.mean(a2.argmax(1) == b2.argmax(1))
    check(abs(want - s2_same) < 6e-5, f"{label}: s2 top-1 agreement", (want, s2_same))
    k1, k2 = kl(a1, b1), kl(a2, b2)
    for name, want, got in (("mean KLD s1", k1.mean(), kl1), ("max KLD s1", k1.max(), kl1_max),
                            ("mean KLD s2", k2.mean(), kl2)):
        # printed to 3 significant digits
        check(abs(want - got) <= 5e-3 * abs(want) + 1e-15, f"{label}: {name}", (want, got))
    check(abs(tok_same * 400 - round(tok_same * 400)) < 0.03, f"{label}: tokenizer share k / 400",
          tok_same)
finish()
