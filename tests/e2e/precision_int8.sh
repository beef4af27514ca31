#!/usr/bin/env bash
# precision_int8.sh — weights int8 end to end: a daemon with --weights int8 or `weights = int8`
# in its config names it in /model and in each answer's usage; its forecast equals `kronosd
# forecast --weights int8` and differs from float32's; kv int8 is refused, naming the setting.
# Usage: precision_int8.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
make_bodies

weights_daemons int8 q8
forecast_as f32 f32 "a float32 forecast's usage names f32"
forecast_as q8 int8 "an int8 forecast's usage names int8"
forecast_as conf int8 "the config's int8 daemon answers"

"$KRONOSD" forecast --model "$MODEL" --weights int8 --compact "$WORK/sampled.json" \
    >"$WORK/cli.json" 2>"$WORK/cli.err"
same_answers "kronosd forecast --weights int8 equals both int8 daemons' answers; float32's differs" \
    'd["usage"]["weights"] == "int8"' "$WORK/cli.json" "$WORK/q8.json" "$WORK/conf.json" \
    -- "$WORK/f32.json"

refused "serve --kv int8 is refused, naming the setting" "kv: must be f32 or bf16, got 'int8'" \
    "$KRONOSD" serve --model "$MODEL" --port 0 --kv int8
refused "forecast --kv int8 is refused, naming the flag" "--kv: must be f32 or bf16, got 'int8'" \
    "$KRONOSD" forecast --model "$MODEL" --kv int8 "$WORK/sampled.json"
summary
