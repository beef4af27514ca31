#!/usr/bin/env bash
# journal_bench.sh — what durable sessions cost: appends of one candle to a 400-candle
# session without a journal and with journal-fsync always, everysec and no; and a restart
# with N journaled sessions of 400 candles: time to /health 200 (against a start without a
# journal), and a session's first forecast after it against one before it, warm.
#
#   bench/series/journal_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# BUILD_DIR defaults to build; MODEL_DIR to a Kronos-small-shaped random model written by
# kronos-mkmodel. APPENDS (default 100: the session stays within max_context, where an append is
# encoding one candle and appending one token; 0: none) appends per mode, SESSIONS (default 100) for the
# restart. STATE_DIR (default a temporary directory) holds the journals: put it on the disk
# to measure (a tmpfs has no fsync cost). Prints a markdown table.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
APPENDS=${APPENDS:-100}
SESSIONS=${SESSIONS:-100}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-jbench.XXXXXX")
STATE_DIR=${STATE_DIR:-$WORK/state}
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
    [ -z "${KEEP_STATE:-}" ] && rm -rf "$STATE_DIR"
}
trap cleanup EXIT
if [ -z "$MODEL" ]; then
    MODEL="$WORK/model"
    "$BUILD/kronos-mkmodel" --out "$MODEL" --preset small --seed 1 >/dev/null || exit 1
fi
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
U="http://127.0.0.1:$PORT"

# up ARGS: the daemon, until /health answers 200; UP_S: the seconds that took
up() {
    local t0=$EPOCHREALTIME
    "$BUILD/kronosd" serve --model "$MODEL" --port "$PORT" --session-ttl 86400 "$@" >>"$WORK/log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 1 6000); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$U/health")" = 200 ] && break
        sleep 0.01
    done
    UP_S=$(python3 -c "print(f'{$EPOCHREALTIME - $t0:.2f}')")
}
down() { kill -9 "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }

# client MODE ARGS: the HTTP part (python, keep-alive)
client() {
    python3 - "$U" "$SRC/tests/data/kline_5min.csv" "$@" <<'EOF'
import csv, http.client, json, statistics, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); rows = list(csv.DictReader(open(sys.argv[2])))
mode = sys.argv[3]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
def call(method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); d = r.read()
    return r.status, json.loads(d)
def candles(a, b):
    r = rows[a:b]
    return {k: [x[k] if k == "timestamps" else float(x[k]) for x in r] for k in r[0]}
if mode == "appends":
    n = int(sys.argv[4])
    st, d = call("POST", "/sessions", {"candles": candles(0, 400)})
    sid = d["session"]; ms = []
    for i in range(400, 400 + n):
        t = time.perf_counter()
        st, _ = call("POST", f"/sessions/{sid}/candles", {"candles": candles(i, i + 1)})
        ms.append((time.perf_counter() - t) * 1e3)
        assert st == 200, st
    ms.sort()
    print(f"{statistics.mean(ms):.2f} {ms[len(ms) // 2]:.2f} {ms[int(len(ms) * 0.99)]:.2f}")
elif mode == "create":
    n = int(sys.argv[4]); sids = []
    for k in range(n):
        st, d = call("POST", "/sessions", {"candles": candles(k * 20, k * 20 + 400)})
        assert st == 201, (st, d)
        sids.append(d["session"])
    print(" ".join(sids))
elif mode == "forecast":
    out = []
    for _ in range(2):
        t = time.perf_counter()
        st, d = call("POST", f"/sessions/{sys.argv[4]}/forecast", {"horizon": 16, "seed": 1})
        out.append((time.perf_counter() - t) * 1e3)
        assert st == 200, st
    print(f"{out[0]:.0f} {out[1]:.0f}")
EOF
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs; state-dir $STATE_DIR ($(df -T "$(dirname "$STATE_DIR")" | awk 'NR==2 {print $2}'))"
echo
[ "$APPENDS" -gt 0 ] && echo "| appends of 1 candle to a 400-candle session ($APPENDS) | mean ms | p50 ms | p99 ms | appends/s (one client) |" \
    && echo "|---|---|---|---|---|"
for mode in none always everysec no; do
    [ "$APPENDS" -gt 0 ] || break
    rm -rf "$STATE_DIR"
    if [ "$mode" = none ]; then up; else up --state-dir "$STATE_DIR" --journal-fsync "$mode"; fi
    read -r mean p50 p99 < <(client appends "$APPENDS")
    echo "| ${mode/none/no journal} | $mean | $p50 | $p99 | $(awk -v m="$mean" 'BEGIN {printf "%.0f", (m > 0 ? 1000 / m : 0)}') |"
    down
done

[ "$SESSIONS" -gt 0 ] || exit 0
rm -rf "$STATE_DIR"
# room for every session's window (Kronos-small: 36 KiB a position) in the sessions' share,
# and for their encoder caches (5.4 MiB for 400 candles of Kronos-small)
POOL="--pool-bytes $((SESSIONS * 16 + 512))M --session-memory-bytes $((SESSIONS * 8))M"
up $POOL
BASE=$UP_S
down
up --state-dir "$STATE_DIR" $POOL
SIDS=$(client create "$SESSIONS")
read -r _ WARM < <(client forecast "${SIDS%% *}") # the second: on the series, warm
down
up --state-dir "$STATE_DIR" $POOL
START=$UP_S
read -r COLD _ < <(client forecast "${SIDS%% *}") # the first after the restart
echo
echo "| restart with $SESSIONS journaled sessions of 400 candles | |"
echo "|---|---|"
echo "| start to /health 200 without a journal (the model's load) | ${BASE} s |"
echo "| kill -9, then start to /health 200 with the journal | ${START} s |"
echo "| journal | $(stat -c %s "$STATE_DIR/journal") bytes |"
echo "| a session's first forecast after the restart (horizon 16) / one before it, warm | ${COLD} / ${WARM} ms |"
