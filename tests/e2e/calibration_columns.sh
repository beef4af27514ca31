#!/usr/bin/env bash
# calibration_columns.sh — open, high and low calibrated beside close, end to end
# (calibration_columns_check.py reads the whole answers):
#   * numpy: a rolling walk-forward's column shifts, each origin's calibrated column
#     quantiles (from the outcomes before it only), each column's raw and calibrated
#     coverage per band and step, and the fitted object's column shifts, recomputed from each
#     origin's paths (the /forecast of its window) and the candles;
#   * bytes: /forecast with the fitted object answers, for open, high and low, the calibrated
#     quantiles /evaluate answers for that origin with it;
#   * versions: a version 1 object (no columns) still calibrates close only; a version 1
#     object with columns, or a column of the wrong size, is a 400 naming the field.
# Usage: calibration_columns.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))[:700]
d = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    d[k] = [float(r[k]) for r in rows]
json.dump(d, open(sys.argv[2] + "/series.json", "w"))
PYEOF

start_daemon main --workers 1 --compute-threads 1 --max-request-cost 100000
U=$URL_main

run_check() {
    local out
    if out=$("$2" "$SRC/tests/e2e/calibration_columns_check.py" "$U" "$1" "$WORK" 2>&1); then
        echo "$out" | sed 's/^/     /'
        pass "$1: $(echo "$out" | grep -c '^ok') checks"
    else
        echo "$out" | sed 's/^/     /'
        fail "$1"
    fi
}
if [ -n "$NP_PY" ]; then run_check numpy "$NP_PY"; else skip "numpy: no Python with numpy"; fi
run_check bytes "$PY"
run_check versions "$PY"
summary
