#!/usr/bin/env bash
# calibration_columns.sh — open, high and low calibrated beside close, end to end
# (calibration_columns_check.py reads the whole answers):
#   * numpy: a rolling walk-forward's column shifts, each origin's calibrated column
#     quantiles (from the outcomes before it only), each column's raw and calibrated
#     coverage per band and step, and the fitted object's column shifts, recomputed from each
#     origin's paths (the /forecast of its window) and the candles;
#   * bytes: /forecast with the fitted object answers, for open, high and low, the calibrated
#     quantiles /evaluate answers for that origin with it;
#   * versions: a version 1 object (no columns) still calibrates close only; a version 1
#     object with columns, or a column of the wrong size, is a 400 naming the field.
# Usage: calibration_columns.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

series_json 700

start_daemon main --workers 1 --compute-threads 1 --max-request-cost 100000
U=$URL_main

CHECK="$SRC/tests/e2e/calibration_columns_check.py"
run_check() { check_part "$CHECK" "$1" "$2"; }
numpy_part "$CHECK" numpy
run_check bytes "$PY"
run_check versions "$PY"
summary
