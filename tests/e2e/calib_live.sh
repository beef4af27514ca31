#!/usr/bin/env bash
# calib_live.sh — a candle session that calibrates its own forecasts, end to end:
#   * created with "calibration": "online", it is given the first half of kline_5min.csv and
#     then N candles of the second half one at a time, a forecast before each; every
#     calibrated quantile and P(up), every append's anomalies and the GET's running coverage,
#     PIT KS and Brier are recomputed with numpy from the answers' raw paths
#     (calib_live_check.py); with N the whole second half (CALIB_LIVE_FULL=1, or
#     bench/series/calib_live.sh), the 80% band's running coverage ends within 0.06 of 0.80;
#   * the daemon killed and restarted on the same state-dir, twice (before and after an
#     append): the session's GET calibration and its forecast are the same bytes as before
#     (usage aside), so the journal's kept forecasts and appends replay to the same state;
#   * refusals: a bad "calibration" at creation, a forecast that brings its own calibration or
#     another horizon, naming the field; /metrics counts the appended candles checked and
#     flagged (kronosd_anomalies_total{source="append"}).
# Usage: calib_live.sh KRONOSD SRC_DIR [N]
set -uo pipefail
KRONOSD=$1
SRC=$2
N=${3:-160}
[ -n "${CALIB_LIVE_FULL:-}" ] && N=1250
. "$SRC/tests/e2e/lib.sh"

if [ -z "$NP_PY" ]; then
    echo "no Python with numpy here: skipped"
    exit 77
fi

STATE="$WORK/state"
start_daemon one --state-dir "$STATE" --workers 1
U=$URL_one

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))[:40]
d = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    d[k] = [float(r[k]) for r in rows]
for name, cal in (("bad_mode", "offline"), ("bad_type", 3), ("bad_object", {"format": "x"})):
    json.dump({"candles": d, "calibration": cal}, open(f"{sys.argv[2]}/{name}.json", "w"))
json.dump({"candles": d, "calibration": "online"}, open(f"{sys.argv[2]}/small.json", "w"))
PYEOF

http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/bad_mode.json"
expect "calibration \"offline\": 400 naming it" 400 \
    'd["error"]["message"].startswith("calibration: must be \"online\"")'
http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/bad_type.json"
expect "calibration 3: 400 naming it" 400 'd["error"]["message"].startswith("calibration")'
http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/bad_object.json"
expect "a malformed calibration object: 400 naming its field" 400 \
    'd["error"]["message"].startswith("calibration.")'

http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/small.json"
expect "a small calibrated session" 201 'd["calibration"]["resolved"] == 0'
SMALL=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http POST "$U/sessions/$SMALL/forecast" -H 'Content-Type: application/json' \
    -d '{"horizon": 4, "samples": 4, "calibration": {"format": "kronosd-calibration"}}'
expect "a forecast with its own calibration: 400 naming it" 400 \
    'd["error"]["message"].startswith("calibration")'
http POST "$U/sessions/$SMALL/forecast" -H 'Content-Type: application/json' \
    -d '{"horizon": 4, "samples": 4}'
expect "the first forecast sets the shape" 200 \
    'd["calibrated"] is True and sorted(d["quantiles"]) == ["0.1", "0.5", "0.9"]'
http POST "$U/sessions/$SMALL/forecast" -H 'Content-Type: application/json' \
    -d '{"horizon": 5, "samples": 4}'
expect "another horizon: 400 naming horizon" 400 \
    'd["error"]["message"].startswith("horizon: must be 4")'

flag0=$(metric "$U" 'kronosd_anomalies_total{source="append"}')
check0=$(metric "$U" 'kronosd_anomaly_checks_total{source="append"}')
if out=$("$NP_PY" "$SRC/tests/e2e/calib_live_check.py" "$U" "$SRC/tests/data/kline_5min.csv" \
    "$N" "$WORK/live.json" 2>&1); then
    echo "$out" | grep -v '^coverage' | sed 's/^/     /'
    pass "numpy: $N candles appended one at a time, every calibrated number recomputed"
else
    echo "$out" | sed 's/^/     /'
    fail "numpy"
fi
COV=$(echo "$out" | sed -n 's/^coverage //p')
if [ "$N" -ge 1250 ]; then
    if "$PY" -c "import sys; sys.exit(0 if abs(float('$COV') - 0.8) <= 0.06 else 1)"; then
        pass "the whole second half: 80% band's running coverage $COV, within 0.06 of 0.80"
    else
        fail "the whole second half: 80% band's running coverage $COV, not within 0.06 of 0.80"
    fi
fi

# every appended candle was covered by the forecast made before it (step 1)
flag1=$(metric "$U" 'kronosd_anomalies_total{source="append"}')
check1=$(metric "$U" 'kronosd_anomaly_checks_total{source="append"}')
if [ -n "$check0" ] && [ $((check1 - check0)) -eq "$N" ] && [ $((flag1 - flag0)) -gt 0 ] &&
    [ $((flag1 - flag0)) -le "$N" ]; then
    pass "metrics: append checks +$((check1 - check0)), flagged +$((flag1 - flag0))"
else
    fail "metrics: append checks $check0 -> $check1, flagged $flag0 -> $flag1 (N $N)"
fi

# ---- restarts: the same calibration, the same forecast bytes -------------------------------
[ -f "$WORK/live.json" ] || { fail "restarts: no live session to restart"; summary; exit 1; }
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$WORK/live.json")
REQ=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["request"]; r["seed"]=99; print(json.dumps(r))' "$WORK/live.json")
calib_of() { # the GET's calibration, keys sorted
    http GET "$U/sessions/$SID"
    [ "$STATUS" = 200 ] || fail "GET /sessions/$SID: status $STATUS"
    "$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["calibration"], sort_keys=True))' "$BODY" >"$1"
}
strip_usage() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage",None); print(json.dumps(d,sort_keys=True))' "$1"
}
forecast_to() {
    http POST "$U/sessions/$SID/forecast" -H 'Content-Type: application/json' -d "$REQ"
    [ "$STATUS" = 200 ] || fail "forecast: status $STATUS"
    strip_usage "$BODY" >"$1"
}
restart() { # kill the daemon (no clean stop) and start NAME on the same state-dir
    kill -KILL "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    start_daemon "$1" --state-dir "$STATE" --workers 1
    U=$(eval echo "\$URL_$1")
    PID=$(eval echo "\$PID_$1")
}
same_file() {
    if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$(diff <(head -c 400 "$2") <(head -c 400 "$3"))"; fi
}
PID=$PID_one
calib_of "$WORK/cal1"
forecast_to "$WORK/f1"
restart two
calib_of "$WORK/cal2"
same_file "restart: GET calibration the same" "$WORK/cal1" "$WORK/cal2"
forecast_to "$WORK/f2"
same_file "restart: the forecast the same bytes (usage aside)" "$WORK/f1" "$WORK/f2"
"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" "$N" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
i = len(rows) // 2 + int(sys.argv[3])
r = rows[i] if i < len(rows) else dict(rows[-1], timestamps="2030-01-01T00:00:00")
d = {"timestamps": [r["timestamps"]]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    d[k] = [float(r[k])]
json.dump({"candles": d}, open(sys.argv[2] + "/next.json", "w"))
PYEOF
http POST "$U/sessions/$SID/candles" -H 'Content-Type: application/json' --data-binary @"$WORK/next.json"
expect "after the restart an append resolves the kept forecasts" 200 \
    'len(d["anomalies"]) == 1 and d["anomalies"][0]["step"] == 1'
calib_of "$WORK/cal3"
if ! cmp -s "$WORK/cal2" "$WORK/cal3"; then pass "the append moved the running statistics"; else
    fail "the append left the running statistics as they were"; fi
forecast_to "$WORK/f3"
restart three
calib_of "$WORK/cal4"
same_file "a second restart (the append replayed): GET calibration the same" "$WORK/cal3" "$WORK/cal4"
forecast_to "$WORK/f4"
same_file "a second restart: the forecast the same bytes (usage aside)" "$WORK/f3" "$WORK/f4"
summary
