#!/usr/bin/env bash
# fair_bench.sh — a light forecast beside heavy ones (fair steps): the light
# request's p50/p99 alone and beside two heavy forecasts, and the heavy ones' time with and
# without the light ones, against one daemon, in one run so the ratios hold on a shared
# machine.
#
#   bench/serving/fair_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# Light: 64 candles, horizon 16, 1 path, sent N (default 30) times one after another alone;
# then back to back for the whole of the heavy ones' run (the harshest case); then SPACED
# (default 12) times spread evenly over it (the issue's case).
# Heavy: 400 candles, horizon 160, 8 paths, max_context 512 (its last steps recompute a slid
# 512-token window for every path), two at once. Targets: light p99 <= 2x alone; heavy
# <= 1.3x slower. The daemon listens on 127.0.0.1 and is stopped at the end.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
N=${N:-30}
. "$(dirname "$0")/fair_lib.sh" fair
# shellcheck disable=SC2086 # FAIR_FLAGS: words, as the caller wrote them
start_daemon --queue-size 256 --request-timeout 600 --max-request-cost 1000000 ${FAIR_FLAGS:-}
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
echo "CPU: $CPU, $(nproc) cores; model: $MODEL; flags: ${FAIR_FLAGS:-none}"
python3 - "$SRC/tests/data/kline_5min.csv" "http://127.0.0.1:$port" "$N" "${SPACED:-12}" <<'EOF'
import csv, json, sys, threading, time, urllib.request
rows = list(csv.DictReader(open(sys.argv[1])))
url, n, spaced_n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def candles(k):
    r = rows[-k:]
    return {c: [x[c] if c == "timestamps" else float(x[c]) for x in r] for c in r[0]}
def post(body):
    t0 = time.monotonic()
    req = urllib.request.Request(url + "/forecast", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        r.read()
        assert r.status == 200
    return time.monotonic() - t0
light = {"candles": candles(64), "horizon": 16, "samples": 1}
heavy = {"candles": candles(400), "horizon": 160, "samples": 8, "max_context": 512}
def lights(k, stop=None):
    out = []
    for i in range(k):
        if stop and stop.is_set(): break
        out.append(post(dict(light, seed=i)))
    return out
def pct(xs, q):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] * 1e3
def heavies(res):
    ts = [threading.Thread(target=lambda i=i: res.append(post(dict(heavy, seed=10 + i))))
          for i in range(2)]
    for t in ts: t.start()
    return ts
lights(2)  # warm up
alone = lights(n)
res = []; t0 = time.monotonic(); ts = heavies(res)
for t in ts: t.join()
heavy_alone = max(res)
res = []; ts = heavies(res); time.sleep(0.3)
beside, stop = [], threading.Event()
def loop():
    while not stop.is_set() and len(beside) < 1000:
        beside.extend(lights(1))
lt = threading.Thread(target=loop); lt.start()
for t in ts: t.join()
stop.set(); lt.join()
heavy_busy = max(res)
# The issue's case: SPACED (default 12) light requests spread evenly over the heavy ones' run,
# each sent alone at its moment, rather than one always in flight.
res = []; ts = heavies(res)
spaced, gap = [], heavy_alone / (spaced_n + 1)
for i in range(spaced_n):
    time.sleep(gap)
    if not any(t.is_alive() for t in ts): break
    spaced.extend(lights(1))
for t in ts: t.join()
heavy_spaced = max(res)
print(f"light alone: p50 {pct(alone, .5):.0f} ms, p99 {pct(alone, .99):.0f} ms ({len(alone)} requests)")
print(f"light beside two heavy, back to back: p50 {pct(beside, .5):.0f} ms, p99 {pct(beside, .99):.0f} ms "
      f"({len(beside)} requests): p99 {pct(beside, .99) / pct(alone, .99):.2f}x alone (target <= 2x)")
print(f"two heavy: {heavy_alone:.2f} s alone, {heavy_busy:.2f} s beside the back-to-back light ones: "
      f"{heavy_busy / heavy_alone:.2f}x (target <= 1.3x)")
if spaced:
    print(f"light beside two heavy, {len(spaced)} spread over their run: p50 {pct(spaced, .5):.0f} ms, "
          f"worst {max(spaced) * 1e3:.0f} ms: {max(spaced) * 1e3 / pct(alone, .99):.2f}x alone's p99 (target <= 2x); "
          f"two heavy {heavy_spaced:.2f} s: {heavy_spaced / heavy_alone:.2f}x alone (target <= 1.3x)")
EOF
