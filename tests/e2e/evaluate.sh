#!/usr/bin/env bash
# evaluate.sh — POST /evaluate end to end (evaluate_check.py reads the whole answers):
#   * window mode: every origin equals /forecast of its window with the actual timestamps;
#   * live mode: every origin equals a candle session's forecast (created with the first
#     window, appended up to the origin), past max_context too;
#   * a text/csv body with the fields in the query answers as the JSON body does;
#   * Accept: text/event-stream: progress events, then the same result; a deadline mid-stream
#     is an error event; a client leaving mid-stream cancels the work; a forecast sent during
#     a long evaluation is served between its origins;
#   * every score recomputed with numpy (skipped when no Python here has numpy);
#   * refusals: missing and unknown fields, a bad mode, normalization in window mode,
#     origins out of range, format=csv, too_large (max-request-cost), the deadline;
#   * the metrics label "evaluate".
# Usage: evaluate.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

# 300 candles of the example series, columnar
series_json 300
"$PY" - "$WORK/series.json" "$WORK" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
def dump(name, **extra):
    body = {"candles": d, "lookback": 64, "horizon": 4}
    body.update(extra)
    json.dump({k: v for k, v in body.items() if v is not None}, open(f"{sys.argv[2]}/{name}.json", "w"))
dump("no_lookback", lookback=None)
dump("unknown", pred_len=4)
dump("bad_mode", mode="rolling")
dump("norm_window", normalization={"mean": {k: 1 for k in d if k != "timestamps"},
                                   "std": {k: 1 for k in d if k != "timestamps"}})
dump("early_origin", first_origin=10)
dump("late_origin", last_origin=297)
dump("costly", stride=1, samples=200, horizon=16)
dump("slow", stride=1, samples=100, horizon=16, timeout_ms=50)
PYEOF

start_daemon main --workers 1 --compute-threads 1 --max-request-cost 100000
U=$URL_main

CHECK="$SRC/tests/e2e/evaluate_check.py"
run_check() { check_part "$CHECK" "$1" "$2"; }
run_check window "$PY"
run_check live "$PY"
run_check csv "$PY"
run_check stream "$PY"
# a client that leaves mid-stream cancels the evaluation
C0=$(metric "$U" kronosd_requests_cancelled_total 2>/dev/null)
curl -s -m 0.5 -N -o /dev/null "$U/evaluate" -H 'Accept: text/event-stream' --data-binary @"$WORK/costly.json"
if wait_metric "$U" kronosd_requests_cancelled_total $((C0 + 1)) 2>/dev/null; then
    pass "a client leaving mid-stream cancels the evaluation"
else fail "a client leaving mid-stream cancels the evaluation" "cancelled: $C0 -> $(metric "$U" kronosd_requests_cancelled_total)"; fi
http GET "$U/health"
expect "the server answers after it" 200
# a long evaluation holds one place in the queue: a forecast sent meanwhile is served
# between its origins, not refused as overloaded (then the client leaves)
curl -s -m 60 -N -o /dev/null "$U/evaluate" -H 'Accept: text/event-stream' --data-binary @"$WORK/costly.json" &
EVAL_PID=$!
sleep 0.5
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"candles": {k: v[:100] for k, v in d.items()}, "horizon": 4}))' \
    "$WORK/series.json" >"$WORK/small_forecast.json"
http POST "$U/forecast" --data-binary @"$WORK/small_forecast.json"
if kill -0 "$EVAL_PID" 2>/dev/null; then
    expect "a forecast during a long evaluation is served" 200 'd["horizon"] == 4'
else fail "a forecast during a long evaluation is served" "the evaluation ended first"; fi
kill "$EVAL_PID" 2>/dev/null
wait "$EVAL_PID"
numpy_part "$CHECK" numpy

http POST "$U/evaluate" --data-binary @"$WORK/no_lookback.json"
expect "lookback missing: 400 naming it" 400 'd["error"]["message"].startswith("lookback: missing")'
http POST "$U/evaluate" --data-binary @"$WORK/unknown.json"
expect "an upstream field name: 400 naming ours" 400 '"pred_len" in d["error"]["message"]'
http POST "$U/evaluate" --data-binary @"$WORK/bad_mode.json"
expect "mode rolling: 400" 400 'd["error"]["message"].startswith("mode: ")'
http POST "$U/evaluate" --data-binary @"$WORK/norm_window.json"
expect "normalization in window mode: 400" 400 'd["error"]["message"].startswith("normalization: ")'
http POST "$U/evaluate" --data-binary @"$WORK/early_origin.json"
expect "first_origin before lookback candles: 400" 400 'd["error"]["message"].startswith("first_origin: ")'
http POST "$U/evaluate" --data-binary @"$WORK/late_origin.json"
expect "last_origin without horizon actuals: 400" 400 'd["error"]["message"].startswith("last_origin: ")'
head -40 "$SRC/tests/data/kline_5min.csv" >"$WORK/short.csv"
http POST "$U/evaluate?lookback=8&horizon=2&stride=1e3" -H "Content-Type: text/csv" \
    --data-binary @"$WORK/short.csv"
expect "stride=1e3 in the query: 400 showing a real" 400 \
    'd["error"]["message"] == "stride: must be an integer >= 1, got 1000.0"'
http POST "$U/evaluate?format=csv" --data-binary @"$WORK/early_origin.json"
expect "format=csv: 400" 400
http POST "$U/evaluate" --data-binary @"$WORK/slow.json"
expect "timeout_ms 50 on a long evaluation: 504" 504 'd["error"]["code"] == "deadline_exceeded"'

start_daemon small --workers 1 --compute-threads 1 --max-request-cost 1
http POST "$URL_small/evaluate" --data-binary @"$WORK/costly.json"
expect "233 origins over max-request-cost 1 together: 422 too_large" 422 \
    'd["error"]["code"] == "too_large" and "origins" in d["error"]["message"]'

# kronosd evaluate: the one-shot command answers what the server does
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"candles": d, "lookback": 64, "horizon": 4, "stride": 40, "samples": 4, "seed": 3, "quantiles": [0.1, 0.25, 0.5, 0.75, 0.9]}))' \
    "$WORK/series.json" >"$WORK/cli.json"
"$KRONOSD" evaluate --model "$MODEL" --compact "$WORK/cli.json" >"$WORK/cli.out" 2>"$WORK/cli.err"
if "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); [d.pop(k, None) for d in (a, b) for k in ("usage", "by_origin")]; sys.exit(a != b)' \
    "$WORK/cli.out" "$WORK/window.out"; then pass "kronosd evaluate answers what POST /evaluate does"
else fail "kronosd evaluate answers what POST /evaluate does" "$(head -c 300 "$WORK/cli.err" "$WORK/cli.out")"; fi
# the same from the candles as CSV, the other fields as --field (a text/csv body's query)
head -301 "$SRC/tests/data/kline_5min.csv" >"$WORK/cli.csv"
"$KRONOSD" evaluate --model "$MODEL" --compact "$WORK/cli.csv" --field lookback=64 --field horizon=4 \
    --field stride=40 --field samples=4 --field seed=3 --field quantiles=0.1,0.25,0.5,0.75,0.9 \
    >"$WORK/cli_csv.out" 2>"$WORK/cli.err"
if "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); [d.pop(k, None) for d in (a, b) for k in ("usage", "by_origin")]; sys.exit(a != b)' \
    "$WORK/cli_csv.out" "$WORK/window.out"; then pass "kronosd evaluate CANDLES.csv --field ...: the same answer"
else fail "kronosd evaluate CANDLES.csv --field ...: the same answer" "$(head -c 300 "$WORK/cli.err" "$WORK/cli_csv.out")"; fi
"$KRONOSD" evaluate --model "$MODEL" "$WORK/cli.csv" --field lookbak=64 >/dev/null 2>"$WORK/cli.err"
if [ $? -eq 1 ] && grep -q 'lookbak' "$WORK/cli.err"; then pass "kronosd evaluate: an unknown --field is exit 1 naming it"
else fail "kronosd evaluate: an unknown --field is exit 1 naming it" "$(cat "$WORK/cli.err")"; fi
echo '{"candles": {"timestamps": [1, 2], "open": [1, 1], "high": [1, 1], "low": [1, 1], "close": [1, 1]}, "horizon": 1}' >"$WORK/cli_bad.json"
"$KRONOSD" evaluate --model "$MODEL" "$WORK/cli_bad.json" >/dev/null 2>"$WORK/cli.err"
if [ $? -eq 1 ] && grep -q "lookback: missing" "$WORK/cli.err"; then pass "kronosd evaluate: a bad request is exit 1 naming the field"
else fail "kronosd evaluate: a bad request is exit 1 naming the field" "$(cat "$WORK/cli.err")"; fi

METRICS=$(curl -sS "$U/metrics")
if grep -q 'endpoint="evaluate"' <<<"$METRICS"; then pass "metrics label evaluate"; else
    fail "metrics label evaluate"; fi
summary
