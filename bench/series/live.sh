#!/usr/bin/env bash
# live.sh — what live series save, measured in one run against a real daemon with curl-like
# calls (Python's urllib on loopback), so that the ratios hold on a shared, noisy machine.
#
#   bench/series/live.sh KRONOSD MODEL_DIR [REPS]
#
# 1. Lookback 400, horizon 12, 8 paths: "append 1 candle + forecast" on a candle session,
#    against a stateless /forecast of the same 401 candles, and against the same forecast
#    from a 2-candle context (what the horizon's decode alone costs).
# 2. 32 series of 64 candles, horizon 16, 1 path: one "series" request against 32
#    sequential /forecast requests.
# Each figure is the median of REPS (default 7) runs. Not a test: run it by hand, e.g.
#   ./build/kronos-mkmodel --out /tmp/m-small --preset small --seed 1
#   bench/series/live.sh build/kronosd /tmp/m-small
set -euo pipefail
KRONOSD=$1
MODEL=$2
REPS=${3:-7}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-bench.XXXXXX")
LOG="$WORK/daemon.log"
"$KRONOSD" serve --model "$MODEL" --port 0 --max-request-cost 1000000 >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 1 600); do
    grep -q "kronosd: ready" "$LOG" && break
    kill -0 $PID 2>/dev/null || { cat "$LOG"; exit 1; }
    sleep 0.1
done
PORT=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$LOG" | head -1)

python3 - "http://127.0.0.1:$PORT" "$SRC/tests/data/kline_5min.csv" "$REPS" <<'EOF'
import csv, json, statistics, sys, time, urllib.request

url, path, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = list(csv.DictReader(open(path)))
COLS = ["open", "high", "low", "close", "volume", "amount"]

def candles(a, b):
    d = {"timestamps": [r["timestamps"].replace(" ", "T") for r in rows[a:b]]}
    for c in COLS:
        d[c] = [float(r[c]) for r in rows[a:b]]
    return d

def post(path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)

def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3

opts = {"horizon": 12, "samples": 8, "seed": 1}
times = {"session": [], "stateless": [], "two": []}
for k in range(reps):
    # a fresh session per run, created with 400 candles (not timed), one candle appended
    base = 1000 + 30 * k
    sid = post("/sessions", {"candles": candles(base, base + 400)})["session"]
    def live():
        post(f"/sessions/{sid}/candles", {"candles": candles(base + 400, base + 401)})
        post(f"/sessions/{sid}/forecast", opts)
    times["session"].append(timed(live))
    times["stateless"].append(timed(lambda: post("/forecast", dict(opts, candles=candles(base, base + 401)))))
    times["two"].append(timed(lambda: post("/forecast", dict(opts, candles=candles(base + 399, base + 401)))))
    urllib.request.urlopen(urllib.request.Request(f"{url}/sessions/{sid}", method="DELETE")).read()
m = {k: statistics.median(v) for k, v in times.items()}
print(f"lookback 400, horizon 12, 8 paths, median of {reps}:")
print(f"  append 1 candle + forecast on a session : {m['session']:8.1f} ms")
print(f"  stateless /forecast of the 401 candles   : {m['stateless']:8.1f} ms "
      f"({m['stateless'] / m['session']:.1f}x the session)")
print(f"  /forecast from a 2-candle context        : {m['two']:8.1f} ms "
      f"(session = {m['session'] / m['two']:.2f}x this)")

series = [{"candles": candles(64 * i, 64 * i + 64)} for i in range(32)]
shared = {"horizon": 16, "samples": 1, "seed": 3}
one, seq = [], []
for _ in range(reps):
    one.append(timed(lambda: post("/forecast", dict(shared, series=series))))
    seq.append(timed(lambda: [post("/forecast", dict(shared, **s)) for s in series]))
a, b = statistics.median(one), statistics.median(seq)
print(f"32 series of 64 candles, horizon 16, 1 path, median of {reps}:")
print(f"  one series request        : {a:8.1f} ms")
print(f"  32 sequential requests    : {b:8.1f} ms ({b / a:.1f}x the series request)")
EOF
