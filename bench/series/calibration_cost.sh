#!/usr/bin/env bash
# calibration_cost.sh — what calibration adds to a walk-forward evaluation: the same
# evaluation of tests/data/kline_5min.csv (lookback 128, horizon 8, stride 4, 16 samples:
# about 590 origins) with "calibration": "none" and "rolling", alternating, by the
# evaluation's own usage.elapsed_ms (kronosd evaluate, no server), in one run; then what a
# calibration object adds to one forecast's answer, and a live session's own work per
# forecast and candle (kronos-calib-bench, calib_bench.c; built with the bench feature).
#
#   bench/series/calibration_cost.sh [BUILD_DIR] [MODEL_DIR] [RUNS]
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-tests/data/tiny}
RUNS=${3:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-calcost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
python3 - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, rows = rows[0], rows[1:]
c = {"timestamps": [r[0] for r in rows], **{h: [float(r[i]) for r in rows] for i, h in enumerate(hdr[1:], 1)}}
for mode in ("none", "rolling"):
    json.dump({"candles": c, "lookback": 128, "horizon": 8, "stride": 4, "samples": 16,
               "seed": 1, "calibration": mode}, open(f"{sys.argv[2]}/{mode}.json", "w"))
PYEOF
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
echo "CPU: $CPU, family $(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[^:]*: //p' /proc/cpuinfo | sed -n 1p); model: $MODEL"
for _ in $(seq 1 "$RUNS"); do
    for mode in none rolling; do
        "$BUILD/kronosd" evaluate --model "$MODEL" --compact "$WORK/$mode.json" >"$WORK/$mode.out" || exit 1
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d["origins"], d["usage"]["elapsed_ms"])' \
            "$WORK/$mode.out" "$mode" >>"$WORK/times"
    done
done
python3 - "$WORK/times" <<'PYEOF'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    mode, origins, ms = line.split()
    t.setdefault(mode, []).append(float(ms))
a, b = statistics.median(t["none"]), statistics.median(t["rolling"])
print(f"{origins} origins: none {a:.1f} ms, rolling {b:.1f} ms (medians of {len(t['none'])}): "
      f"calibration adds {100 * (b - a) / a:+.2f}% (target < 2%)")
PYEOF
if [ -x "$BUILD/bench/kronos-calib-bench" ]; then
    "$BUILD/bench/kronos-calib-bench" "$MODEL" "$SRC/tests/data/kline_5min.csv" 7 2000
else
    echo "no $BUILD/bench/kronos-calib-bench (the bench feature is off): the forecast's cost not measured"
fi
