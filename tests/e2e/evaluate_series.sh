#!/usr/bin/env bash
# evaluate_series.sh — POST /evaluate with "series": many aligned series evaluated together,
# with their cross-sectional scores (evaluate_series_check.py reads the whole answers):
#   * six series of 300 candles on the same timestamps, made from tests/data/kline_5min.csv:
#     four slices of it, one a copy scaled by 2 (its returns tie with the first's), one with
#     deterministic noise;
#   * each series' answer equals the single-series /evaluate of it (but elapsed_ms);
#   * every cross-sectional score recomputed with numpy (skipped when no Python has numpy);
#   * streamed: progress over every series' origins, then the same result;
#   * kronosd evaluate answers the series form as the server does (misaligned: exit 1);
#   * refusals: a misaligned timestamp (naming the series, the candle and the origin; one
#     outside every origin's candles is accepted), fewer candles (fewer origins), one
#     series, an empty list, a series without candles, an unknown field, top_k out of
#     range, the whole request's cost over max-request-cost.
# Usage: evaluate_series.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import copy, csv, datetime, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
W = sys.argv[2]
TS = [r["timestamps"] for r in rows[:300]]
PRICES = ("open", "high", "low", "close")

def series(start, scale=1.0, noise=0.0):
    d = {"timestamps": TS}
    for k in ("open", "high", "low", "close", "volume", "amount"):
        d[k] = [float(r[k]) for r in rows[start:start + 300]]
    for k in PRICES:  # one factor a candle keeps high >= open, close >= low
        d[k] = [x * scale * (1 + noise * math.sin(1.7 * i)) for i, x in enumerate(d[k])]
    return {"candles": d}

S = [series(0), series(300), series(600), series(0, scale=2.0), series(900, noise=0.003),
     series(1200)]
base = {"lookback": 64, "horizon": 4, "stride": 20, "samples": 4, "seed": 3,
        "quantiles": [0.1, 0.5, 0.9], "return_origins": True}
def dump(name, body):
    json.dump(body, open(f"{W}/{name}.json", "w"))
dump("series_body", dict(base, series=S))

def shifted(i):  # series 2 with candle i a minute later (still increasing)
    s = copy.deepcopy(S)
    t = datetime.datetime.fromisoformat(TS[i]) + datetime.timedelta(minutes=1)
    s[2]["candles"]["timestamps"] = TS[:i] + [t.isoformat(sep=" ")] + TS[i + 1:]
    return dict(base, series=s)
dump("misaligned", shifted(145))  # origin 4 (144) forecasts candles 144..147 from 143's close
dump("outside", shifted(150))     # in no origin's last candle or horizon
short = copy.deepcopy(S)
short[1]["candles"] = {k: v[:280] for k, v in short[1]["candles"].items()}
dump("short", dict(base, series=short))
dump("one", dict(base, series=S[:1]))
dump("empty", dict(base, series=[]))
dump("no_candles", dict(base, series=[S[0], {}]))
dump("unknown_in_series", dict(base, series=[S[0], dict(S[1], horizon=4)]))
dump("k_high", dict(base, series=S, cross_section={"top_k": 4}))
dump("k_zero", dict(base, series=S, cross_section={"top_k": 0}))
dump("k_unknown", dict(base, series=S, cross_section={"k": 2}))
dump("two", dict(base, series=S[:2]))
dump("solo", dict(base, candles=S[0]["candles"]))
PYEOF

start_daemon main --workers 1 --compute-threads 1 --max-request-cost 100000
U=$URL_main

CHECK="$SRC/tests/e2e/evaluate_series_check.py"
run_check() { check_part "$CHECK" "$1" "$2"; }
run_check solo "$PY"
numpy_part "$CHECK" numpy

# streamed: progress counts every series' origins, then the answer of the JSON request
curl -sS -m 60 -N "$U/evaluate" -H 'Accept: text/event-stream' \
    --data-binary @"$WORK/series_body.json" >"$WORK/stream.txt"
if "$PY" - "$WORK/stream.txt" "$WORK/series_k_default.json" <<'PYEOF'; then
import json, sys
events = [e for e in open(sys.argv[1]).read().split("\n\n") if e.strip()]
data = [json.loads(e.split("data: ", 1)[1]) for e in events]
want = json.load(open(sys.argv[2]))
got = data[-1]
for s in got["series"] + want["series"]:
    s.pop("usage")
sys.exit(not (events[-1].startswith("event: result") and got == want
              and [d["done"] for d in data[:-1]] == list(range(72))
              and all(d["total"] == 72 for d in data[:-1])))
PYEOF
    pass "streamed: progress over the 72 origins of 6 series, then the same answer"
else fail "streamed: progress over the 72 origins of 6 series, then the same answer" "$(tail -c 300 "$WORK/stream.txt")"; fi

http POST "$U/evaluate" --data-binary @"$WORK/misaligned.json"
expect "a misaligned timestamp: 400 naming the series, the candle and the origin" 400 \
    'd["error"]["message"].startswith("series[2].candles.timestamps[145]: ") and "origin 144 (number 5 of 12)" in d["error"]["message"]'
http POST "$U/evaluate" --data-binary @"$WORK/outside.json"
expect "a timestamp in no origin's candles differs: accepted" 200 'd["cross_section"]["series"] == 6'
http POST "$U/evaluate" --data-binary @"$WORK/short.json"
expect "fewer candles, fewer origins: 400 naming the series" 400 \
    'd["error"]["message"].startswith("series[1]: 11 origins, where series[0] has 12")'
http POST "$U/evaluate" --data-binary @"$WORK/one.json"
expect "one series: 400" 400 'd["error"]["message"].startswith("series: cross-sectional scores need at least 2 series, got 1")'
http POST "$U/evaluate" --data-binary @"$WORK/empty.json"
expect "an empty series list: 400" 400 'd["error"]["message"].startswith("series: must be a non-empty array")'
http POST "$U/evaluate" --data-binary @"$WORK/no_candles.json"
expect "a series without candles: 400 naming it" 400 'd["error"]["message"] == "series[1].candles: missing"'
http POST "$U/evaluate" --data-binary @"$WORK/unknown_in_series.json"
expect "a series with a field of its own: 400 naming it" 400 \
    'd["error"]["message"].startswith("series[1]: unknown field \"horizon\"")'
http POST "$U/evaluate" --data-binary @"$WORK/k_high.json"
expect "top_k 4 of 6 series: 400 with its range" 400 \
    'd["error"]["message"].startswith("cross_section.top_k: must be an integer in 1..3") and "got 4" in d["error"]["message"]'
http POST "$U/evaluate" --data-binary @"$WORK/k_zero.json"
expect "top_k 0: 400" 400 'd["error"]["message"].startswith("cross_section.top_k: must be an integer >= 1")'
http POST "$U/evaluate" --data-binary @"$WORK/k_unknown.json"
expect "an unknown field of cross_section: 400" 400 'd["error"]["message"].startswith("cross_section: unknown field \"k\"")'

# kronosd evaluate: the one-shot command answers the series form as the server does
"$KRONOSD" evaluate --model "$MODEL" --compact "$WORK/series_body.json" >"$WORK/cli.out" 2>"$WORK/cli.err"
if "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); [s.pop("usage") for d in (a, b) for s in d["series"]]; sys.exit(a != b)' \
    "$WORK/cli.out" "$WORK/series_k_default.json"; then pass "kronosd evaluate answers the series form as POST /evaluate does"
else fail "kronosd evaluate answers the series form as POST /evaluate does" "$(head -c 300 "$WORK/cli.err" "$WORK/cli.out")"; fi
"$KRONOSD" evaluate --model "$MODEL" --compact "$WORK/series_calibrated_body.json" >"$WORK/cli.out" 2>"$WORK/cli.err"
if "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); [s.pop("usage") for d in (a, b) for s in d["series"]]; sys.exit(a != b)' \
    "$WORK/cli.out" "$WORK/series_calibrated.json"; then pass "kronosd evaluate answers the calibrated series form as POST /evaluate does"
else fail "kronosd evaluate answers the calibrated series form as POST /evaluate does" "$(head -c 300 "$WORK/cli.err" "$WORK/cli.out")"; fi
"$KRONOSD" evaluate --model "$MODEL" "$WORK/misaligned.json" >/dev/null 2>"$WORK/cli.err"
if [ $? -eq 1 ] && grep -q 'series\[2\].candles.timestamps\[145\]' "$WORK/cli.err"; then
    pass "kronosd evaluate: misaligned series are exit 1 naming the series"
else fail "kronosd evaluate: misaligned series are exit 1 naming the series" "$(cat "$WORK/cli.err")"; fi

# the whole request's work against max-request-cost: one series fits, two together do not
start_daemon small --workers 1 --compute-threads 1 --max-request-cost 1
http POST "$URL_small/evaluate" --data-binary @"$WORK/solo.json"
expect "one series' 12 origins fit max-request-cost 1" 200 'd["usage"]["planned_gflop"] > 0.5'
http POST "$URL_small/evaluate" --data-binary @"$WORK/two.json"
expect "two series' 24 origins together: 422 too_large" 422 \
    'd["error"]["code"] == "too_large" and "24 origins of 2 series" in d["error"]["message"]'
summary
