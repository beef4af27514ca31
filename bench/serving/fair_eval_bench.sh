#!/usr/bin/env bash
# fair_eval_bench.sh — a light forecast beside each kind of heavy request the default
# limits admit: its times alone and while the heavy one runs, against one daemon of the
# default configuration, in one run so the ratios hold on a shared machine.
#
#   bench/serving/fair_eval_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# Light: 64 candles, horizon 4, 1 path, N (default 12) times alone before each case, then
# up to N times spread over the heavy request. The heavy cases (CASES, default all):
#   eval       /evaluate of tests/data/kline_5min.csv (2,500 candles), lookback 64, horizon
#              1, stride STRIDE (default 6): about 400 small origins, the whole heavy
#   forecast   /forecast of 10,000 candles (the CSV four times over), horizon 1: one long
#              context to encode
#   eval-long  /evaluate of those 10,000 candles, lookback 64, stride 64, horizon 1
#   live       /evaluate of the 2,500 candles in live mode, stride 128: one series grown
#              origin by origin, each origin's window up to max_context
# Target: the light one's worst beside each <= 2x its median alone. The daemon listens on
# 127.0.0.1 and is stopped at the end.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
N=${N:-12}
. "$(dirname "$0")/fair_lib.sh" faireval
start_daemon
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
FAM=$(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1)
MOD=$(sed -n 's/^model[^:]*: //p' /proc/cpuinfo | sed -n 1p)
echo "CPU: $CPU, family $FAM model $MOD, $(nproc) cores; model: $MODEL"
python3 - "$port" "$SRC/tests/data/kline_5min.csv" "$N" "${STRIDE:-6}" \
    "${CASES:-eval forecast eval-long live}" <<'PYEOF'
import csv, datetime, http.client, json, statistics, sys, threading, time
port, path, n, stride, cases = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
rows = list(csv.reader(open(path)))
hdr, rows = rows[0], rows[1:]
t0 = datetime.datetime.fromisoformat(rows[0][0])
long = [[(t0 + datetime.timedelta(minutes=5 * (k * len(rows) + i))).isoformat()] + r[1:]
        for k in range(4) for i, r in enumerate(rows)]
def cand(r):
    return {"timestamps": [x[0] for x in r], **{h: [float(x[i]) for x in r] for i, h in enumerate(hdr[1:], 1)}}
light = json.dumps({"candles": cand(rows[:64]), "horizon": 4, "samples": 1, "seed": 1})
heavy = {
    "eval": ("/evaluate", {"candles": cand(rows), "lookback": 64, "stride": stride, "horizon": 1, "samples": 1}),
    "forecast": ("/forecast", {"candles": cand(long), "horizon": 1, "samples": 1, "seed": 1}),
    "eval-long": ("/evaluate", {"candles": cand(long), "lookback": 64, "stride": 64, "horizon": 1, "samples": 1}),
    "live": ("/evaluate", {"candles": cand(rows), "lookback": 64, "stride": 128, "horizon": 1, "samples": 1, "mode": "live"}),
}
def call(body, route):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    t = time.perf_counter()
    c.request("POST", route, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse(); d = r.read()
    return time.perf_counter() - t, r.status, d
call(light, "/forecast")
print(f"{'case':10} {'heavy':>28} {'alone p50':>10} {'beside p50':>11} {'worst':>8} {'ratio':>7}")
for name in cases:
    route, body = heavy[name]
    body = json.dumps(body)
    alone = [call(light, "/forecast")[0] for _ in range(n)]
    out = {}
    def run():
        out["t"], out["st"], d = call(body, route)
        out["what"] = (f"{json.loads(d)['origins']} origins" if route == "/evaluate" else "1 forecast") \
            if out["st"] == 200 else d[:200].decode()
    th = threading.Thread(target=run); th.start()
    time.sleep(0.05)
    beside = []
    while th.is_alive() and len(beside) < n:
        beside.append(call(light, "/forecast")[0])
        time.sleep(0.1)
    th.join()
    med = statistics.median(alone)
    heavy_s = f"{out['st']} {out['what']} {out['t']:.2f} s"
    if not beside:
        print(f"{name:10} {heavy_s:>28} {1e3*med:8.1f}ms  (ended before a light one ran)")
        continue
    print(f"{name:10} {heavy_s:>28} {1e3*med:8.1f}ms {1e3*statistics.median(beside):9.1f}ms "
          f"{1e3*max(beside):6.1f}ms {max(beside)/med:6.2f}x  ({len(beside)} beside)")
PYEOF
