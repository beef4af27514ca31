#!/usr/bin/env bash
# fair_eval_bench.sh — a light forecast beside a walk-forward evaluation: the light
# request's times alone and while one /evaluate of many origins runs, against one daemon,
# in one run so the ratio holds on a shared machine.
#
#   bench/fair_eval_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# Light: 64 candles, horizon 4, 1 path, N (default 12) times alone, then N times spread
# over the evaluation. Evaluation: tests/data/kline_5min.csv (2,500 candles), lookback 64,
# stride STRIDE (default 16), horizon 1, 1 sample: about 150 origins, each small, the whole
# heavy. Target: the light one's worst beside it <= 2x its median alone. The daemon
# listens on 127.0.0.1 and is stopped at the end.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
N=${N:-12}
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-faireval.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "$MODEL" ]; then
    MODEL="$WORK/model"
    "$BUILD/kronos-mkmodel" --out "$MODEL" --preset small --seed 1 >/dev/null || exit 1
fi
"$BUILD/kronosd" serve --model "$MODEL" --host 127.0.0.1 --port 0 --access-log false \
    >"$WORK/d.log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do
    grep -q "kronosd: ready" "$WORK/d.log" && break
    sleep 0.1
done
port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$WORK/d.log" | head -1)
python3 - "$port" "$SRC/tests/data/kline_5min.csv" "$N" "${STRIDE:-16}" <<'PYEOF'
import csv, http.client, json, statistics, sys, threading, time
port, path, n, stride = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = list(csv.reader(open(path)))
hdr, rows = rows[0], rows[1:]
def cand(r):
    return {"timestamps": [x[0] for x in r], **{h: [float(x[i]) for x in r] for i, h in enumerate(hdr[1:], 1)}}
light = json.dumps({"candles": cand(rows[:64]), "horizon": 4, "samples": 1, "seed": 1})
ev = json.dumps({"candles": cand(rows), "lookback": 64, "stride": stride, "horizon": 1, "samples": 1})
def call(body, route):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t = time.perf_counter()
    c.request("POST", route, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse(); d = r.read()
    return time.perf_counter() - t, r.status, d
call(light, "/forecast")
alone = [call(light, "/forecast")[0] for _ in range(n)]
out = {}
def run_eval():
    out["t"], out["st"], d = call(ev, "/evaluate")
    out["origins"] = json.loads(d).get("origins") if out["st"] == 200 else d[:200]
th = threading.Thread(target=run_eval); th.start()
time.sleep(0.3)
beside = []
while th.is_alive() and len(beside) < n:
    beside.append(call(light, "/forecast")[0])
    time.sleep(0.2)
th.join()
med = statistics.median(alone)
print(f"evaluation: {out['st']}, {out['origins']} origins, {out['t']:.2f} s")
print(f"light alone: median {1e3*med:.1f} ms, max {1e3*max(alone):.1f} ms ({n} runs)")
if beside:
    print(f"light beside it: median {1e3*statistics.median(beside):.1f} ms, max {1e3*max(beside):.1f} ms "
          f"({len(beside)} runs): worst {max(beside)/med:.2f}x alone (target 2x)")
PYEOF
