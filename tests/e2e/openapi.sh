#!/usr/bin/env bash
# openapi.sh KRONOSD SRCDIR — the daemon's answers against its GET /openapi.json
# (tests/e2e/openapi.py: every route, success and error, validated with python3-jsonschema;
# the fields and error codes of the code are the document's). Skipped (77) without jsonschema.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

py=""
for p in "$PY" /usr/bin/python3; do
    if [ -x "$p" ] && "$p" -c 'import jsonschema' 2>/dev/null; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "skipped: no python3 with jsonschema (Debian: python3-jsonschema)"
    exit 77
fi

echo "openapi-test-key" >"$WORK/key"
start_daemon A --workers 1 --max-sessions-per-key 3 --max-body-bytes 65536
echo "openapi-admin-key" >"$WORK/admin"
start_daemon K --workers 1 --api-key-file "$WORK/key" --admin-key-file "$WORK/admin"
timeout 120 "$py" "$SRC/tests/e2e/openapi.py" "$SRC" "$URL_A" "$URL_K" openapi-test-key
