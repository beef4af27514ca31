#!/usr/bin/env bash
# journal_cycles.sh — the journal's kill -9 promise at length: CYCLES (default 20) kill -9
# cycles per journal-fsync mode under appends, generates, creates and deletes, each checked
# for anything acknowledged and lost (tests/e2e/crash_cycles.py; the tests run two a mode).
#
#   bench/series/journal_cycles.sh [BUILD_DIR] [MODEL_DIR]
#
# BUILD_DIR defaults to build, MODEL_DIR to tests/data/tiny. Prints a line a cycle and the
# totals per mode; exit 1 if any cycle lost anything.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
MODEL=${2:-$SRC/tests/data/tiny}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-cycles.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), family" \
    "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model" \
    "$(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) CPUs, $(date -u +%FT%TZ)"
python3 "$SRC/tests/e2e/crash_cycles.py" "$BUILD/kronosd" "$MODEL" "$SRC/tests/data/kline_5min.csv" \
    "$WORK" --cycles "${CYCLES:-20}"
