#!/usr/bin/env bash
# fair.sh KRONOSD SRCDIR — a request counts as one in the queue, however many series it holds.
#
# Shows: while a request of 160 series (4 samples each: 640 decode rows, more than
# max-batch-rows, so most of its forecasts wait in the scheduler) runs, other clients' small
# forecasts are all admitted (200), with queue-size 4; before, its waiting series counted as
# waiting requests and everyone else got 503 overloaded. /metrics counts each request's
# queueing delay once, in its class (light-request-mflop 100: the small forecasts, about 35
# MFLOP on the test model, are light; each series' forecast, about 280, is heavy).
#
# Then fair shares: a client (127.0.0.1) floods 6 heavy forecasts at once (each a few
# seconds, 4 paths: max-batch-rows 5 lets one run at a time) into queue-size 4 with
# key-queue-percent 50: it holds at most 2 waiting places and its others get 429
# queue_share, while another client's (127.0.0.2) small forecasts all get 200 within 5 s
# each (a light job starts beside the heavy one instead of waiting for its rows). Before,
# the flood took every place and the small ones got 503. About 25 s in all.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, rows = rows[0], rows[1:]
def cand(r):
    d = {"timestamps": [x[0] for x in r]}
    for i, n in enumerate(hdr[1:], 1):
        d[n] = [float(x[i]) for x in r]
    return d
json.dump({"series": [{"candles": cand(rows[i * 10:i * 10 + 200])} for i in range(160)],
           "horizon": 16, "samples": 4, "seed": 1}, open(f"{sys.argv[2]}/series.json", "w"))
json.dump({"candles": cand(rows[:64]), "horizon": 16, "seed": 2}, open(f"{sys.argv[2]}/small.json", "w"))
json.dump({"candles": cand(rows[:200]), "horizon": 400, "samples": 4, "max_context": 512, "seed": 3},
          open(f"{sys.argv[2]}/heavy.json", "w"))
PYEOF

start_daemon a --queue-size 4 --light-request-mflop 100
U=$URL_a
curl -sS -m 120 -o "$WORK/series.out" -w '%{http_code}' "$U/forecast" -d @"$WORK/series.json" >"$WORK/series.status" &
SERIES=$!
for _ in $(seq 1 100); do # until the series' forecasts are in the scheduler
    [ "$(metric "$U" kronosd_requests_running)" -ge 1 ] 2>/dev/null && break
    sleep 0.05
done
OK=0 CODES=""
for i in $(seq 1 6); do
    http POST "$U/forecast" -d @"$WORK/small.json" --interface 127.0.0.2
    CODES="$CODES $STATUS"
    [ "$STATUS" = 200 ] && OK=$((OK + 1))
    sleep 0.2
done
wait "$SERIES"
echo "     small forecasts beside the 160-series request:$CODES; the series request: $(cat "$WORK/series.status")"
[ "$OK" = 6 ] && pass "a 160-series request in flight: other clients' small forecasts all get 200 (queue-size 4)" \
    || fail "a large series request leaves room in the queue" "$CODES"
[ "$(cat "$WORK/series.status")" = 200 ] && jq_ok 'len(d["series"]) == 160' "$WORK/series.out" \
    && pass "the series request is answered" || fail "the series request is answered" "$(head -c 200 "$WORK/series.out")"
light=$(metric "$U" 'kronosd_queue_delay_seconds_count{class="light"}')
heavy=$(metric "$U" 'kronosd_queue_delay_seconds_count{class="heavy"}')
bucket=$(metric "$U" 'kronosd_queue_delay_seconds_bucket{class="light",le="+Inf"}')
[ "$light" = 6 ] && [ "$heavy" = 1 ] && [ "$bucket" = 6 ] \
    && pass "/metrics: queueing delay by class, once a request (6 light, 1 heavy)" \
    || fail "/metrics: queueing delay by class" "light $light (+Inf bucket $bucket), heavy $heavy"

start_daemon b --queue-size 4 --key-queue-percent ${KEY_QUEUE_PERCENT:-50} --max-batch-rows 5
U=$URL_b
FLOOD=()
for i in 1 2 3 4 5 6; do
    curl -sS -m 120 -o /dev/null -w '%{http_code}' "$U/forecast" -d @"$WORK/heavy.json" \
        >"$WORK/flood.$i" &
    FLOOD+=($!)
done
for _ in $(seq 1 100); do # until the flood holds its places
    [ "$(metric "$U" kronosd_queue_depth)" -ge 2 ] 2>/dev/null && break
    sleep 0.05
done
OK=0 CODES="" SLOW=""
for i in $(seq 1 6); do
    t0=$(date +%s.%N)
    http POST "$U/forecast" -d @"$WORK/small.json" --interface 127.0.0.2
    t=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}')
    CODES="$CODES $STATUS(${t}s)"
    [ "$STATUS" = 200 ] && awk -v t="$t" 'BEGIN {exit !(t < 5)}' && OK=$((OK + 1))
    sleep 0.2
done
wait "${FLOOD[@]}"
FCODES=$(cat "$WORK"/flood.* | tr -s ' ' | sed 's/\(...\)/\1 /g')
echo "     small forecasts beside one client's flood:$CODES; the flood: $FCODES"
[ "$OK" = 6 ] && pass "one client's flood of heavy forecasts: another client's small ones all get 200 within 5 s" \
    || fail "another client's small forecasts beside a flood" "$CODES"
n429=$(echo "$FCODES" | tr ' ' '\n' | grep -c '^429$')
n200=$(echo "$FCODES" | tr ' ' '\n' | grep -c '^200$')
[ "$n429" -ge 1 ] && [ $((n429 + n200)) = 6 ] && [ "$n200" -ge 2 ] \
    && pass "the flooding client gets 429 queue_share beyond its share, the rest answered ($n200 x 200, $n429 x 429)" \
    || fail "the flooding client's share" "$FCODES"
summary
