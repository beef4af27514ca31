#!/usr/bin/env bash
# body_memory.sh — one 8 MiB JSON candle body costs the daemon under 3 times its size in
# memory to parse (body_memory.py prints what it and a forecast of it took).
# Usage: body_memory.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
DAEMON_ENV=(-u MALLOC_PERTURB_) # meson's: it would touch every page the pool reserves
start_daemon main --workers 1 --compute-threads 1 --max-body-bytes 8M --max-candles 200000
port=${URL_main##*:}
san=""
sanitized "$KRONOSD" && san=sanitized
if "$PY" "$SRC/tests/e2e/body_memory.py" 127.0.0.1 "$port" "$PID_main" $((8 << 20)) \
    $san >"$WORK/memory.txt"; then
    pass "an 8 MiB candle body is parsed in under 3x its size: $(head -1 "$WORK/memory.txt")"
else
    fail "an 8 MiB candle body's memory" "$(cat "$WORK/memory.txt"; tail -5 "$WORK/main.log")"
fi
cat "$WORK/memory.txt"
summary
