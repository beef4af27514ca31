#!/usr/bin/env bash
# intake.sh KRONOSD SRCDIR — a model request is read in one order, whatever route reads it.
#
# /forecast and /evaluate read the query first, then the body, then the model it names, then
# the request's fields; the first thing wrong answers, and is counted as a refusal (the
# counter kronosd_requests_refused_total{reason="invalid"}) when it is the request's fault,
# not when the model named is not there (404). Each request below has two things wrong: the
# answer must name the first, and the counter move by what that one counts.
set -u
[ $# -eq 2 ] || { echo "usage: $0 KRONOSD SRCDIR" >&2; exit 2; }
KRONOSD=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/e2e/lib.sh" # shellcheck source=lib.sh

start_daemon A --access-log false
A=$URL_A
"$PY" - "$GOLDEN" "$WORK" <<'EOF'
import json, sys
inp = json.load(open(sys.argv[1]))["cases"][0]["input"]
w = sys.argv[2]
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
dump("nomodel_badfield", {"candles": inp, "horizon": 0, "model": "nope"})
dump("series", {"series": [{"candles": inp}, {"candles": inp}], "horizon": 4})
dump("badmodel_type", {"candles": inp, "horizon": 4, "model": 7, "bogus": 1})
dump("eval_nomodel", {"candles": inp, "horizon": 2, "model": "nope"})
EOF
head -81 "$SRC/tests/data/kline_5min.csv" >"$WORK/candles.csv"
printf '{"candles": ' >"$WORK/broken.json" # not JSON

INVALID='kronosd_requests_refused_total{reason="invalid"}'
# check NAME STATUS CODE MESSAGE-START COUNTED: the last answer, and the counter's move
# since BEFORE.
check() {
    local after
    after=$(metric "$A" "$INVALID")
    expect "$1" "$2" "d['error']['code'] == '$3' and d['error']['message'].startswith('''$4''')"
    if [ "$((after - BEFORE))" != "$5" ]; then
        fail "$1: counted" "refused_total{reason=\"invalid\"} moved by $((after - BEFORE)), expected $5"
    else
        pass "$1: counted $5"
    fi
}
J=(-H 'Content-Type: application/json')
C=(-H 'Content-Type: text/csv')

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast?horizon=4" "${J[@]}" --data-binary @"$WORK/broken.json"
check "the query before the body" 400 invalid_request 'query parameter "horizon": with a JSON body' 1

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast" "${J[@]}" --data-binary @"$WORK/broken.json"
check "a body that is no JSON" 400 invalid_json 'request body: line' 1

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast" "${J[@]}" -d @"$WORK/badmodel_type.json"
check "the model field before the other fields" 400 invalid_request 'model: must be a model id' 1

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast" "${J[@]}" -d @"$WORK/nomodel_badfield.json"
check "the model before the fields, not counted" 404 model_not_found 'model: no model "nope" here' 0

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast?model=nope&horizon=0" "${C[@]}" --data-binary @"$WORK/candles.csv"
check "a CSV body's model, from the query" 404 model_not_found 'model: no model "nope" here' 0

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/forecast?format=csv" "${J[@]}" -d @"$WORK/series.json"
check "a series answered as CSV" 400 invalid_request 'format: csv answers one series' 1

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/evaluate?format=csv" "${J[@]}" --data-binary @"$WORK/broken.json"
check "an evaluation's format before its body" 400 invalid_request \
    'format: an evaluation is answered as JSON only' 1

BEFORE=$(metric "$A" "$INVALID")
http POST "$A/evaluate" "${J[@]}" -d @"$WORK/eval_nomodel.json"
check "an evaluation's model, not counted" 404 model_not_found 'model: no model "nope" here' 0

summary
