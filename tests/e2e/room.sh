#!/usr/bin/env bash
# room.sh KRONOSD SRCDIR — every byte counted, nobody's session taken.
#
# Shows: a session used every 0.5 s survives other addresses creating sessions into a full
# pool (they get 503 no_room with Retry-After instead); a key over max-session-bytes-per-key
# gets 429 session_bytes_limit; a key's creation evicts its own idle session before
# another's older one; 30 creations of 1,500-candle sessions keep the sessions' memory
# outside the pool within session-memory-bytes and the process's peak RSS within the
# budgets plus a constant. About 10 s.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'EOF'
import csv, json, math, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, rows = rows[0], rows[1:]
def cand(r):
    d = {"timestamps": [x[0] for x in r]}
    for i, n in enumerate(hdr[1:], 1):
        d[n] = [float(x[i]) for x in r]
    return d
json.dump({"candles": cand(rows[:600])}, open(f"{sys.argv[2]}/c600.json", "w"))
# 1,500 candles: Unix seconds, a wave
n = 1500
c = {"timestamps": [1700000000 + 300 * i for i in range(n)]}
for k, name in enumerate(["open", "high", "low", "close"]):
    c[name] = [10 + math.sin(i / 50) + 0.01 * k for i in range(n)]
c["volume"] = [1000 + 10 * math.cos(i / 7) for i in range(n)]
json.dump({"candles": c}, open(f"{sys.argv[2]}/c1500.json", "w"))
EOF
FC='{"horizon": 4, "seed": 1}'
# from ADDR: curl from another loopback address, another owner without an API key
as() { local addr=$1; shift; http "$@" --interface "$addr"; }

# ---- min-idle and per-key bytes -----------------------------------------------------------------
start_daemon a --pool-bytes 4M --max-session-bytes-per-key 3M
U=$URL_a
as 127.0.0.1 POST "$U/sessions" -d @"$WORK/c600.json"
expect "A (127.0.0.1) creates a session" 201
SA=$(sid)
B_OK=0 B_LIMIT=0 C_OK=0 C_ROOM=0 A_OK=0 RA=""
for i in $(seq 1 4); do
    as 127.0.0.2 POST "$U/sessions" -d @"$WORK/c600.json"
    [ "$STATUS" = 201 ] && B_OK=$((B_OK + 1))
    if [ "$STATUS" = 429 ] && jq_ok 'd["error"]["code"] == "session_bytes_limit"' && has_header Retry-After; then
        B_LIMIT=$((B_LIMIT + 1))
    fi
done
# the pool's session share is full now (A's and B's); A forecasts every 0.5 s meanwhile
for i in $(seq 1 6); do
    as 127.0.0.3 POST "$U/sessions" -d @"$WORK/c600.json"
    [ "$STATUS" = 201 ] && C_OK=$((C_OK + 1))
    if [ "$STATUS" = 503 ] && jq_ok 'd["error"]["code"] == "no_room"' && has_header Retry-After; then
        C_ROOM=$((C_ROOM + 1))
        RA=$(sed -n 's/^Retry-After: *\([0-9]*\).*/\1/Ip' "$HEADERS")
    fi
    if [ $((i % 2)) = 0 ]; then
        as 127.0.0.1 POST "$U/sessions/$SA/forecast" -d "$FC"
        [ "$STATUS" = 200 ] && A_OK=$((A_OK + 1))
        sleep 0.5 # all within min-idle (30 s): how often matters not, only that A keeps using it
    fi
done
echo "     B: $B_OK created, $B_LIMIT refused 429; C: $C_OK created, $C_ROOM refused 503 (Retry-After $RA s); A's forecasts: $A_OK of 3"
[ "$B_OK" = 2 ] && [ "$B_LIMIT" = 2 ] \
    && pass "a key's sessions stop at max-session-bytes-per-key: 429 session_bytes_limit with Retry-After" \
    || fail "max-session-bytes-per-key" "B: $B_OK created, $B_LIMIT refused"
[ "$C_ROOM" -ge 1 ] && [ "${RA:-0}" -ge 30 ] \
    && pass "a full pool of sessions used within min-idle: the creator gets 503 no_room, Retry-After ~min-idle" \
    || fail "a full pool: 503 no_room" "C: $C_OK created, $C_ROOM refused, Retry-After $RA"
[ "$A_OK" = 3 ] && [ "$(metric "$U" kronosd_session_evictions_total)" = 0 ] \
    && pass "the session used every 0.5 s survives others filling the pool (no eviction at all)" \
    || fail "the session used every 0.5 s survives" "$A_OK forecasts, $(metric "$U" kronosd_session_evictions_total) evictions"
[ "$(metric "$U" kronosd_session_refusals_no_room_total)" -ge 1 ] && [ "$(metric "$U" kronosd_session_refusals_bytes_limit_total)" = 2 ] \
    && pass "/metrics counts both refusals" || fail "/metrics counts both refusals" "$(curl -s "$U/metrics" | grep refusals_)"

# ---- a key's creations evict its own sessions first ------------------------------------------------
start_daemon b --pool-bytes 4M --session-min-idle 1
U=$URL_b
as 127.0.0.1 POST "$U/sessions" -d @"$WORK/c600.json"
SA=$(sid)
PER=$(metric "$U" kronosd_pool_bytes_used)
SHARE=$(metric "$U" kronosd_session_pool_budget_bytes)
FIT=$((SHARE / PER - 1)) # B's sessions that fit beside A's in the sessions' share
BS=()
for i in $(seq 1 "$FIT"); do
    as 127.0.0.2 POST "$U/sessions" -d @"$WORK/c600.json"
    BS+=("$(sid)")
done
sleep 1.2 # every session idle past min-idle; A's the least recently used
as 127.0.0.2 POST "$U/sessions" -d @"$WORK/c600.json"
expect "B creates one more session into the full pool" 201
http GET "$U/sessions/$SA"
A_STATUS=$STATUS
http GET "$U/sessions/${BS[0]}"
[ "$A_STATUS" = 200 ] && [ "$STATUS" = 404 ] && jq_ok '"evicted" in d["error"]["message"]' \
    && pass "the creator's own oldest session was evicted, not another key's older one" \
    || fail "own sessions first" "A's: $A_STATUS, B's oldest: $STATUS $(head -c 200 "$BODY")"

# ---- 30 sessions of 1,500 candles: within the budgets ------------------------------------------------
start_daemon c --pool-bytes 16M --session-memory-bytes 4M --session-min-idle 0
U=$URL_c
PID=$PID_c
RSS0=$(awk '/^VmRSS/ { print $2 }' "/proc/$PID/status")
OK=0 MAXMEM=0
for i in $(seq 1 30); do
    http POST "$U/sessions" -d @"$WORK/c1500.json"
    [ "$STATUS" = 201 ] && OK=$((OK + 1))
    m=$(metric "$U" kronosd_session_memory_bytes)
    [ "$m" -gt "$MAXMEM" ] && MAXMEM=$m
done
HWM=$(awk '/^VmHWM/ { print $2 }' "/proc/$PID/status")
echo "     30 creations of 1,500-candle sessions: $OK answered 201; session memory at most $((MAXMEM >> 10)) KiB (budget 4096); peak RSS $((HWM >> 10)) MiB, $((RSS0 >> 10)) MiB after start"
[ "$OK" = 30 ] && [ "$MAXMEM" -le $((4 << 20)) ] && [ "$MAXMEM" -gt 0 ] \
    && pass "30 creations of 1,500-candle sessions: session memory within session-memory-bytes" \
    || fail "session memory within its budget" "$OK created, at most $MAXMEM bytes"
# peak RSS within what started + the pool + session memory + 64 MiB (request bodies, parsing);
# not under AddressSanitizer, whose shadow memory and quarantine are no budget's
if sanitized "$KRONOSD"; then
    echo "     (peak RSS not checked: an AddressSanitizer build)"
elif [ "$HWM" -le $((RSS0 + (16 + 4 + 64) * 1024)) ]; then
    pass "peak RSS within the budgets plus a constant"
else
    fail "peak RSS within the budgets plus a constant" "$HWM KiB peak, $RSS0 KiB after start"
fi

summary
