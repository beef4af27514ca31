#!/usr/bin/env bash
# waysin.sh — one rule for every way in (waysin.py) against the real daemon.
# Usage: waysin.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
start_daemon main --workers 2 --compute-threads 1
"$PY" "$SRC/tests/e2e/waysin.py" "$URL_main"
