#!/usr/bin/env bash
# calibration.sh — calibration end to end (calibration_check.py reads the whole answers):
#   * targets: a rolling walk-forward over the whole example series (lookback 128, horizon 8,
#     stride 4, 16 paths) covers every symmetric band within 0.05 of its level, halves the
#     PIT KS distance at least, keeps CRPS within 2% and Brier no worse than the raw model's;
#     the first half's object covers the second half within 0.10;
#   * numpy: every calibrated number recomputed from the by_origin detail (skipped when no
#     Python here has numpy);
#   * bytes: /forecast, a "series" item and a session forecast with an object answer the
#     calibrated close /evaluate answers for that origin with it, number for number;
#   * refusals: malformed and mismatched objects, 400 naming the field; format=csv;
#   * kronosd evaluate and kronosd forecast take the object too; kronosd evaluate --table
#     prints the raw and calibrated scores side by side.
# Usage: calibration.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

series_json

start_daemon main --workers 1 --compute-threads 1 --max-request-cost 100000
U=$URL_main

CHECK="$SRC/tests/e2e/calibration_check.py"
run_check() { check_part "$CHECK" "$1" "$2"; }
run_check targets "$PY"
numpy_part "$CHECK" numpy
run_check bytes "$PY"
run_check refusals "$PY"

# format=csv cannot carry the calibrated close
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); o=json.load(open(sys.argv[2]))["calibration"]; print(json.dumps({"candles": {k: v[:128] for k, v in d.items()}, "horizon": 8, "samples": 16, "calibration": o}))' \
    "$WORK/series.json" "$WORK/first_half.json" >"$WORK/fc.json"
http POST "$U/forecast?format=csv" --data-binary @"$WORK/fc.json"
expect "format=csv with a calibration: 400" 400 'd["error"]["message"].startswith("format: ")'

# the one-shot commands take the object as the server does
http POST "$U/forecast" --data-binary @"$WORK/fc.json"
cp "$BODY" "$WORK/fc_server.json"
"$KRONOSD" forecast --model "$MODEL" --compact "$WORK/fc.json" >"$WORK/fc_cli.json" 2>"$WORK/cli.err"
if "$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); [d.pop("usage") for d in (a, b)]; sys.exit(a != b or b.get("calibrated") is not True)' \
    "$WORK/fc_server.json" "$WORK/fc_cli.json"; then pass "kronosd forecast with an object answers what POST /forecast does"
else fail "kronosd forecast with an object answers what POST /forecast does" "$(head -c 300 "$WORK/cli.err")"; fi
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"candles": {k: v[:600] for k, v in d.items()}, "lookback": 128, "horizon": 8, "stride": 8, "samples": 4, "calibration": "rolling", "calibration_warmup": 10}))' \
    "$WORK/series.json" >"$WORK/ev_cli.json"
"$KRONOSD" evaluate --model "$MODEL" --compact "$WORK/ev_cli.json" >"$WORK/ev_cli.out" 2>"$WORK/cli.err"
http POST "$U/evaluate" --data-binary @"$WORK/ev_cli.json"
if "$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); [d.pop("usage") for d in (a, b)]; sys.exit(a != b or "calibrated" not in a)' \
    "$WORK/ev_cli.out" "$BODY"; then pass "kronosd evaluate with calibration rolling answers what POST /evaluate does"
else fail "kronosd evaluate with calibration rolling answers what POST /evaluate does" "$(head -c 300 "$WORK/cli.err")"; fi
# --table: the overall scores, raw beside calibrated, as the JSON answer has them
"$KRONOSD" evaluate --model "$MODEL" --table "$WORK/ev_cli.json" >"$WORK/ev_table.out" 2>"$WORK/cli.err"
if "$PY" - "$WORK/ev_table.out" "$WORK/ev_cli.out" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
r = json.load(open(sys.argv[2]))
rows = {l.split()[0]: l.split()[1:] for l in lines[2:7]}
def same(cell, v):
    return cell == "-" if v is None else abs(float(cell) - v) <= 1e-4 * max(1, abs(v))
ok = list(rows) == ["model", "persistence", "random_walk", "model_scored", "calibrated"]
for name in ("model_scored", "calibrated"):
    o = r[name]["overall"]
    ok = ok and same(rows[name][0], o["mae"]) and same(rows[name][4], o["brier"]) \
        and same(rows[name][-1], o["coverage"]["0.1-0.9"])
ok = ok and f"calibrated {r['pit_ks']['calibrated']:.4g}" in lines[-1]
sys.exit(0 if ok else 1)
PYEOF
then pass "kronosd evaluate --table: raw and calibrated side by side, the answer's numbers"
else fail "kronosd evaluate --table: raw and calibrated side by side, the answer's numbers" "$(cat "$WORK/ev_table.out" "$WORK/cli.err")"; fi
"$PY" -c 'import json,sys; o=json.load(open(sys.argv[1])); o["calibration"]["model"]="0"*16; json.dump(o, open(sys.argv[1], "w"))' "$WORK/fc.json"
"$KRONOSD" forecast --model "$MODEL" "$WORK/fc.json" >/dev/null 2>"$WORK/cli.err"
if [ $? -eq 1 ] && grep -q "calibration.model" "$WORK/cli.err"; then pass "kronosd forecast: another model's object is exit 1 naming calibration.model"
else fail "kronosd forecast: another model's object is exit 1 naming calibration.model" "$(cat "$WORK/cli.err")"; fi
summary
