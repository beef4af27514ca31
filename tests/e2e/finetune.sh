#!/usr/bin/env bash
# finetune.sh — kronosd finetune end to end on the example series with tests/data/tiny:
#   * the run writes DIR/tokenizer, DIR/predictor and DIR/finetune.json, the checkpoint loads
#     for a forecast (kronosd forecast --model DIR);
#   * the gate: the base's and the tuned model's walk-forward scores on the held-out part each
#     equal kronosd evaluate of that model, and the verdict follows them;
#   * finetune_check.py: the released layout against the base's, the bookkeeping, lower losses,
#     the validation loss recomputed with numpy (skipped when no Python here has numpy);
#   * the same checkpoint bytes at KRONOS_THREADS=1 and 2 and with the lower kernel levels,
#     and from the same series given as JSON candles;
#   * refusals: no --csv, an unknown option, a bad --s2-condition (usage, exit 2), a depth
#     above n_layers, a series too short for one window (exit 1, naming the field).
# Usage: finetune.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
CSV="$SRC/tests/data/kline_5min.csv"
ARGS=(--model "$MODEL" --csv "$CSV" --steps 30 --batch 8 --lookback 48 --predict 8 --lr 1e-3
      --seed 3 --eval-every 10 --s2-condition sampled)

run() { # run NAME ENV...: kronosd finetune into $WORK/NAME
    local name=$1
    shift
    env "$@" "$KRONOSD" finetune "${ARGS[@]}" --out "$WORK/$name" >"$WORK/$name.out" 2>"$WORK/$name.err"
}

if run t2 KRONOS_THREADS=2; then pass "kronosd finetune: exit 0"
else fail "kronosd finetune: exit 0" "$(tail -3 "$WORK/t2.err")"; fi
if [ -f "$WORK/t2/predictor/model.safetensors" ] && [ -f "$WORK/t2/tokenizer/config.json" ] &&
    [ -f "$WORK/t2/finetune.json" ]; then pass "DIR/tokenizer, DIR/predictor, DIR/finetune.json"
else fail "DIR/tokenizer, DIR/predictor, DIR/finetune.json"; fi
if "$KRONOSD" forecast --model "$WORK/t2" --field horizon=4 --compact "$CSV" >"$WORK/fc.json" 2>&1 &&
    jq_ok 'len(d["mean"]["close"]) == 4' "$WORK/fc.json"; then pass "the checkpoint forecasts"
else fail "the checkpoint forecasts" "$(head -c 300 "$WORK/fc.json")"; fi

# the gate: each side equals kronosd evaluate of that model with the gate's request
"$PY" - "$CSV" "$WORK/t2/finetune.json" "$WORK/gate_req.json" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
g = json.load(open(sys.argv[2]))["gate"]["series"][0]
d = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    d[k] = [float(r[k]) for r in rows]
json.dump({"candles": d, "lookback": 48, "horizon": 8, "first_origin": g["first_origin"],
           "stride": g["stride"], "samples": 8, "seed": 3}, open(sys.argv[3], "w"))
PYEOF
"$KRONOSD" evaluate --model "$MODEL" "$WORK/gate_req.json" >"$WORK/gate_base.json" 2>&1
"$KRONOSD" evaluate --model "$WORK/t2" "$WORK/gate_req.json" >"$WORK/gate_tuned.json" 2>&1
if "$PY" - "$WORK/t2/finetune.json" "$WORK/gate_base.json" "$WORK/gate_tuned.json" <<'PYEOF'
import json, sys
gate = json.load(open(sys.argv[1]))["gate"]
g = gate["series"][0]
ok = True
for side, path in (("base", sys.argv[2]), ("tuned", sys.argv[3])):
    e = json.load(open(path))
    for key in ("crps", "direction_accuracy"):
        a, b = g[side][key], e["model"]["overall"][key]
        ok &= abs(a - b) <= 1e-6 * max(abs(b), 1e-12)
    ok &= g[side]["origins"] == e["origins"]
ok &= gate["tuned_better_crps"] == (g["tuned"]["crps"] < g["base"]["crps"])
ok &= gate["tuned_better_direction"] == (g["tuned"]["direction_accuracy"] > g["base"]["direction_accuracy"])
sys.exit(0 if ok else 1)
PYEOF
then pass "the gate: base and tuned each equal kronosd evaluate of that model"
else fail "the gate: base and tuned each equal kronosd evaluate of that model"; fi
if grep -q "the base on CRPS" "$WORK/t2.out"; then pass "the gate's verdict printed"
else fail "the gate's verdict printed" "$(cat "$WORK/t2.out")"; fi

if [ -n "$NP_PY" ]; then
    if "$NP_PY" "$SRC/tests/e2e/finetune_check.py" "$MODEL" "$WORK/t2" "$CSV" >"$WORK/check.out" 2>&1
    then pass "finetune_check.py: layout, bookkeeping, numpy validation losses"
    else fail "finetune_check.py" "$(grep -E 'FAIL|Error' "$WORK/check.out" | head -5)"; fi
else skip "numpy: no Python with numpy"; fi

# the same bytes: a shorter run (the portable kernels are slow) at 2 threads, at 1, and at
# each lower kernel level (a level the CPU lacks falls back to the best it has)
ARGS=(--model "$MODEL" --csv "$CSV" --steps 4 --batch 4 --lookback 48 --predict 8 --lr 1e-3
      --seed 5 --eval-every 2 --validation-share 0.05)
run d2 KRONOS_THREADS=2
for v in "KRONOS_THREADS=1" "KRONOS_SIMD=avx2" "KRONOS_SIMD=generic"; do
    run other "$v"
    if cmp -s "$WORK/d2/predictor/model.safetensors" "$WORK/other/predictor/model.safetensors" &&
        cmp -s <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["loss"], d["validation"])' "$WORK/d2/finetune.json") \
               <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["loss"], d["validation"])' "$WORK/other/finetune.json")
    then pass "$v: the same checkpoint bytes and losses"
    else fail "$v: the same checkpoint bytes and losses"; fi
    rm -rf "$WORK/other"
done
# the same series as JSON candles (rows): the same run
"$PY" - "$CSV" "$WORK/series.json" <<'PYEOF'
import csv, json, sys
rows = [{"timestamp": r["timestamps"], **{k: float(r[k]) for k in ("open", "high", "low", "close", "volume", "amount")}}
        for r in csv.DictReader(open(sys.argv[1]))]
json.dump({"candles": rows}, open(sys.argv[2], "w"))
PYEOF
ARGS=("${ARGS[@]/$CSV/$WORK/series.json}")
run other KRONOS_THREADS=2
if cmp -s "$WORK/d2/predictor/model.safetensors" "$WORK/other/predictor/model.safetensors" &&
    jq_ok 'd["settings"]["csv"][0].endswith("series.json")' "$WORK/other/finetune.json"
then pass "JSON candles: the same checkpoint as the CSV's"
else fail "JSON candles: the same checkpoint as the CSV's" "$(tail -2 "$WORK/other.err")"; fi
ARGS=(--model "$MODEL" --csv "$CSV" --steps 30 --batch 8 --lookback 48 --predict 8)

refuse() { # refuse NAME STATUS PATTERN ARGS...
    local name=$1 want=$2 pat=$3
    shift 3
    "$KRONOSD" finetune "$@" >"$WORK/r.out" 2>"$WORK/r.err"
    local got=$?
    if [ "$got" = "$want" ] && grep -q -- "$pat" "$WORK/r.err"; then pass "$name"
    else fail "$name" "exit $got: $(head -3 "$WORK/r.err")"; fi
}
refuse "no --csv: usage" 2 "are required" --model "$MODEL" --out "$WORK/x"
refuse "an unknown option: usage" 2 "unknown option" "${ARGS[@]}" --out "$WORK/x" --epoch 2
refuse "a bad --s2-condition: usage" 2 "s2-condition" "${ARGS[@]}" --out "$WORK/x" --s2-condition greedy
refuse "depth above n_layers: refused naming it" 1 "depth: must be in \[0, 2\]" "${ARGS[@]}" --out "$WORK/x" --depth 3
head -60 "$CSV" >"$WORK/short.csv"
refuse "a series too short: refused naming it" 1 "series: no training window" --model "$MODEL" \
    --csv "$WORK/short.csv" --out "$WORK/x" --lookback 48 --predict 8
summary
