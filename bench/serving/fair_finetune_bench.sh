#!/usr/bin/env bash
# fair_finetune_bench.sh — a light forecast beside a fine-tuning job (POST /finetune): its
# times alone and, sent once a second, while the job trains, against one daemon in one run so
# the ratio holds on a shared machine.
#
#   bench/serving/fair_finetune_bench.sh [BUILD_DIR] [MODEL_DIR]
#
# Light: 64 candles, horizon 16, 1 path (fair_bench.sh's), N (default 12) times alone, median.
# Then a job on tests/data/kline_5min.csv at upstream's shape (batch 16, lookback 90, predict
# 10), more steps than the measurement lasts, no gate; once it has trained STEPS_BEFORE
# (default 1) steps the light forecast is sent every second, BESIDE (default 30) times; then
# the job is cancelled and the light forecast timed alone again. Reported: the light one's
# median and worst beside against its median alone (target: worst <= 2x), the steps the job
# trained meanwhile, and the load average before and after (another program's load counts).
# Over each light request the daemon's threads are read from /proc (schedstat): the serving
# threads' CPU time (more beside than alone: training slows its work, as through memory
# bandwidth), their time waiting runnable (the CPU taken from them, by training or by other
# programs) and the training thread's CPU time (what it took while the request was in flight).
# Without MODEL_DIR a random-weight model of Kronos-small's shape is written. The daemon
# listens on 127.0.0.1 with an admin key of its own and is stopped at the end.
set -uo pipefail
BUILD=${1:-build}
MODEL=${2:-}
N=${N:-12}
BESIDE=${BESIDE:-30}
. "$(dirname "$0")/fair_lib.sh" fairft
KEY="bench-$$-$RANDOM"
printf 'bench:%s\n' "$KEY" >"$WORK/admin"
mkdir -p "$WORK/state"
# shellcheck disable=SC2086 # FAIR_FLAGS: words, as the caller wrote them
start_daemon --admin-key-file "$WORK/admin" --state-dir "$WORK/state" ${FAIR_FLAGS:-}
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
FAM=$(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1)
MOD=$(sed -n 's/^model[^:]*: //p' /proc/cpuinfo | sed -n 1p)
echo "CPU: $CPU, family $FAM model $MOD, $(nproc) cores; model: $MODEL; flags: ${FAIR_FLAGS:-none}"
python3 - "$port" "$SRC/tests/data/kline_5min.csv" "$KEY" "$N" "$BESIDE" "${STEPS_BEFORE:-1}" "$PID" <<'PYEOF'
import csv, http.client, json, os, statistics, sys, time
port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
n, beside_n, steps_before, pid = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
rows = list(csv.DictReader(open(path)))
def cand(r):
    return {c: [x[c] if c == "timestamps" else float(x[c]) for x in r] for c in r[0]}
light = json.dumps({"candles": cand(rows[-64:]), "horizon": 16, "samples": 1, "seed": 1})
admin = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
def call(method, route, body=None, headers=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t = time.perf_counter()
    c.request(method, route, body=body, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse(); d = r.read()
    c.close()
    return time.perf_counter() - t, r.status, d
def threads():
    """every daemon thread: (SCHED_IDLE?, ns run, ns waited runnable) from /proc"""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            policy = int(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[38])
            run, wait = (int(x) for x in open(f"/proc/{pid}/task/{t}/schedstat").read().split()[:2])
            out[t] = (policy == 5, run, wait)
        except (OSError, ValueError, IndexError):
            pass
    return out
def timed_light():
    """the light forecast's seconds, and in ms over its span: the serving threads' CPU time and
    their time waiting runnable (summed over threads), the training thread's CPU time"""
    a = threads()
    t, st, d = call("POST", "/forecast", light)
    b = threads()
    if st != 200: sys.exit(f"the light forecast: {st} {d[:200]!r}")
    def sum_of(idle, k):
        return sum(b[x][k] - a[x][k] for x in b if x in a and b[x][0] == idle) / 1e6
    return t, sum_of(False, 1), sum_of(False, 2), sum_of(True, 1)
def job():
    st, d = call("GET", "/finetune/ft-1", headers=admin)[1:]
    return json.loads(d) if st == 200 else {"state": f"HTTP {st}", "step": 0}
def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])
for _ in range(2): timed_light()  # warm up
load0 = load()
alone_x = [timed_light() for _ in range(n)]
alone = [x[0] for x in alone_x]
body = json.dumps({"candles": cand(rows), "steps": 100000, "batch": 16, "lookback": 90,
                   "predict": 10, "eval_every": 100000, "gate_samples": 0, "id": "fair-bench"})
st, d = call("POST", "/finetune", body, admin)[1:]
if st != 202: sys.exit(f"POST /finetune: {st} {d[:300]!r}")
t0 = time.monotonic()
j = job()
while j["step"] < steps_before:  # the job in its training steps, past its first validation
    if j["state"] not in ("queued", "running") or time.monotonic() - t0 > 900:
        sys.exit(f"the job did not reach step {steps_before}: {j}")
    time.sleep(0.5)
    j = job()
step0, t_start = job()["step"], time.monotonic()
beside = []
for i in range(beside_n):
    t_next = t_start + i
    if time.monotonic() < t_next: time.sleep(t_next - time.monotonic())
    beside.append(timed_light())
beside_x, beside = beside, [x[0] for x in beside]
j = job()
steps, span = j["step"] - step0, time.monotonic() - t_start
st = call("DELETE", "/finetune/ft-1", headers=admin)[1]
for _ in range(600):
    if job()["state"] in ("cancelled", "done", "failed"): break
    time.sleep(0.2)
after = [timed_light()[0] for _ in range(n)]
load1 = load()
med = statistics.median(alone)
print(f"load average before: {load0}; after: {load1}")
print(f"light alone: median {1e3 * med:.1f} ms, worst {1e3 * max(alone):.1f} ms ({n} requests); "
      f"after the job: median {1e3 * statistics.median(after):.1f} ms")
print(f"light beside the fine-tune, one a second: median {1e3 * statistics.median(beside):.1f} ms "
      f"({statistics.median(beside) / med:.2f}x alone), worst {1e3 * max(beside):.1f} ms "
      f"({max(beside) / med:.2f}x alone; target <= 2x), {len(beside)} requests")
def med(xs, k): return statistics.median(x[k] for x in xs)
print(f"per light request, medians alone / beside: the serving threads' CPU {med(alone_x, 1):.1f} / "
      f"{med(beside_x, 1):.1f} ms, their time waiting runnable {med(alone_x, 2):.1f} / "
      f"{med(beside_x, 2):.1f} ms; the training thread's CPU beside: median {med(beside_x, 3):.1f} ms, "
      f"most {max(x[3] for x in beside_x):.1f} ms")
w = max(range(len(beside_x)), key=lambda i: beside_x[i][0])
print(f"the worst beside (request {w + 1}): {1e3 * beside_x[w][0]:.1f} ms, the serving threads' CPU "
      f"{beside_x[w][1]:.1f} ms, waiting runnable {beside_x[w][2]:.1f} ms, the training thread's CPU "
      f"{beside_x[w][3]:.1f} ms")
print(f"the job meanwhile: {steps} steps of batch 16 x (90 + 10) in {span:.1f} s "
      f"({span / steps if steps else float('inf'):.2f} s a step); cancelled: {job()['state']}")
PYEOF
