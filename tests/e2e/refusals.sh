#!/usr/bin/env bash
# refusals.sh KRONOSD SRCDIR — every model route counts its refusals alike.
#
# The six routes that run the model (/forecast, a "series" /forecast, /sessions/{id}/forecast,
# /generate, /sessions/{id}/generate, /tokenize) all go through one submit path. Each gets
# an invalid request (400) and a refused one (503 overloaded: both queues held full by long
# requests), and the kronosd_requests_* counters of /metrics must move the same way for
# every route: refused{reason="invalid"} by one, then refused{reason="busy"} by one, and
# nothing else (admitted, timed out, cancelled). The daemon has one worker, a queue of one
# and 256 decode rows, so that two long requests on each lane fill it deterministically.
set -u
[ $# -eq 2 ] || { echo "usage: $0 KRONOSD SRCDIR" >&2; exit 2; }
KRONOSD=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/e2e/lib.sh" # shellcheck source=lib.sh

# one compute thread: the two lanes' holders then busy two threads at most, and /metrics
# still answers promptly on a 2-core machine (under sanitizers too)
start_daemon A --workers 1 --queue-size 1 --max-batch-rows 256 --max-request-cost 1000000 \
    --request-timeout 300 --access-log false --compute-threads 1
A=$URL_A
"$PY" - "$GOLDEN" "$WORK" <<'EOF'
import json, sys
inp = json.load(open(sys.argv[1]))["cases"][0]["input"]
w = sys.argv[2]
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
dump("forecast", {"candles": inp, "horizon": 4, "top_k": 1})
dump("series", {"series": [{"candles": inp}, {"candles": inp}], "horizon": 4, "top_k": 1})
dump("session_forecast", {"horizon": 4, "top_k": 1})
stamps = [[0, 11, 1, 18, 6], [5, 11, 1, 18, 6]] # [minute, hour, weekday, day, month]
dump("generate", {"tokens": [[1, 2], [3, 4]], "stamps": stamps, "max_new_tokens": 2,
                  "future_stamps": [[10, 11, 1, 18, 6], [15, 11, 1, 18, 6]], "top_k": 1})
dump("tokenize", {"candles": inp})
dump("candle_session", {"candles": inp})
# the lanes' holders: the reference path on the only worker (seconds a path), and paths
# that take every decode row of the scheduler (256)
dump("worker_hold", {"candles": inp, "horizon": 400, "samples": 64, "use_cache": False, "top_k": 1})
dump("sched_hold", {"candles": inp, "horizon": 440, "samples": 256, "top_k": 1})
dump("sched_wait", {"candles": inp, "horizon": 440, "samples": 1, "top_k": 1})
EOF

# the sessions the session routes name
session_id() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY"; }
http POST "$A/sessions"
expect "a token session" 201
TOKEN_SESSION=$(session_id)
http POST "$A/sessions" -d @"$WORK/candle_session.json"
expect "a candle session" 201
CANDLE_SESSION=$(session_id)

ROUTES=(forecast series session_forecast generate session_generate tokenize)
route_url() {
    case $1 in
    forecast | series) echo "$A/forecast" ;;
    session_forecast) echo "$A/sessions/$CANDLE_SESSION/forecast" ;;
    generate) echo "$A/generate" ;;
    session_generate) echo "$A/sessions/$TOKEN_SESSION/generate" ;;
    tokenize) echo "$A/tokenize" ;;
    esac
}
route_body() { # the route's valid request
    case $1 in
    session_generate) echo "$WORK/generate.json" ;;
    *) echo "$WORK/$1.json" ;;
    esac
}

# The model requests' counters, one "name value" line each.
counters() {
    curl -sS -m 10 "$A/metrics" | grep -E '^kronosd_requests_(refused|admitted|timed_out|cancelled)' |
        sort
}
# delta BEFORE AFTER: the counters that moved, "name +n" each, on one line.
delta() {
    join <(echo "$1") <(echo "$2") | awk '$3 != $2 {printf "%s +%d ", $1, $3 - $2}'
}

# send ROUTE KIND STATUS: one request (KIND invalid: an unknown field added) that must answer
# STATUS; prints the counters that moved.
send() {
    local route=$1 kind=$2 want=$3 before after body
    body=$(route_body "$route")
    if [ "$kind" = invalid ]; then
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["no_such_field"]=1; print(json.dumps(d))' \
            "$body" >"$WORK/send.json"
        body="$WORK/send.json"
    fi
    before=$(counters)
    http POST "$(route_url "$route")" -d @"$body"
    after=$(counters)
    if [ "$STATUS" != "$want" ]; then # said instead of the counters, so that check fails
        echo "status $STATUS, not $want: $(head -c 300 "$BODY")"
        return
    fi
    delta "$before" "$after"
}

# check KIND STATUS WANT: every route's KIND request answers STATUS and moves exactly WANT.
check() {
    local kind=$1 status=$2 want=$3 route moved
    for route in "${ROUTES[@]}"; do
        moved=$(send "$route" "$kind" "$status")
        if [ "$moved" = "$want" ]; then
            pass "$route: a $kind request ($status) moves $want"
        else
            fail "$route: a $kind request ($status) moved '$moved', expected '$want'"
        fi
    done
}

# ---- invalid: 400 on each route, refused{invalid} by one and nothing else ----------------
check invalid 400 'kronosd_requests_refused_total{reason="invalid"} +1 '

# ---- the valid requests are admitted, each by one (the lanes are free) ----------------------
for route in "${ROUTES[@]}"; do
    before=$(counters)
    http POST "$(route_url "$route")" -d @"$(route_body "$route")"
    moved=$(delta "$before" "$(counters)")
    [ "$STATUS" = 200 ] && [ "$moved" = 'kronosd_requests_admitted_total +1 ' ] &&
        pass "$route: a valid request is admitted once" ||
        fail "$route: a valid request answered $STATUS and moved '$moved'" "$(head -c 300 "$BODY")"
done

# ---- refused: both lanes full, 503 on each route, refused{busy} by one ---------------------
hold() { # NAME: a long request in the background, its curl's pid in HOLD_NAME
    curl -sS -m 600 -o /dev/null -X POST "$A/forecast" -d @"$WORK/$1.json" 2>/dev/null &
    BG_PIDS+=($!)
    printf -v "HOLD_$1" '%s' "$!"
}
gauge_at_least() { # NAME N: until the metric is at least N (60 s at most)
    local v end=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$end" ]; do
        v=$(metric "$A" "$1")
        [ -n "$v" ] && [ "$v" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
hold worker_hold # on the only worker
gauge_at_least kronosd_workers_busy 1 || fail "the reference forecast holds the worker"
cp "$WORK/worker_hold.json" "$WORK/worker_hold2.json"
hold worker_hold2 # waits in the worker queue: it is full
gauge_at_least kronosd_queue_depth 1 || fail "a second reference forecast waits for the worker"
hold sched_hold # 256 paths: every decode row of the scheduler
# running: the reference forecast on the worker and these paths on the scheduler (the one
# that follows must find them there, not join them)
gauge_at_least kronosd_requests_running 2 || fail "256 paths run on the scheduler"
hold sched_wait # waits for a row: the scheduler's queue is full
gauge_at_least kronosd_queue_depth 2 || fail "a forecast waits for the scheduler"
check refused 503 'kronosd_requests_refused_total{reason="busy"} +1 '

summary
