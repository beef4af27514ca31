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

start_daemon f32 --workers 1 --compute-threads 1
start_daemon q8 --workers 1 --compute-threads 1 --weights int8
printf 'weights = int8\n' >"$WORK/q8.conf"
start_daemon conf --workers 1 --compute-threads 1 --config "$WORK/q8.conf"

http GET "$URL_q8/model"
expect "/model names weights int8 (--weights int8)" 200 'd["weights"] == "int8" and d["kv"] == "f32"'
http GET "$URL_conf/model"
expect "/model names weights int8 (weights = int8 in the config)" 200 'd["weights"] == "int8"'

http POST "$URL_f32/forecast" --data-binary @"$WORK/sampled.json"
cp "$BODY" "$WORK/f32.json"
expect "a float32 forecast's usage names f32" 200 'd["usage"]["weights"] == "f32"'
http POST "$URL_q8/forecast" --data-binary @"$WORK/sampled.json"
cp "$BODY" "$WORK/q8.json"
expect "an int8 forecast's usage names int8" 200 'd["usage"]["weights"] == "int8"'
http POST "$URL_conf/forecast" --data-binary @"$WORK/sampled.json"
cp "$BODY" "$WORK/conf.json"
expect "the config's int8 daemon answers" 200 'd["usage"]["weights"] == "int8"'

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
