#!/usr/bin/env bash
# models_precision.sh — the weights and kv modes with several models: every model a daemon
# serves runs at its --weights and --kv, GET /models and /models/{id} name them (and the
# product its weights run), and so do each model's answers (usage); a model sharing another's
# tokenizer (the same files under another id) answers with bf16 weights and kv what a one-model
# bf16 daemon of those files answers, byte for byte, and what a two-model float32 daemon
# answers differs.
# Usage: models_precision.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
"$PY" - "$GOLDEN" "$WORK" <<'PYEOF'
import json, sys
inp = json.load(open(sys.argv[1]))["cases"][0]["input"]
json.dump({"model": "twin", "candles": inp, "horizon": 8, "samples": 4, "seed": 3},
          open(f"{sys.argv[2]}/twin.json", "w"))
json.dump({"candles": inp, "horizon": 8, "samples": 4, "seed": 3},
          open(f"{sys.argv[2]}/alone.json", "w"))
PYEOF

start_daemon two --workers 1 --weights bf16 --kv bf16 --model "twin=$MODEL"
start_daemon alone --workers 1 --weights bf16 --kv bf16
start_daemon f32 --workers 1 --model "twin=$MODEL"

http GET "$URL_two/models"
expect "/models: both models bf16 weights and kv, the second sharing the first's tokenizer" 200 \
    'len(d["models"]) == 2 and all(m["weights"] == "bf16" and m["kv"] == "bf16" for m in d["models"]) and d["models"][1]["tokenizer"]["shared_with"] == d["models"][0]["id"]'
http GET "$URL_two/models/twin"
expect "/models/twin names weights and kv, and its product one of bf16's" 200 \
    'd["weights"] == "bf16" and d["kv"] == "bf16" and d["kernels"]["product"] in ("vdpbf16ps", "fma-ftz", "avx2-fma", "c")'
http GET "$URL_two/model"
expect "/model (the default) names them" 200 'd["weights"] == "bf16" and d["kv"] == "bf16"'
http GET "$URL_f32/models"
expect "a float32 daemon's /models says f32, and float32's product" 200 \
    'all(m["weights"] == "f32" and m["kv"] == "f32" and m["kernels"]["product"] in ("fma", "c") for m in d["models"])'

strip() { # the answer without its model tag and timings
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k,None) for k in ("model","usage")]; print(json.dumps(d,sort_keys=True))' "$1"
}
http POST "$URL_two/forecast" -H 'Content-Type: application/json' --data-binary @"$WORK/twin.json"
expect "twin's forecast names its model and bf16 in usage" 200 \
    'd["model"]["id"] == "twin" and d["usage"]["weights"] == "bf16" and d["usage"]["kv"] == "bf16"'
strip "$BODY" >"$WORK/f_twin"
http POST "$URL_alone/forecast" -H 'Content-Type: application/json' --data-binary @"$WORK/alone.json"
expect "a one-model bf16 daemon's forecast" 200 'd["usage"]["weights"] == "bf16"'
strip "$BODY" >"$WORK/f_alone"
if cmp -s "$WORK/f_twin" "$WORK/f_alone"; then
    pass "twin (its tokenizer shared) answers what a one-model bf16 daemon answers"
else
    fail "twin (its tokenizer shared) answers what a one-model bf16 daemon answers" \
        "$(diff <(head -c 300 "$WORK/f_twin") <(head -c 300 "$WORK/f_alone"))"
fi
http POST "$URL_f32/forecast" -H 'Content-Type: application/json' --data-binary @"$WORK/twin.json"
expect "the float32 daemon's twin forecast" 200 'd["usage"]["weights"] == "f32"'
strip "$BODY" >"$WORK/f_f32"
if ! cmp -s "$WORK/f_twin" "$WORK/f_f32"; then
    pass "bf16 answers differ from float32's (the mode is in force for the second model)"
else
    fail "bf16 answers differ from float32's (the mode is in force for the second model)"
fi
summary
