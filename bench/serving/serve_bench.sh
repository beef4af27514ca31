#!/usr/bin/env bash
# serve_bench.sh — kronosd under load through HTTP: the step scheduler with many clients
# against the same daemon sent requests one at a time (what a request costs alone; the
# former `batching = false` mode is retired), in one run so that the ratios hold on a
# shared machine.
#
#   bench/serving/serve_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# BUILD_DIR defaults to build; MODEL_DIR to a Kronos-small-shaped random model written by
# kronos-mkmodel. Needs wrk and curl (Debian packages). Every daemon listens on 127.0.0.1 and
# is stopped at the end. DUR (seconds per wrk run, default 20) and RSS_ROUNDS x RSS_DUR (the
# memory check, default 3 x 60) shorten it; BATCHED_FLAGS adds flags to the daemon
# (e.g. "--step-tokens 32").
#
# Prints a markdown table:
#   * 16 and 64 clients of a decode-heavy forecast (64 candles, horizon 64, 1 sample,
#     distinct seeds): req/s, p50, p99, against one client sending one at a time;
#   * the wall time of 16 such requests sent at once against one alone;
#   * p99 of that short request with two long forecasts (30 samples, horizon 512) running,
#     against its p99 alone;
#   * RSS before and after each of RSS_ROUNDS rounds of RSS_DUR seconds of load;
#   * fair serving, by bench/serving/fair_bench.sh on a daemon of its own (FAIR_N light
#     requests alone, default 30; FAIR_FLAGS for its daemon): a light forecast's (64 candles,
#     horizon 16, 1 path) p50/p99 alone and beside two heavy ones (400 candles, horizon 160,
#     8 paths), and the heavy ones' time with and without the light ones;
#   * appends of one candle with journal-fsync always/everysec/no and without a journal, by
#     bench/series/journal_bench.sh (JOURNAL_APPENDS, default 100; STATE_DIR on the disk to count
#     fsync).
# FAIR=0 or JOURNAL=0 leaves those parts out.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
DUR=${DUR:-20}
RSS_ROUNDS=${RSS_ROUNDS:-3}
RSS_DUR=${RSS_DUR:-60}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-bench.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }

if [ -z "$MODEL" ]; then
    MODEL="$WORK/model"
    "$BUILD/kronos-mkmodel" --out "$MODEL" --preset small --seed 1 >/dev/null || exit 1
fi

python3 - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
w = sys.argv[2]
def candles(n):
    r = rows[-n:]
    return {k: [x[k] if k == "timestamps" else float(x[k]) for x in r] for k in r[0]}
short = {"candles": candles(64), "horizon": 64, "samples": 1, "seed": 0}
json.dump(short, open(f"{w}/short.json", "w"))
json.dump({"candles": candles(400), "horizon": 512, "samples": 30, "seed": 1,
           "max_context": 512}, open(f"{w}/long.json", "w"))
# wrk: the same body with a distinct seed each request
body = json.dumps(short)
open(f"{w}/short.lua", "w").write(
    'local body = [==[' + body + ']==]\n'
    'local n = 0\n'
    'wrk.method = "POST"\n'
    'wrk.headers["Content-Type"] = "application/json"\n'
    'request = function()\n'
    '  n = n + 1\n'
    '  local b = string.gsub(body, \'"seed": 0\', \'"seed": \' .. n)\n'
    '  return wrk.format(nil, "/forecast", nil, b)\n'
    'end\n'
    'done = function(summary, latency, requests)\n'
    '  io.write(string.format("RESULT %.2f %.1f %.1f %d %d\\n", summary.requests / (summary.duration / 1e6),\n'
    '    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.requests,\n'
    '    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout))\n'
    'end\n')
EOF

start() { # NAME ARGS...: a daemon on a free port; sets URL_NAME and PID_NAME
    local name=$1
    shift
    "$BUILD/kronosd" serve --model "$MODEL" --host 127.0.0.1 --port 0 --access-log false \
        --queue-size 256 --request-timeout 600 --max-request-cost 1000000 --pool-bytes 3G "$@" \
        >"$WORK/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 1 600); do
        grep -q "kronosd: ready" "$WORK/$name.log" && break
        sleep 0.1
    done
    local port
    port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$WORK/$name.log" | head -1)
    printf -v "URL_$name" 'http://127.0.0.1:%s' "$port"
    printf -v "PID_$name" '%s' "$pid"
}

run_wrk() { # URL CLIENTS SECONDS -> "req/s p50 p99 n errors" (wrk needs a connection a thread)
    wrk -t"$(($2 < 2 ? $2 : 2))" -c"$2" -d"$3"s --timeout 120s -s "$WORK/short.lua" "$1" 2>/dev/null |
        awk '/^RESULT/ {print $2, $3, $4, $5, $6}'
}

burst() { # URL N -> seconds for N requests sent at once
    local t0 t1
    local pids=()
    t0=$(date +%s.%N)
    for i in $(seq 1 "$2"); do
        sed "s/\"seed\": 0/\"seed\": $i/" "$WORK/short.json" |
            curl -sS -m 300 -o /dev/null -X POST "$1/forecast" --data-binary @- &
        pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}'
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
start batched ${BATCHED_FLAGS:-}
echo "CPU: $CPU, $(nproc) cores; model: $MODEL; kernels: $(curl -s "$URL_batched/model" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("kernels", d.get("simd", "?")))' 2>/dev/null)"
echo
echo "| clients | mode | req/s | p50 ms | p99 ms | requests | errors |"
echo "|---|---|---|---|---|---|---|"
read -r RPS_single p50 p99 n errs <<<"$(run_wrk "$URL_batched" 1 "$DUR")"
echo "| 1 | one at a time | $RPS_single | $p50 | $p99 | $n | $errs |"
for c in 16 64; do
    read -r rps p50 p99 n errs <<<"$(run_wrk "$URL_batched" "$c" "$DUR")"
    echo "| $c | scheduler | $rps | $p50 | $p99 | $n | $errs |"
    eval "RPS_batched_$c=$rps"
done
echo
awk -v a="$RPS_batched_16" -v b="$RPS_single" 'BEGIN {printf "16 clients: throughput %.2fx one at a time\n", a / b}'
awk -v a="$RPS_batched_64" -v b="$RPS_single" 'BEGIN {printf "64 clients: throughput %.2fx one at a time\n", a / b}'

alone=$(burst "$URL_batched" 1)
sixteen=$(burst "$URL_batched" 16)
awk -v a="$alone" -v s="$sixteen" 'BEGIN {printf "one request alone %.2f s; 16 sent at once %.2f s: %.2fx (target <= 6x)\n", a, s, s / a}'

read -r _ _ p99_quiet _ _ <<<"$(run_wrk "$URL_batched" 2 "$DUR")"
LONGS=()
for i in 1 2; do
    sed "s/\"seed\": 1/\"seed\": $((i + 10))/" "$WORK/long.json" |
        curl -sS -m 900 -o /dev/null -X POST "$URL_batched/forecast" --data-binary @- &
    LONGS+=($!)
done
sleep 2
read -r _ _ p99_busy _ _ <<<"$(run_wrk "$URL_batched" 2 "$DUR")"
kill "${LONGS[@]}" 2>/dev/null # their clients leave: the scheduler cancels them
awk -v q="$p99_quiet" -v b="$p99_busy" 'BEGIN {printf "short request p99: %.1f ms alone, %.1f ms beside two long forecasts: %.2fx (target <= 2x)\n", q, b, b / q}'

echo
echo "| round | RSS before (MiB) | RSS after (MiB) |"
echo "|---|---|---|"
for r in $(seq 1 "$RSS_ROUNDS"); do
    before=$(rss_kb "$PID_batched")
    run_wrk "$URL_batched" 16 "$RSS_DUR" >/dev/null
    after=$(rss_kb "$PID_batched")
    awk -v r="$r" -v b="$before" -v a="$after" 'BEGIN {printf "| %d | %.1f | %.1f |\n", r, b / 1024, a / 1024}'
done

kill "$PID_batched" 2>/dev/null # the parts below start daemons of their own
wait "$PID_batched" 2>/dev/null
if [ "${FAIR:-1}" != 0 ]; then
    echo
    echo "Fair serving (bench/serving/fair_bench.sh):"
    N=${FAIR_N:-30} "$SRC/bench/serving/fair_bench.sh" "$BUILD" "$MODEL"
fi
if [ "${JOURNAL:-1}" != 0 ]; then
    echo
    echo "Appends with the session journal (bench/series/journal_bench.sh):"
    APPENDS=${JOURNAL_APPENDS:-100} SESSIONS=0 "$SRC/bench/series/journal_bench.sh" "$BUILD" "$MODEL"
fi
