"""agreement_eval_check.py BENCH SRC WORK KRONOSD — kronos-bench --agreement's /evaluate table
recomputed from the scores it dumps, on tests/data/tiny with 3 seeds (two seed pairs, so that
the seed-to-seed RMS is a mean of more than one square) and 4 origins: per mode and score,
float32's mean over seeds, float32's seed-to-seed change (the RMS of score(f32, s + 1) -
score(f32, s)), the mode's change (the RMS of score(mode, s) - score(f32, s)), their ratio and
the verdict, written here independently of agreement_eval.c. The dumped scores themselves are
checked against `kronosd evaluate` on the same request (float32 seeds 1 and 2, weights bf16
seed 3, weights bf16 with float32 heads left to the table: kronosd has no such option).

Prints "ok ..." or "FAIL ..." a check; exits 1 when any failed."""
import json
import os
import subprocess
import sys

import numpy as np

from checks import check, finish, run_or_exit

bench, src, work, kronosd = sys.argv[1:5]
SEEDS, ORIGINS, SAMPLES = 3, 4, 32
csv = f"{src}/tests/data/kline_5min.csv"
model = f"{src}/tests/data/tiny"
out = run_or_exit([bench, "--model", model, "--csv", csv, "--agreement", "--eval-only",
                   "--eval-seeds", str(SEEDS), "--eval-origins", str(ORIGINS),
                   "--eval-samples", str(SAMPLES), "--agreement-dump", work],
                  "kronos-bench --agreement --eval-only runs")

SCORES = ["CRPS", "MAE", "coverage 0.05-0.95", "coverage 0.1-0.9"]
scores = {}  # (mode file, seed, score) -> value
with open(os.path.join(work, "eval_scores.tsv")) as f:
    check(f.readline().split("\t") == ["mode", "seed", "score", "value\n"], "the dump's header")
    for line in f:
        mode, seed, score, value = line.rstrip("\n").split("\t")
        scores[(mode, int(seed), score)] = float(value)
MODES = [("weights bf16", "weights_bf16"), ("kv bf16", "kv_bf16"),
         ("weights and kv bf16", "both_bf16"), ("weights int8", "weights_int8"),
         ("weights bf16, heads f32", "weights_bf16_heads"),
         ("weights bf16, heads and embeddings f32", "weights_bf16_edges"),
         ("weights int8, embeddings f32", "weights_int8_edges")]
check(len(scores) == (1 + len(MODES)) * SEEDS * len(SCORES),
      "the dump holds every mode's every seed's every score", len(scores))


def vec(file, score):
    return np.array([scores[(file, s, score)] for s in range(1, SEEDS + 1)])


def close(got, want, rel):
    return abs(got - want) <= rel * abs(want) + 1e-12


header_line = [l for l in out.stdout.splitlines() if l.startswith("/evaluate against float32")]
check(len(header_line) == 1 and f"{ORIGINS} origins" in header_line[0]
      and f"{SAMPLES} samples" in header_line[0], "the table names its origins and samples",
      header_line)
for label, file in MODES:
    for score in SCORES:
        rows = [l for l in out.stdout.splitlines() if l.startswith(f"| {label} | {score} |")]
        check(len(rows) == 1, f"the table has a row {label}, {score}", out.stdout)
        if not rows:
            continue
        cells = [c.strip() for c in rows[0].strip().strip("|").split("|")]
        f32, mode = vec("f32", score), vec(file, score)
        mean = f32.mean()
        noise = np.sqrt(np.mean(np.diff(f32) ** 2))
        change = np.sqrt(np.mean((mode - f32) ** 2))
        what = f"{label}, {score}"
        check(close(float(cells[2]), mean, 1e-4), f"{what}: float32's mean", (cells[2], mean))
        check(close(float(cells[3]), noise, 1e-3), f"{what}: float32 seed to seed",
              (cells[3], noise))
        check(close(float(cells[4]), change, 1e-3), f"{what}: the mode's change",
              (cells[4], change))
        if noise > 0:
            check(abs(float(cells[5]) - change / noise) <= 5e-4 + 1e-3 * change / noise,
                  f"{what}: ratio", (cells[5], change / noise))
        verdict = "within" if change < noise else "no change" if change == 0 else "missed"
        check(cells[6] == verdict, f"{what}: verdict", (cells[6], verdict))
# the table cannot pass by ignoring the modes or the seeds
check(np.all(np.diff(vec("f32", "CRPS")) != 0), "float32's CRPS moves from seed to seed")
for label, file in MODES:
    if file != "kv_bf16":  # tiny's KV in BF16 may leave four origins' paths alike
        check(np.any(vec(file, "CRPS") != vec("f32", "CRPS")), f"{label}: its CRPS moves")

# --eval-modes: the modes named alone, each row as in the run of every mode
some = subprocess.run([bench, "--model", model, "--csv", csv, "--agreement", "--eval-only",
                       "--eval-seeds", str(SEEDS), "--eval-origins", str(ORIGINS),
                       "--eval-samples", str(SAMPLES), "--eval-modes", "kv_bf16,weights_int8"],
                      capture_output=True, text=True)
rows_of = lambda text: [l for l in text.splitlines() if l.startswith("| ") and "---" not in l
                        and not l.startswith("| mode |")]
want = [l for l in rows_of(out.stdout) if l.startswith(("| kv bf16 |", "| weights int8 |"))]
check(some.returncode == 0 and rows_of(some.stdout) == want,
      "--eval-modes kv_bf16,weights_int8: those rows alone, the same", some.stdout + some.stderr)
bad = subprocess.run([bench, "--model", model, "--csv", csv, "--agreement", "--eval-only",
                      "--eval-modes", "kv_bf16,int4"], capture_output=True, text=True)
check(bad.returncode != 0 and "--eval-modes: no mode 'int4'" in bad.stderr,
      "--eval-modes with an unknown mode refused, named", bad.stderr)

# the dumped scores are kronosd evaluate's on the same request
for file, weights, seed in (("f32", "f32", 1), ("f32", "f32", 2), ("weights_bf16", "bf16", 3)):
    cli = subprocess.run([kronosd, "evaluate", "--model", model, "--weights", weights,
                          "--compact", "--field", "lookback=256", "--field", "horizon=8",
                          "--field", "stride=8", "--field", f"samples={SAMPLES}",
                          "--field", f"seed={seed}", "--field",
                          f"last_origin={256 + 8 * (ORIGINS - 1)}", "--field",
                          "quantiles=0.05,0.1,0.5,0.9,0.95", csv], capture_output=True, text=True)
    check(cli.returncode == 0, f"kronosd evaluate {weights} seed {seed} runs", cli.stderr)
    if cli.returncode:
        continue
    ov = json.loads(cli.stdout)["model"]["overall"]
    want = {"CRPS": ov["crps"], "MAE": ov["mae"], "coverage 0.05-0.95": ov["coverage"]["0.05-0.95"],
            "coverage 0.1-0.9": ov["coverage"]["0.1-0.9"]}
    for score in SCORES:
        got = scores[(file, seed, score)]
        check(close(got, want[score], 1e-6), f"{file} seed {seed} {score}: kronosd evaluate's",
              (got, want[score]))
finish()
