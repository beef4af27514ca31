#!/usr/bin/env bash
# calib_live.sh — the issue's live target on the whole second half of kline_5min.csv: a
# session created with the first half and "calibration": "online", then the 1250 other candles
# appended one at a time with a forecast (horizon 8, 16 paths) before each; every calibrated
# number recomputed with numpy, and the 80% band's running coverage must end within 0.06 of
# 0.80 (tests/e2e/calib_live.sh with its whole run; about 2-3 minutes in a release build).
#
#   bench/series/calib_live.sh [BUILD_DIR]
set -uo pipefail
BUILD=${1:-build}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CALIB_LIVE_FULL=1 exec bash "$SRC/tests/e2e/calib_live.sh" "$BUILD/kronosd" "$SRC"
