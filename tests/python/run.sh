#!/usr/bin/env bash
# run.sh KRONOSD SRCDIR — the Python client's tests (test_client.py) against the real daemon.
#
# Starts kronosd twice on free loopback ports (one with an API key), then runs the tests
# with each Python found: python3 on PATH and Debian's /usr/bin/python3 (which has pandas
# when python3-pandas is installed), and once with pandas disabled for the plain-dict path.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=../e2e/lib.sh
. "$SRC/tests/e2e/lib.sh"

echo "client-test-key" >"$WORK/key"
start_daemon A --workers 1
start_daemon K --workers 1 --api-key-file "$WORK/key"
export KRONOSD_URL=$URL_A KRONOSD_KEY_URL=$URL_K KRONOSD_KEY=client-test-key
export PYTHONPATH="$SRC/clients/python" PYTHONDONTWRITEBYTECODE=1

pythons=("$PY")
if [ -x /usr/bin/python3 ] && [ "$(realpath /usr/bin/python3)" != "$(realpath "$PY")" ]; then
    pythons+=(/usr/bin/python3)
fi
for py in "${pythons[@]}"; do
    has=$("$py" -c 'import pandas' 2>/dev/null && echo "with pandas" || echo "without pandas")
    if (cd "$SRC/tests/python" && timeout 120 "$py" -m unittest -v test_client 2>&1); then
        pass "$py ($has)"
    else
        fail "$py ($has)"
    fi
    if [ "$has" = "with pandas" ]; then
        if (cd "$SRC/tests/python" && KRONOSD_CLIENT_NO_PANDAS=1 timeout 120 "$py" -m unittest test_client 2>&1); then
            pass "$py (pandas disabled)"
        else
            fail "$py (pandas disabled)"
        fi
    fi
done
summary
