#!/usr/bin/env bash
# models_rss.sh KRONOSD SMALL MINI MINI_OWN TINY — resident memory of daemons with several
# models after load and a first forecast on each model (VmRSS of /proc/PID/status):
# SMALL alone, MINI_OWN alone (a mini-shaped predictor with its own copy of the tokenizer),
# TINY alone (the process without weights, about), and SMALL + MINI sharing the tokenizer
# (MINI holds SMALL's tokenizer files). Prints a table and the shared daemon against the
# sum of the parts: both alone, less one process, less one tokenizer.
set -euo pipefail
KRONOSD=$1 SMALL=$2 MINI=$3 MINI_OWN=$4 TINY=$5
POOL=${POOL:-64M}
WORK=$(mktemp -d)
trap 'kill $(cat "$WORK"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$WORK"' EXIT
python3 - "$WORK/body.json" <<'PYEOF'
import json, math, sys
n = 400
close = [100 * math.exp(0.01 * math.sin(i / 7) + 0.0005 * i) for i in range(n)]
c = {"timestamps": [1718700000 + 300 * i for i in range(n)], "open": close,
     "high": [x * 1.001 for x in close], "low": [x * 0.999 for x in close], "close": close,
     "volume": [1000.0] * n}
json.dump({"candles": c, "horizon": 16, "samples": 4, "seed": 1}, open(sys.argv[1], "w"))
PYEOF

# rss NAME MODEL-ARGS...: starts a daemon, forecasts on each of its models, prints its VmRSS (kB)
rss() {
    local name=$1
    shift
    "$KRONOSD" serve --port 0 --workers 1 --pool-bytes "$POOL" "$@" >"$WORK/$name.log" 2>&1 &
    echo $! >"$WORK/$name.pid"
    local pid=$! port i
    for i in $(seq 1 600); do grep -q "kronosd: ready" "$WORK/$name.log" && break; sleep 0.1; done
    port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$WORK/$name.log" | head -1)
    for id in $(curl -s "127.0.0.1:$port/models" | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["models"]))'); do
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["model"]=sys.argv[2]; print(json.dumps(d))' "$WORK/body.json" "$id" |
            curl -s -o /dev/null -w '' "127.0.0.1:$port/forecast" -H 'Content-Type: application/json' --data-binary @-
    done
    curl -s "127.0.0.1:$port/models" >"$WORK/$name.models"
    awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}
small=$(rss small --model "small=$SMALL")
mini=$(rss mini_own --model "mini=$MINI_OWN")
tiny=$(rss tiny --model "tiny=$TINY")
both=$(rss both --model "small=$SMALL" --model "mini=$MINI")
tiny_w=$(python3 -c 'import json,sys; print(sum(m["bytes"] for m in json.load(open(sys.argv[1]))["models"]) // 1024)' "$WORK/tiny.models")
python3 - "$WORK/both.models" "$small" "$mini" "$tiny" "$tiny_w" "$both" "$POOL" <<'PYEOF'
import json, sys
models = json.load(open(sys.argv[1]))["models"]
small_rss, mini_rss, tiny_rss, tiny_w, both = (int(x) for x in sys.argv[2:7])
small, mini = models
# mini shares small's tokenizer: its own bytes leave out the tokenizer's (4 bytes a parameter)
tok_kb = (4 * mini["parameters"] - mini["bytes"]) // 1024
process = tiny_rss - tiny_w
expected = small_rss + mini_rss - process - tok_kb
print(f"pool-bytes {sys.argv[7]} a model; after a first forecast on each model")
print("| daemon | VmRSS |")
print("|---|---|")
print(f"| small alone | {small_rss:,} kB |")
print(f"| mini alone (its own copy of the tokenizer) | {mini_rss:,} kB |")
print(f"| tiny alone ({tiny_w:,} kB of weights: the process without weights, about) | {tiny_rss:,} kB |")
print(f"| small + mini, the tokenizer shared | {both:,} kB |")
print(f"expected: {small_rss:,} + {mini_rss:,} - {process:,} (one process) - {tok_kb:,} (one tokenizer) = {expected:,} kB; "
      f"measured {both:,} kB: {100 * (both / expected - 1):+.1f} %")
PYEOF
