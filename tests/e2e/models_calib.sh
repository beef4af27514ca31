#!/usr/bin/env bash
# models_calib.sh — candle sessions that calibrate themselves on a model that is not the
# default, end to end:
#   * a calibration object fitted by POST /evaluate on each of two models names that
#     model's fingerprint; a session created on one model takes that model's object and
#     refuses the other's (400 naming calibration.model), whichever model is the default;
#   * an online session on the second model: after forecasts and appends, its forecasts'
#     calibration names the second model's fingerprint;
#   * the daemon killed and restarted on the same state-dir: the journal's creation records
#     (naming the model) and calibration records replay, so both sessions answer GET and a
#     forecast with the same bytes as before (usage aside) and still name their model.
# Usage: KR_MKMODEL=PATH models_calib.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

make_model wide
STATE="$WORK/state"
start_daemon one --model "wide=$WORK/wide" --state-dir "$STATE" --workers 1
U=$URL_one
PID=$PID_one

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def cols(rs):
    d = {"timestamps": [r["timestamps"] for r in rs]}
    for k in ("open", "high", "low", "close", "volume", "amount"):
        d[k] = [float(r[k]) for r in rs]
    return d
for m in ("tiny", "wide"):
    json.dump({"model": m, "candles": cols(rows[:400]), "lookback": 96, "horizon": 4,
               "stride": 8, "samples": 4, "calibration": "rolling", "calibration_warmup": 10},
              open(f"{sys.argv[2]}/ev_{m}.json", "w"))
json.dump({"model": "wide", "candles": cols(rows[:200]), "calibration": "online"},
          open(f"{sys.argv[2]}/online.json", "w"))
for i in range(6):
    json.dump({"candles": cols(rows[200 + i:201 + i])}, open(f"{sys.argv[2]}/next{i}.json", "w"))
json.dump({"candles": cols(rows[:200])}, open(f"{sys.argv[2]}/candles.json", "w"))
PYEOF

# each model's fingerprint, as its rolling evaluation's object names it
for m in tiny wide; do
    http POST "$U/evaluate" -H 'Content-Type: application/json' --data-binary @"$WORK/ev_$m.json"
    expect "an evaluation on $m fits a calibration object" 200 \
        'd["calibration"]["format"] == "kronosd-calibration"'
    "$PY" -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["calibration"], open(sys.argv[2], "w"))' \
        "$BODY" "$WORK/obj_$m.json"
done
FP_TINY=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$WORK/obj_tiny.json")
FP_WIDE=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$WORK/obj_wide.json")
if [ -n "$FP_TINY" ] && [ -n "$FP_WIDE" ] && [ "$FP_TINY" != "$FP_WIDE" ]; then
    pass "the two models' objects name two fingerprints ($FP_TINY, $FP_WIDE)"
else
    fail "the two models' objects name two fingerprints" "tiny '$FP_TINY', wide '$FP_WIDE'"
fi

session_body() { # session_body MODEL OBJECT_FILE OUT
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["model"]=sys.argv[2]; d["calibration"]=json.load(open(sys.argv[3])); json.dump(d, open(sys.argv[4], "w"))' \
        "$WORK/candles.json" "$1" "$2" "$3"
}
session_body wide "$WORK/obj_tiny.json" "$WORK/s_wide_tiny.json"
http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/s_wide_tiny.json"
expect "a session on wide refuses tiny's object, naming calibration.model" 400 \
    'd["error"]["message"].startswith("calibration.model")'
session_body tiny "$WORK/obj_wide.json" "$WORK/s_tiny_wide.json"
http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/s_tiny_wide.json"
expect "a session on tiny (the default) refuses wide's object" 400 \
    'd["error"]["message"].startswith("calibration.model")'
session_body wide "$WORK/obj_wide.json" "$WORK/s_wide.json"
http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/s_wide.json"
expect "a session on wide takes wide's object" 201 \
    'd["model"]["id"] == "wide" and d["calibration"]["mode"] == "object"'
SOBJ=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")

http POST "$U/sessions" -H 'Content-Type: application/json' --data-binary @"$WORK/online.json"
expect "an online session on wide" 201 'd["model"]["id"] == "wide"'
SON=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
ok=1
for i in 0 1 2 3 4 5; do
    http POST "$U/sessions/$SON/forecast" -H 'Content-Type: application/json' \
        -d '{"horizon": 4, "samples": 4, "seed": 3}'
    [ "$STATUS" = 200 ] || { ok=0; fail "forecast $i: status $STATUS $(head -c 300 "$BODY")"; }
    http POST "$U/sessions/$SON/candles" -H 'Content-Type: application/json' \
        --data-binary @"$WORK/next$i.json"
    [ "$STATUS" = 200 ] || { ok=0; fail "append $i: status $STATUS $(head -c 300 "$BODY")"; }
done
[ "$ok" = 1 ] && pass "six forecasts and appends on the online session"

strip_usage() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage",None); print(json.dumps(d,sort_keys=True))' "$1"
}
# snapshot TAG: each session's GET (what a restart keeps: not its memory, which a restored
# session holds as candles until its next append) and a seeded forecast, usage aside
snapshot() {
    local s
    for s in "$SOBJ" "$SON"; do
        http GET "$U/sessions/$s"
        [ "$STATUS" = 200 ] || fail "GET /sessions/$s: status $STATUS $(head -c 300 "$BODY")"
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d.get(k) for k in ("kind","model","length","last_timestamp","normalization","calibration")},sort_keys=True))' \
            "$BODY" >"$WORK/get_${s}_$1"
        http POST "$U/sessions/$s/forecast" -H 'Content-Type: application/json' \
            -d '{"horizon": 4, "samples": 4, "seed": 11}'
        [ "$STATUS" = 200 ] || fail "forecast $s: status $STATUS $(head -c 300 "$BODY")"
        strip_usage "$BODY" >"$WORK/fc_${s}_$1"
    done
}
snapshot before
jq_ok "d['calibrated'] is True and d['calibration']['model'] == '$FP_WIDE' and d['model']['id'] == 'wide'" \
    "$WORK/fc_${SON}_before" &&
    pass "the online session's forecast is calibrated by an object naming wide's fingerprint" ||
    fail "the online session's forecast is calibrated by an object naming wide's fingerprint" \
        "$(head -c 400 "$WORK/fc_${SON}_before")"

kill -KILL "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
start_daemon two --model "wide=$WORK/wide" --state-dir "$STATE" --workers 1
U=$URL_two
if grep -q "2 sessions restored (0 refused)" "$WORK/two.log"; then
    pass "the restart restores both sessions"
else
    fail "the restart restores both sessions" "$(grep "journal" "$WORK/two.log")"
fi
snapshot after
for s in "$SOBJ" "$SON"; do
    for k in get fc; do
        if cmp -s "$WORK/${k}_${s}_before" "$WORK/${k}_${s}_after"; then
            pass "restart: session $s's $k the same bytes"
        else
            fail "restart: session $s's $k the same bytes" \
                "$(diff <(head -c 400 "$WORK/${k}_${s}_before") <(head -c 400 "$WORK/${k}_${s}_after"))"
        fi
    done
done
summary
