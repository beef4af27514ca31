#!/usr/bin/env bash
# precision.sh — the weights and kv modes end to end: a daemon with weights bf16 (flag and
# config line) or kv bf16 names them in /model and in each answer's usage (kv bf16: half the
# pool's block bytes); its forecast equals `kronosd forecast` with the same flag and differs
# from float32's; a bad mode is refused at start with a message naming the setting.
# Usage: precision.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
make_bodies
"$PY" - "$GOLDEN" "$WORK" <<'PYEOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]
w = sys.argv[2]
inp = g["input"]
json.dump({"tokens": [[i * 37 % 1024, i * 91 % 1024] for i in range(40)],
           "timestamps": inp["timestamps"][:40], "max_new_tokens": 4,
           "future_timestamps": inp["timestamps"][40:44], "top_k": 1},
          open(f"{w}/gen.json", "w"))
PYEOF

weights_daemons bf16 bf
start_daemon kv --workers 1 --compute-threads 1 --kv bf16

http GET "$URL_f32/model"
expect "/model names weights and kv f32 by default" 200 'd["weights"] == "f32" and d["kv"] == "f32"'
cp "$BODY" "$WORK/model_f32.json"
http GET "$URL_kv/model"
expect "/model names kv bf16 (--kv bf16), its pool blocks half the bytes" 200 \
    'd["kv"] == "bf16" and d["weights"] == "f32" and 2 * d["pool"]["block_bytes"] == json.load(open("'"$WORK"'/model_f32.json"))["pool"]["block_bytes"]'

forecast_as f32 f32 "a forecast's usage names f32"
forecast_as bf bf16 "a forecast's usage names bf16"
http POST "$URL_bf/generate" --data-binary @"$WORK/gen.json"
expect "a generation's usage names bf16" 200 'd["usage"]["weights"] == "bf16" and d["usage"]["kv"] == "f32"'
http POST "$URL_kv/forecast" --data-binary @"$WORK/sampled.json"
cp "$BODY" "$WORK/kv.json"
expect "a forecast's usage names kv bf16" 200 'd["usage"]["kv"] == "bf16" and d["usage"]["weights"] == "f32"'
"$KRONOSD" forecast --model "$MODEL" --kv bf16 --compact "$WORK/sampled.json" \
    >"$WORK/cli_kv.json" 2>"$WORK/cli_kv.err"
same_answers "kronosd forecast --kv bf16 equals the kv bf16 daemon's answer; float32's differs" \
    'd["usage"]["kv"] == "bf16"' "$WORK/cli_kv.json" "$WORK/kv.json" -- "$WORK/f32.json"

"$KRONOSD" forecast --model "$MODEL" --weights bf16 --compact "$WORK/sampled.json" \
    >"$WORK/cli.json" 2>"$WORK/cli.err"
same_answers "kronosd forecast --weights bf16 equals the bf16 daemon's answer; float32's differs" \
    'd["usage"]["weights"] == "bf16"' "$WORK/cli.json" "$WORK/bf.json" -- "$WORK/f32.json"

refused "serve --weights fp8 is refused, naming the setting" \
    "weights: must be f32, bf16 or int8, got 'fp8'" \
    "$KRONOSD" serve --model "$MODEL" --port 0 --weights fp8
refused "forecast --weights fp8 is refused, naming the flag" \
    "--weights: must be f32, bf16 or int8, got 'fp8'" \
    "$KRONOSD" forecast --model "$MODEL" --weights fp8 "$WORK/sampled.json"
refused "serve --kv f16 is refused, naming the setting" "kv: must be f32 or bf16, got 'f16'" \
    "$KRONOSD" serve --model "$MODEL" --port 0 --kv f16
summary
