#!/usr/bin/env bash
# models_settings.sh — each model's own max-context, weights and kv (model-option), end to end:
#   * two models with different settings by flag (tiny: kv bf16; wide: max-context 1024, weights
#     int8): GET /models and /models/{id} name each one's, the daemon-wide values staying the
#     default of the other;
#   * a forecast on each, of 700 candles (past 512, so the window is in force), answers what a
#     one-model daemon started with that model's settings daemon-wide answers, byte for byte
#     (elapsed_ms aside), and wide's differs from a 512-window daemon's;
#   * the config file's `model-option` lines do the same; an option naming no model, an
#     unknown key or a bad value stops the start with a message naming the line;
#   * POST /models takes max_context, weights and kv: the loaded model answers as the
#     one-model daemon does; a bad value is 400 naming the field.
# Usage: KR_MKMODEL=PATH models_settings.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

make_model wide
"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))[:700]
c = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    c[k] = [float(r[k]) for r in rows]
body = {"candles": c, "horizon": 8, "samples": 3, "seed": 7, "quantiles": [0.1, 0.9]}
json.dump(body, open(f"{sys.argv[2]}/tiny.json", "w"))
json.dump(dict(body, model="wide"), open(f"{sys.argv[2]}/wide.json", "w"))
json.dump(dict(body, model="wide2"), open(f"{sys.argv[2]}/wide2.json", "w"))
PYEOF
model_keys

start_daemon two --workers 1 --admin-key-file "$WORK/admin" --model "wide=$WORK/wide" \
    --model-option tiny:kv=bf16 --model-option wide:max-context=1024 \
    --model-option wide:weights=bf16 --model-option wide:weights=int8
start_solo tiny --workers 1 --kv bf16
start_solo wide --workers 1 --max-context 1024 --weights int8
start_only wide512 --workers 1 --model "wide=$WORK/wide" --weights int8

http GET "$URL_two/models"
expect "GET /models: each model's own settings, the daemon-wide ones the other's default" 200 \
    '[(m["id"], m["max_context"], m["weights"], m["kv"]) for m in d["models"]] == [("tiny", 512, "f32", "bf16"), ("wide", 1024, "int8", "f32")]'
http GET "$URL_two/models/wide"
expect "GET /models/wide: max_context 1024, weights int8 (the later line won), an int8 product" 200 \
    'd["max_context"] == 1024 and d["weights"] == "int8" and d["kv"] == "f32" and d["kernels"]["product"] in ("tdpbsud", "vpdpbusd", "avx-vnni", "vpmaddubsw", "c")'
grep -q "model wide: hash [0-9a-f]*, [0-9]* parameters, max-context 1024, weights int8, kv f32" \
    "$WORK/two.log" && pass "the start log names wide's settings" \
    || fail "the start log names wide's settings" "$(grep "model wide" "$WORK/two.log")"

# same NAME A B: two answers byte for byte (elapsed_ms aside)
same() {
    if models_check same "$2" "$3"; then pass "$1"; else
        fail "$1" "$(head -c 200 "$2") / $(head -c 200 "$3")"; fi
}
forecast() { # URL BODY OUT
    http POST "$1/forecast" "${JSON[@]}" --data-binary @"$2"
    [ "$STATUS" = 200 ] || fail "forecast $2 on $1" "$STATUS $(head -c 300 "$BODY")"
    cp "$BODY" "$3"
}
forecast "$URL_two" "$WORK/tiny.json" "$WORK/f_two_tiny"
forecast "$URL_two" "$WORK/wide.json" "$WORK/f_two_wide"
forecast "$URL_solo_tiny" "$WORK/tiny.json" "$WORK/f_solo_tiny"
forecast "$URL_solo_wide" "$WORK/wide.json" "$WORK/f_solo_wide"
forecast "$URL_wide512" "$WORK/wide.json" "$WORK/f_wide512"
same "tiny (kv bf16) answers what a one-model --kv bf16 daemon answers" \
    "$WORK/f_two_tiny" "$WORK/f_solo_tiny"
same "wide (max-context 1024, int8) answers what a one-model daemon of those settings answers" \
    "$WORK/f_two_wide" "$WORK/f_solo_wide"
models_check same "$WORK/f_two_wide" "$WORK/f_wide512" \
    && fail "wide's 1024 window is in force: a 512-window daemon answers otherwise" \
    || pass "wide's 1024 window is in force: a 512-window daemon answers otherwise"
jq_ok 'd["usage"]["weights"] == "int8"' "$WORK/f_two_wide" \
    && pass "wide's answer names weights int8 in usage" || fail "wide's usage" "$(head -c 300 "$WORK/f_two_wide")"

# ---- POST /models with its own settings ---------------------------------------------------------
http POST "$URL_two/models" "${ADMIN[@]}" "${JSON[@]}" \
    -d "{\"id\": \"wide2\", \"path\": \"$WORK/wide\", \"max_context\": 1024, \"weights\": \"int8\"}"
expect "POST /models with max_context and weights: 201 naming them" 201 \
    'd["id"] == "wide2" and d["max_context"] == 1024 and d["weights"] == "int8" and d["kv"] == "f32"'
forecast "$URL_two" "$WORK/wide2.json" "$WORK/f_two_wide2"
"$PY" - "$WORK/f_two_wide2" "$WORK/f_solo_wide" <<'PYEOF' && pass "the loaded wide2 answers what the one-model daemon of its settings answers" || fail "wide2 against solo_wide"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d.pop("model"); d.get("usage", {}).pop("elapsed_ms", None); d.pop("elapsed_ms", None)
sys.exit(0 if a == b else 1)
PYEOF
for bad in '"weights": "int4"|weights' '"kv": "int8"|kv' '"max_context": 0|max_context' \
    '"max_context": "2048"|max_context'; do
    field=${bad#*|}
    http POST "$URL_two/models" "${ADMIN[@]}" "${JSON[@]}" \
        -d "{\"id\": \"bad\", \"path\": \"$WORK/wide\", ${bad%|*}}"
    expect "POST /models {${bad%|*}}: 400 naming $field" 400 \
        "d['error']['message'].startswith('$field')"
done
http GET "$URL_two/models"
expect "after the refusals GET /models holds three" 200 'len(d["models"]) == 3'

# ---- the config file ---------------------------------------------------------------------------
cat >"$WORK/two.conf" <<CONF
model = $MODEL
model = wide=$WORK/wide
model-option = wide:max-context=1024   # its own window
model-option = "wide:weights=int8"
model-option = tiny:kv=bf16
CONF
start_only conf --workers 1 --config "$WORK/two.conf"
http GET "$URL_conf/models"
expect "config file model-option lines: GET /models names each model's settings" 200 \
    '[(m["id"], m["max_context"], m["weights"], m["kv"]) for m in d["models"]] == [("tiny", 512, "f32", "bf16"), ("wide", 1024, "int8", "f32")]'
forecast "$URL_conf" "$WORK/wide.json" "$WORK/f_conf_wide"
same "the config file's wide answers as the flags' does" "$WORK/f_conf_wide" "$WORK/f_solo_wide"

# ---- refusals at start ---------------------------------------------------------------------------
refused() { # NAME EXPECTED-TEXT ARGS...
    local name=$1 want=$2
    shift 2
    "$KRONOSD" serve --port 0 --model "$MODEL" "$@" >"$WORK/refused.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && grep -qF -- "$want" "$WORK/refused.log"; then pass "$name"; else
        fail "$name" "exit $rc: $(head -c 300 "$WORK/refused.log")"; fi
}
refused "an option naming no model stops the start, naming the line and the models" \
    "model-option 'mini:max-context=2048': no model of that id (the models: tiny)" \
    --model-option mini:max-context=2048
refused "an unknown key stops the start" "model-option 'tiny:pool-bytes=1M': unknown key 'pool-bytes'" \
    --model-option tiny:pool-bytes=1M
refused "a bad value stops the start" "model-option 'tiny:weights=int4': weights: must be f32, bf16 or int8" \
    --model-option tiny:weights=int4
refused "a malformed line stops the start" "model-option 'tiny=2048': expected ID:KEY=VALUE" \
    --model-option tiny=2048
refused "max-context 0 stops the start" "model-option 'tiny:max-context=0': max-context must be an integer" \
    --model-option tiny:max-context=0
summary
