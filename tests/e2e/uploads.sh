#!/usr/bin/env bash
# uploads.sh — the upload budget (uploads.py): 24 stalled uploads of 4 MiB against
# upload-budget 32M hold at most the budget, the rest are refused, and RSS comes back
# after they close and a 5 MiB JSON body has been parsed.
# Usage: uploads.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
DAEMON_ENV=(-u MALLOC_PERTURB_) # meson's: it would touch every page the pool reserves
start_daemon main --workers 1 --compute-threads 1 --max-body-bytes 4M --upload-budget 32M \
    --read-timeout 10
port=${URL_main##*:}
san=""
sanitized "$KRONOSD" && san=sanitized
if "$PY" "$SRC/tests/e2e/uploads.py" 127.0.0.1 "$port" "$PID_main" 24 $((4 << 20)) \
    $(((4 << 20) - 65536)) $((32 << 20)) $san; then
    pass "stalled uploads hold at most upload-budget, and memory goes back after"
else
    fail "the upload budget" "$(tail -5 "$WORK/main.log")"
fi
# a body declared beyond what is left of the budget is refused before it is read
head -c $(((4 << 20) - 1)) /dev/zero | tr '\0' ' ' >"$WORK/spaces"
http POST "$URL_main/forecast" -H 'Content-Type: application/json' --data-binary @"$WORK/spaces"
expect "an idle daemon takes a 4 MiB body again (the budget was given back)" 400 \
    'd["error"]["code"] == "invalid_json"'
summary
