#!/usr/bin/env bash
# agreement_check.sh BENCH SRC — runs agreement_check.py with a Python that has numpy
# (skipped, as the e2e numpy checks are, when none has it).
set -uo pipefail
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronos-agreement.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for py in "$(command -v python3)" /usr/bin/python3; do
    if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
        exec "$py" "$2/bench/agreement_check.py" "$1" "$2" "$WORK"
    fi
done
echo "skip: no Python with numpy"
exit 77
