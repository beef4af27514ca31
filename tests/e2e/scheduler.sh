#!/usr/bin/env bash
# scheduler.sh — how kronosd treats model work under load, end to end with curl:
#   * a forecast's answer is the same bytes (all but "usage") alone and amid 15 other
#     concurrent requests, sampled and greedy (queued forecasts are batched in lockstep);
#   * a request that can never fit is refused at once with 422 too_large;
#   * a deadline (timeout_ms) is answered 504 deadline_exceeded, on time;
#   * a client that leaves frees its worker: a short request sent after two abandoned long
#     ones completes within 5 s.
# Usage: scheduler.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
make_bodies

"$PY" - "$GOLDEN" "$WORK" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"]
w = sys.argv[2]
def candles(k, n=None):
    inp = g[k]["input"]
    if n:
        inp = {c: v[:n] for c, v in inp.items()}
    return inp
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
probe = {"candles": candles(0), "horizon": 24, "samples": 4, "seed": 7,
         "quantiles": [0.1, 0.5, 0.9], "return_paths": True}
dump("probe_sampled", probe)
dump("probe_greedy", dict(probe, top_k=1, samples=1, seed=0))
# fifteen others: other series, lengths, horizons, paths, seeds, windows that slide
for i in range(15):
    dump(f"other{i}", {"candles": candles(i % 4, 20 + 7 * i), "horizon": 8 + 3 * i,
                       "samples": 1 + i % 5, "seed": 100 + i, "temperature": 0.7 + 0.05 * i,
                       "max_context": 64 if i % 3 == 0 else 512})
dump("never_fits", {"candles": candles(0), "horizon": 512, "samples": 1000})
dump("slow_deadline", {"candles": candles(0), "horizon": 400, "samples": 64, "timeout_ms": 200})
dump("slow", {"candles": candles(0), "horizon": 440, "samples": 96})
EOF

strip_usage() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage",None); print(json.dumps(d,sort_keys=True))' "$1"
}

start_daemon main --workers 2 --compute-threads 1 --max-request-cost 100000
U=$URL_main

# ---- load invariance -------------------------------------------------------------------------
for kind in sampled greedy; do
    curl -sS -m 60 -o "$WORK/alone_$kind.json" -X POST "$U/forecast" --data-binary @"$WORK/probe_$kind.json"
    for round in 1 2; do
        pids=()
        for i in $(seq 0 14); do
            curl -sS -m 60 -o "$WORK/other_out$i.json" -X POST "$U/forecast" \
                --data-binary @"$WORK/other$i.json" &
            pids+=($!)
            if [ "$i" = 7 ]; then
                curl -sS -m 60 -o "$WORK/amid_$kind.json" -X POST "$U/forecast" \
                    --data-binary @"$WORK/probe_$kind.json" &
                pids+=($!)
            fi
        done
        wait "${pids[@]}"
        if [ "$(strip_usage "$WORK/alone_$kind.json")" = "$(strip_usage "$WORK/amid_$kind.json")" ] &&
            jq_ok '"mean" in d' "$WORK/amid_$kind.json"; then
            pass "$kind forecast amid 15 concurrent requests: the same bytes as alone (round $round)"
        else
            fail "$kind forecast amid 15 concurrent requests: the same bytes as alone (round $round)" \
                "$(head -c 200 "$WORK/amid_$kind.json")"
        fi
    done
done
ok=0
for i in $(seq 0 14); do jq_ok '"mean" in d' "$WORK/other_out$i.json" && ok=$((ok + 1)); done
[ "$ok" = 15 ] && pass "the 15 others answered" || fail "the 15 others answered" "$ok of 15"
peak=$(metric "$U" kronosd_scheduler_active_max)
steps=$(metric "$U" kronosd_scheduler_steps_total)
rows=$(metric "$U" kronosd_scheduler_rows_total)
if [ -n "$peak" ] && [ "$peak" -gt 1 ]; then
    pass "requests shared the scheduler's steps (up to $peak at once, $rows rows in $steps steps)"
else
    fail "requests shared the scheduler's steps" "peak=$peak steps=$steps rows=$rows"
fi

# ---- admission ----------------------------------------------------------------------------------
t0=${EPOCHREALTIME/./}
http POST "$U/forecast" --data-binary @"$WORK/never_fits.json"
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
expect "a forecast that can never fit: 422 too_large naming the limit" 422 \
    'd["error"]["code"] == "too_large" and ("pool-bytes" in d["error"]["message"] or "max-request-cost" in d["error"]["message"])'
[ "$ms" -lt 1000 ] && pass "... answered in $ms ms" || fail "... answered at once" "$ms ms"
if has_header Retry-After; then
    fail "too_large carries no Retry-After (it will never fit)"
else
    pass "too_large carries no Retry-After"
fi

# ---- deadline -----------------------------------------------------------------------------------
t0=${EPOCHREALTIME/./}
http POST "$U/forecast" --data-binary @"$WORK/slow_deadline.json"
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
expect "timeout_ms 200 on a long forecast: 504 deadline_exceeded" 504 'd["error"]["code"] == "deadline_exceeded"'
[ "$ms" -lt 2000 ] && pass "... answered after $ms ms" || fail "... answered on time" "$ms ms"
[ "$(metric "$U" kronosd_requests_timed_out_total)" -ge 1 ] && pass "metrics count the timeout" ||
    fail "metrics count the timeout"

# ---- cancellation -------------------------------------------------------------------------------
before=$(metric "$U" kronosd_requests_cancelled_total)
pids=()
for i in 1 2; do
    curl -sS -m 0.5 -o /dev/null -X POST "$U/forecast" --data-binary @"$WORK/slow.json" 2>/dev/null &
    pids+=($!)
done
wait "${pids[@]}"
t0=${EPOCHREALTIME/./}
http POST "$U/forecast" --data-binary @"$WORK/golden_forecast.json"
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
expect "a short forecast after two abandoned long ones" 200 'd["horizon"] == 16'
[ "$ms" -lt 5000 ] && pass "... completed in $ms ms (the abandoned ones stopped)" || fail "... within 5 s" "$ms ms"
if wait_metric "$U" kronosd_requests_cancelled_total $((before + 2)); then
    pass "metrics count both cancellations"
else
    fail "metrics count both cancellations" "$(metric "$U" kronosd_requests_cancelled_total)"
fi

# ---- sessions no one else can erase ------------------------------------------------------------
start_daemon sess --max-sessions 4 --max-sessions-per-key 3 --session-min-idle 60
S=$URL_sess
"$PY" -c 'import json,sys; json.dump({"tokens": [[i % 1024, (7 * i) % 1024] for i in range(40)],
    "stamps": [[i % 60, 9, 0, 3, 6] for i in range(40)]}, open(sys.argv[1], "w"))' "$WORK/fill.json"
ids=()
for i in 1 2 3; do
    http POST "$S/sessions"
    ids+=("$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")")
done
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["session"]=sys.argv[3]; json.dump(d,open(sys.argv[2],"w"))' \
    "$WORK/fill.json" "$WORK/fill0.json" "${ids[0]}"
http POST "$S/generate" --data-binary @"$WORK/fill0.json"
expect "a session holds 40 tokens" 200 'd["length"] == 40'
http POST "$S/sessions"
expect "a client at its limit (max-sessions-per-key 3): 429 session_limit" 429 'd["error"]["code"] == "session_limit"'
has_header Retry-After && pass "... with Retry-After" || fail "... with Retry-After"
# another client (source address 127.0.0.2) fills the table, then cannot evict anyone
from_other() {
    STATUS=$(curl -sS -m 10 --interface 127.0.0.2 -o "$BODY" -D "$HEADERS" -w '%{http_code}' \
        -X POST "$S/sessions" 2>"$WORK/curl.err") || STATUS="curl-failed($(cat "$WORK/curl.err"))"
}
from_other
expect "another client's session" 201
from_other
expect "the table full of sessions used within session-min-idle: 429 too_many_sessions" 429 \
    'd["error"]["code"] == "too_many_sessions" and "session-min-idle" in d["error"]["message"]'
has_header Retry-After && pass "... with Retry-After" || fail "... with Retry-After"
intact=0
for id in "${ids[@]}"; do
    http GET "$S/sessions/$id"
    [ "$STATUS" = 200 ] && intact=$((intact + 1))
done
http GET "$S/sessions/${ids[0]}"
if [ "$intact" = 3 ] && jq_ok 'd["length"] == 40'; then
    pass "the old sessions are intact (the filled one still holds 40 tokens)"
else
    fail "the old sessions are intact" "$intact of 3; $(head -c 200 "$BODY")"
fi

summary
