#!/usr/bin/env bash
# run.sh KRONOSD SRCDIR — the Python client's tests (test_client.py) against the real daemon,
# on the client as pip installs it.
#
# Builds the package clients/python (pyproject.toml) into a wheel offline (pip wheel
# --no-build-isolation --no-index, with the setuptools and wheel a Python has: Debian's
# python3-setuptools and python3-wheel), installs that wheel with each Python's pip into a
# folder of its own, and runs the tests against it (not the source). Starts kronosd twice on
# free loopback ports (one with an API key), then runs the tests with each Python found:
# python3 on PATH and Debian's /usr/bin/python3 (which has pandas when python3-pandas is
# installed), and once with pandas disabled for the plain-dict path.
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
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1

pythons=("$PY")
if [ -x /usr/bin/python3 ] && [ "$(realpath /usr/bin/python3)" != "$(realpath "$PY")" ]; then
    pythons+=(/usr/bin/python3)
fi

# The wheel, built from a copy (a build writes build/ and *.egg-info beside the sources).
cp -r "$SRC/clients/python" "$WORK/client-src"
for py in "${pythons[@]}"; do
    if "$py" -m pip wheel --no-build-isolation --no-deps -w "$WORK/dist" "$WORK/client-src" \
        >"$WORK/wheel.log" 2>&1; then
        pass "pip wheel clients/python ($py)"
        break
    fi
done
wheel=$(ls "$WORK"/dist/kronosd_client-*.whl 2>/dev/null | head -1)
if [ -z "$wheel" ]; then
    cat "$WORK/wheel.log"
    fail "no Python could build the client's wheel (Debian: python3-setuptools python3-wheel)"
    summary
    exit 1
fi

n=0
for py in "${pythons[@]}"; do
    n=$((n + 1))
    site="$WORK/site-$n"
    if ! "$py" -m pip install --no-deps --target "$site" "$wheel" >"$WORK/install.log" 2>&1; then
        cat "$WORK/install.log"
        fail "$py: pip install of the wheel"
        continue
    fi
    # the tests import the installed package, not the source
    export PYTHONPATH=$site
    if (cd "$SRC/tests/python" && "$py" -c 'import sys, kronosd_client as k
sys.exit(0 if k.__file__.startswith(sys.argv[1]) else "imported " + k.__file__)' "$site"); then
        pass "$py: import kronosd_client from the installed wheel"
    else
        fail "$py: import kronosd_client from the installed wheel"
    fi
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
