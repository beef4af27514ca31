#!/usr/bin/env bash
# anomalies.sh — /evaluate's anomaly flags end to end (anomalies_check.py recomputes them):
#   * raw, calibrated (rolling) and the "series" form: every flagged origin-step recomputed
#     with numpy from the answer's by_origin detail (skipped when no Python here has numpy);
#   * refusals: a band that is not one of the request's symmetric pairs (400 naming
#     anomalies.band and listing the pairs), a malformed band, an unknown field;
#   * /metrics: kronosd_anomalies_total and kronosd_anomaly_checks_total move by the answers'
#     counts.
# Usage: anomalies.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

series_json 400
"$PY" - "$WORK/series.json" "$WORK" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
def dump(name, anomalies, quantiles=(0.05, 0.1, 0.5, 0.9, 0.95)):
    json.dump({"candles": d, "lookback": 64, "horizon": 4, "stride": 40,
               "quantiles": list(quantiles), "anomalies": anomalies},
              open(f"{sys.argv[2]}/{name}.json", "w"))
dump("not_a_pair", {"band": "0.2-0.8"})
dump("reversed", {"band": "0.9-0.1"})
dump("no_pairs", {"band": "0.1-0.9"}, quantiles=(0.5,))
dump("malformed", {"band": "0.1 to 0.9"})
dump("not_string", {"band": 0.9})
dump("unknown", {"band": "0.1-0.9", "level": 0.9})
dump("not_object", "0.1-0.9")
PYEOF

start_daemon main --workers 1 --compute-threads 1
U=$URL_main

refuse() {
    http POST "$U/evaluate" --data-binary @"$WORK/$1.json"
    expect "$2" 400 "$3"
}
refuse not_a_pair "a band not among the pairs: 400 naming anomalies.band, listing the pairs" \
    'd["error"]["message"].startswith("anomalies.band: ") and "\"0.05-0.95\"" in d["error"]["message"] and "\"0.1-0.9\"" in d["error"]["message"] and d["error"]["code"] == "invalid_request"'
refuse reversed "a pair named high-low: 400" 'd["error"]["message"].startswith("anomalies.band: ")'
refuse no_pairs "quantiles without a pair: 400" \
    'd["error"]["message"].startswith("anomalies.band: ") and "no symmetric pair" in d["error"]["message"]'
refuse malformed "a malformed band: 400" 'd["error"]["message"].startswith("anomalies.band: ")'
refuse not_string "a band that is no string: 400" 'd["error"]["message"].startswith("anomalies.band: ")'
refuse unknown "an unknown field in anomalies: 400" '"anomalies" in d["error"]["message"] and "level" in d["error"]["message"]'
refuse not_object "anomalies not an object: 400" 'd["error"]["message"].startswith("anomalies: ")'

if [ -n "$NP_PY" ]; then
    before=$(metric "$U" 'kronosd_anomalies_total{source="evaluate"}')
    before_checks=$(metric "$U" 'kronosd_anomaly_checks_total{source="evaluate"}')
    if out=$("$NP_PY" "$SRC/tests/e2e/anomalies_check.py" "$U" "$WORK" 2>&1); then
        echo "$out" | sed 's/^/     /'
        pass "numpy: $(echo "$out" | grep -c '^ok') checks"
    else
        echo "$out" | sed 's/^/     /'
        fail "numpy"
    fi
    read -r flagged checked <"$WORK/flagged"
    after=$(metric "$U" 'kronosd_anomalies_total{source="evaluate"}')
    after_checks=$(metric "$U" 'kronosd_anomaly_checks_total{source="evaluate"}')
    if [ -n "$before" ] && [ $((after - before)) -eq "$flagged" ] && [ "$flagged" -gt 0 ] &&
        [ $((after_checks - before_checks)) -eq "$checked" ]; then
        pass "metrics: kronosd_anomalies_total +$flagged, kronosd_anomaly_checks_total +$checked"
    else
        fail "metrics: the counters move by the answers' counts" \
            "anomalies $before -> $after (want +$flagged), checks $before_checks -> $after_checks (want +$checked)"
    fi
else
    skip "numpy: no Python with numpy"
fi
summary
