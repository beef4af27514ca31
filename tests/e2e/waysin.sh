#!/usr/bin/env bash
# waysin.sh — one rule for every way in (waysin.py) against the real daemon.
# Usage: waysin.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
echo "max-candles = 100" >"$WORK/w.conf"
start_daemon main --workers 2 --compute-threads 1 --config "$WORK/w.conf"
"$PY" "$SRC/tests/e2e/waysin.py" "$URL_main" || FAILED=$((FAILED + 1))

# a reloaded max-candles holds for a session made before it, from its next append
U=$URL_main
"$PY" - "$WORK" <<'EOF2'
import datetime, json, sys
t0 = datetime.datetime(2024, 6, 18, 9, 0)
def rows(a, b):
    return [{"timestamp": (t0 + datetime.timedelta(minutes=5 * i)).isoformat(), "open": 1.0 + i,
             "high": 2.0 + i, "low": 0.5 + i, "close": 1.5 + i} for i in range(a, b)]
json.dump({"candles": rows(0, 60)}, open(f"{sys.argv[1]}/c60.json", "w"))
json.dump({"candles": rows(60, 90)}, open(f"{sys.argv[1]}/a30.json", "w"))
EOF2
http POST "$U/sessions" --data-binary @"$WORK/c60.json"
expect "a session of 60 candles under max-candles 100" 201
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
echo "max-candles = 80" >"$WORK/w.conf"
kill -HUP "$PID_main"
for i in $(seq 1 100); do grep -q "reload: max-candles" "$WORK/main.log" && break; sleep 0.05; done
http POST "$U/sessions/$SID/candles" --data-binary @"$WORK/a30.json"
expect "after SIGHUP to max-candles 80, appending 30 to it is refused" 422 \
    'd["error"]["code"] == "too_large" and "limit of 80" in d["error"]["message"]'
summary
