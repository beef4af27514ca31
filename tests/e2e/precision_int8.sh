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
"$PY" - "$GOLDEN" "$WORK" <<'PYEOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]
json.dump({"candles": g["input"], "horizon": 16, "samples": 8, "seed": 3},
          open(f"{sys.argv[2]}/sampled.json", "w"))
PYEOF

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
"$PY" - "$WORK" <<'PYEOF' && pass "kronosd forecast --weights int8 equals both int8 daemons' answers; float32's differs" || fail "int8 answers" "$(cat "$WORK/cli.err")"
import json, sys
w = sys.argv[1]
cli, q8, conf, f32 = (json.load(open(f"{w}/{n}.json")) for n in ("cli", "q8", "conf", "f32"))
strip = lambda d: {k: v for k, v in d.items() if k != "usage"}
assert cli["usage"]["weights"] == "int8"
assert strip(cli) == strip(q8) == strip(conf), "cli and daemons differ"
assert strip(q8) != strip(f32), "int8 equals f32"
PYEOF

"$KRONOSD" serve --model "$MODEL" --port 0 --kv int8 >"$WORK/bad_kv.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "kv: must be f32 or bf16, got 'int8'" "$WORK/bad_kv.log"; then
    pass "serve --kv int8 is refused, naming the setting"
else
    fail "serve --kv int8" "exit $rc: $(head -3 "$WORK/bad_kv.log")"
fi
"$KRONOSD" forecast --model "$MODEL" --kv int8 "$WORK/sampled.json" >/dev/null 2>"$WORK/bad.err"
rc=$?
if [ "$rc" -ne 0 ] && grep -q "\-\-kv: must be f32 or bf16, got 'int8'" "$WORK/bad.err"; then
    pass "forecast --kv int8 is refused, naming the flag"
else
    fail "forecast --kv int8" "exit $rc: $(head -3 "$WORK/bad.err")"
fi
summary
