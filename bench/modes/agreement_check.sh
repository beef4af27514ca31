#!/usr/bin/env bash
# agreement_check.sh BENCH SRC [SCRIPT [ARGS...]] — runs bench/SCRIPT (agreement_check.py)
# with BENCH SRC WORK ARGS, with a Python that has numpy (skipped, as the e2e numpy checks
# are, when none has it).
set -uo pipefail
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronos-agreement.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for py in "$(command -v python3)" /usr/bin/python3; do
    if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
        exec "$py" "$2/bench/modes/${3:-agreement_check.py}" "$1" "$2" "$WORK" "${@:4}"
    fi
done
echo "skip: no Python with numpy"
exit 77
