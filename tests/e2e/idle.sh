#!/usr/bin/env bash
# idle.sh — idle keep-alive connections give way to new clients (idle.py): 300 idle
# connections from 6 addresses against max-connections 200; /health and a forecast from a
# new address are still answered at once.
# Usage: idle.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
make_bodies
start_daemon main --workers 1 --compute-threads 1 --max-connections 200 \
    --max-connections-per-ip 64 --connection-timeout 60
port=${URL_main##*:}
if "$PY" "$SRC/tests/e2e/idle.py" 127.0.0.1 "$port" 300 6 50 "$WORK/golden_forecast.json"; then
    pass "300 idle keep-alive connections do not keep a new client from /health or /forecast"
else
    fail "idle keep-alive connections locked a new client out" "$(tail -5 "$WORK/main.log")"
fi
sleep 5.3 # the guard's summary line comes at most every 5 s
if grep -q "idle keep-alive connections\? to make room" "$WORK/main.log"; then
    pass "the log says idle connections were closed to make room"
else
    fail "no log line about closed idle connections" "$(tail -5 "$WORK/main.log")"
fi
summary
