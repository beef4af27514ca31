#!/usr/bin/env bash
# concurrency.sh KRONOSD SRCDIR — many clients at once against one kronosd.
#
# CLIENTS processes (default 16), each ROUNDS rounds (default 6) of: a greedy /forecast
# checked against the golden case, a session created, fed in two /generate calls and
# checked against a reference computed before the storm, then deleted, and /health. The
# queue is kept short so that some requests get 503 + Retry-After (retried after a short
# pause): those are the only non-2xx answers allowed. Afterwards the pool and the session
# table must be empty and the RSS back near its baseline. 127.0.0.1 only; bounded in count
# and time. Prints "N passed, M failed".
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
CLIENTS=${CLIENTS:-16}
ROUNDS=${ROUNDS:-6}
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"
make_bodies

# every client here is one address, so the whole queue is theirs (key-queue-percent 100):
# a full queue gives 503 overloaded, which they retry (the per-client share is e2e-fair's)
start_daemon D --workers 2 --queue-size 4 --key-queue-percent 100 --http-threads 2 --access-log false
D=$URL_D

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$PID_D/status"; }

# The client: one process, ROUNDS rounds; prints one JSON summary line.
cat >"$WORK/client.py" <<'EOF'
import json, sys, time, urllib.request, urllib.error

base, golden_path, work, client, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
g = json.load(open(golden_path))["cases"][0]
forecast = open(f"{work}/golden_forecast.json", "rb").read()
ref = json.load(open(f"{work}/reference.json"))
stats = {"ok": 0, "retried_503": 0, "errors": []}
deadline = time.time() + 50

def call(method, path, body=None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    while True:
        req = urllib.request.Request(base + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                stats["ok"] += 1
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            payload = e.read()
            if e.code == 503 and e.headers.get("Retry-After") and time.time() < deadline:
                stats["retried_503"] += 1
                time.sleep(0.05)
                continue
            return e.code, payload.decode(errors="replace")[:200]

def check(cond, what):
    if not cond:
        stats["errors"].append(what)

for rnd in range(rounds):
    st, d = call("POST", "/forecast", forecast)
    ok = st == 200 and all(abs(a - b) <= 1e-4 * abs(b) + 1e-9
                           for col, want in g["expected"].items() for a, b in zip(d["mean"][col], want))
    check(ok, f"forecast round {rnd}: {st} {str(d)[:200]}")

    case = ref[(client + rnd) % len(ref)]
    st, s = call("POST", "/sessions")
    check(st == 201, f"session create: {st} {s}")
    if st == 201:
        sid = s["session"]
        first = dict(case["first"], session=sid)
        second = dict(case["second"], session=sid)
        st1, a = call("POST", "/generate", first)
        st2, b = call("POST", "/generate", second)
        check(st1 == 200 and st2 == 200 and b["tokens"] == case["tokens"] and b["length"] == case["length"],
              f"generate: {st1} {st2} {str(b)[:200]}")
        st, _ = call("DELETE", f"/sessions/{sid}")
        check(st == 200, f"session delete: {st}")

    st, h = call("GET", "/health")
    check(st == 200 and h == {"status": "ok"}, f"health: {st} {h}")

print(json.dumps(stats))
EOF

# References for /generate: each case computed once, alone, in one call.
"$PY" - "$WORK" "$GOLDEN" "$D" <<'EOF'
import json, sys, urllib.request
work, golden, base = sys.argv[1], sys.argv[2], sys.argv[3]
g = json.load(open(golden))["cases"][0]
req = urllib.request.Request(base + "/tokenize", data=json.dumps({"candles": g["input"]}).encode(), method="POST")
toks = json.loads(urllib.request.urlopen(req).read())["tokens"]
ts, ft = g["input"]["timestamps"], g["future_timestamps"]
cases = []
for k in range(8):
    cut = 8 + 6 * k           # where the first call stops
    n = 40 + 3 * k            # context length of this case
    new = 4 + k               # tokens to generate
    one = {"tokens": toks[:n], "timestamps": ts[:n], "max_new_tokens": new,
           "future_timestamps": ft[:new], "top_k": 1}
    r = json.loads(urllib.request.urlopen(urllib.request.Request(
        base + "/generate", data=json.dumps(one).encode(), method="POST")).read())
    cases.append({"first": {"tokens": toks[:cut], "timestamps": ts[:cut]},
                  "second": {"tokens": toks[cut:n], "timestamps": ts[cut:n], "max_new_tokens": new,
                             "future_timestamps": ft[:new], "top_k": 1},
                  "tokens": r["tokens"], "length": r["length"]})
json.dump(cases, open(f"{work}/reference.json", "w"))
EOF
[ -s "$WORK/reference.json" ] && pass "reference /generate answers computed" || fail "reference /generate answers computed"

# Warm-up: the same load at a small scale, so that the baseline includes the allocator's
# steady state (arenas of every thread, touched pool pages).
WARM_PIDS=()
for c in $(seq 1 "$CLIENTS"); do
    "$PY" "$WORK/client.py" "$D" "$GOLDEN" "$WORK" "$c" 1 >"$WORK/warm.$c" 2>&1 &
    WARM_PIDS+=("$!")
    BG_PIDS+=("$!")
done
wait "${WARM_PIDS[@]}" 2>/dev/null
BASE_KB=$(rss_kb)

T_START=${EPOCHREALTIME/./}
CLIENT_PIDS=()
for c in $(seq 1 "$CLIENTS"); do
    "$PY" "$WORK/client.py" "$D" "$GOLDEN" "$WORK" "$c" "$ROUNDS" >"$WORK/client.$c" 2>&1 &
    CLIENT_PIDS+=("$!")
    BG_PIDS+=("$!")
done
PEAK_KB=$BASE_KB
while :; do
    running=0
    for p in "${CLIENT_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
    now=$(rss_kb)
    [ "$now" -gt "$PEAK_KB" ] && PEAK_KB=$now
    [ $running -eq 0 ] && break
    if [ $(((${EPOCHREALTIME/./} - T_START) / 1000000)) -gt 55 ]; then
        fail "clients finish within 55 s"
        break
    fi
    sleep 0.1
done
wait "${CLIENT_PIDS[@]}" 2>/dev/null
T_MS=$(((${EPOCHREALTIME/./} - T_START) / 1000))

"$PY" - "$WORK" "$CLIENTS" "$ROUNDS" "$T_MS" >"$WORK/verdict" <<'EOF'
import json, sys
work, clients, rounds, ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ok = retried = 0
errors = []
for c in range(1, clients + 1):
    try:
        s = json.loads(open(f"{work}/client.{c}").read().strip().splitlines()[-1])
    except Exception as e:
        errors.append(f"client {c}: no summary ({e}): {open(f'{work}/client.{c}').read()[:300]}")
        continue
    ok += s["ok"]; retried += s["retried_503"]; errors += [f"client {c}: {e}" for e in s["errors"]]
print(f"{clients} clients x {rounds} rounds: {ok} answers in {ms} ms ({ok * 1000 / max(ms, 1):.0f}/s), "
      f"{retried} intended 503s retried, {len(errors)} errors")
for e in errors[:10]:
    print("  " + e)
sys.exit(1 if errors or ok != clients * rounds * 6 else 0)
EOF
RC=$?
cat "$WORK/verdict"
[ $RC -eq 0 ] && pass "every answer correct; no errors but 503s" || fail "every answer correct; no errors but 503s"

http GET "$D/metrics"
cp "$BODY" "$WORK/metrics.txt"
grep -q '^kronosd_pool_bytes_used 0$' "$WORK/metrics.txt" && pass "pool empty afterwards" \
    || fail "pool empty afterwards" "$(grep '^kronosd_pool_bytes_used' "$WORK/metrics.txt")"
grep -q '^kronosd_sessions 0$' "$WORK/metrics.txt" && pass "no sessions left" \
    || fail "no sessions left" "$(grep '^kronosd_sessions ' "$WORK/metrics.txt")"
N503=$(awk -F'[{} ]' '/^kronosd_requests_total/ && /status="503"/ { s += $NF } END { print s + 0 }' "$WORK/metrics.txt")
echo "     503s counted by the daemon: $N503"

sleep 1 # let the housekeeping tick pass
AFTER_KB=$(rss_kb)
echo "     RSS: baseline $((BASE_KB / 1024)) MiB, peak $((PEAK_KB / 1024)) MiB, after $((AFTER_KB / 1024)) MiB"
# near the baseline: within 16 MiB or 20 %, whichever is larger
SLACK=$((BASE_KB / 5 > 16384 ? BASE_KB / 5 : 16384))
if sanitized "$KRONOSD"; then
    # a sanitizer's quarantine keeps freed memory resident on purpose
    echo "     (sanitized build: RSS not checked; its leak checker runs at exit instead)"
elif [ "$AFTER_KB" -le $((BASE_KB + SLACK)) ]; then
    pass "RSS back near its baseline"
else
    fail "RSS back near its baseline" "after $AFTER_KB kB > baseline $BASE_KB kB + $SLACK kB"
fi

kill -TERM "$PID_D"
wait "$PID_D"
RC=$?
[ "$RC" -eq 0 ] && pass "daemon stops with status 0" || fail "daemon stops with status 0" "got $RC"

summary
