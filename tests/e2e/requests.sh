#!/usr/bin/env bash
# requests.sh KRONOSD SRCDIR — strict fields, quantile labels, compact numbers, CSV in and out.
#
# Starts the real daemon on a free loopback port with the fixture model and checks that
# unknown fields (and upstream Kronos's names) are refused with a message naming them, that
# quantile levels are distinct and labelled exactly, that numbers are the shortest float32
# decimals, and that a CSV body with query parameters answers what the same JSON does.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

start_daemon A --workers 1
A=$URL_A
CSV="$WORK/k.csv"
head -81 "$SRC/tests/data/kline_5min.csv" >"$CSV"
"$PY" - "$CSV" "$WORK" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
c = {"timestamps": [r["timestamps"] for r in rows]}
for k in ["open", "high", "low", "close", "volume", "amount"]:
    c[k] = [float(r[k]) for r in rows]
req = {"candles": c, "horizon": 5, "samples": 4, "seed": 3, "quantiles": [0.1, 0.5, 0.9]}
json.dump(req, open(sys.argv[2] + "/same.json", "w"))
# pandas's to_csv with its default unnamed index first, columns shuffled, CRLF
with open(sys.argv[2] + "/indexed.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\r\n")
    w.writerow(["", "close", "date", "open", "high", "low", "amount", "volume"])
    for i, r in enumerate(rows):
        w.writerow([i, r["close"], r["timestamps"], r["open"], r["high"], r["low"], r["amount"], r["volume"]])
PYEOF
CANDLES='"candles": {"timestamps": [1, 2, 3], "open": [1, 2, 3], "high": [1, 2, 3], "low": [1, 2, 3], "close": [1, 2, 3]}'

# ---- strict fields ------------------------------------------------------------------------
http POST "$A/forecast" -d "{$CANDLES, \"horizon\": 2, \"sample_count\": 5}"
expect "upstream's sample_count: 400 naming samples" 400 '"sample_count" in d["error"]["message"] and "samples" in d["error"]["message"]'
for pair in pred_len:horizon T:temperature x_timestamp:candles.timestamps y_timestamp:future_timestamps; do
    http POST "$A/forecast" -d "{$CANDLES, \"horizon\": 2, \"${pair%%:*}\": 1}"
    expect "upstream's ${pair%%:*}: 400 naming ${pair#*:}" 400 "'\"${pair%%:*}\"' in d['error']['message'] and '${pair#*:}' in d['error']['message']"
done
http POST "$A/forecast" -d '{"candles": {"timestamps": [1, 2], "open": [1, 2], "high": [1, 2], "low": [1, 2], "close": [1, 2], "vwap": [1, 2]}, "horizon": 1}'
expect "unknown candle column: 400" 400 '"candles: unknown field \"vwap\"" in d["error"]["message"]'
http POST "$A/generate" -d '{"tokens": [], "n_predict": 2}'
expect "generate: unknown field" 400 '"n_predict" in d["error"]["message"] and "max_new_tokens" in d["error"]["message"]'
http POST "$A/tokenize" -d "{$CANDLES, \"horizon\": 1}"
expect "tokenize: unknown field" 400 '"horizon" in d["error"]["message"]'
http POST "$A/detokenize" -d '{"tokens": [[1, 1]], "mean": [0,0,0,0,0,0], "std": [1,1,1,1,1,1], "x": 0}'
expect "detokenize: unknown field" 400 '"\"x\"" in d["error"]["message"]'

# ---- quantiles ----------------------------------------------------------------------------
http POST "$A/forecast" -d "{$CANDLES, \"horizon\": 1, \"samples\": 3, \"quantiles\": [0.5, 0.5]}"
expect "duplicate quantile: 400" 400 '"quantiles[1]" in d["error"]["message"]'
http POST "$A/forecast" -d "{$CANDLES, \"horizon\": 1, \"quantiles\": [1.5]}"
expect "quantile out of range: 400" 400 '"quantiles[0]" in d["error"]["message"]'
http POST "$A/forecast" -d "{$CANDLES, \"horizon\": 1, \"samples\": 3, \"quantiles\": [0.3333333333, 0.33333333334, 0.1]}"
expect "close quantile levels keep distinct exact labels" 200 'sorted(d["quantiles"]) == ["0.1", "0.3333333333", "0.33333333334"]'

# ---- compact numbers -----------------------------------------------------------------------
http POST "$A/forecast" --data-binary @"$WORK/same.json"
cp "$BODY" "$WORK/same_out.json"
if "$PY" - "$BODY" <<'PYEOF'
import json, re, struct, sys
text = open(sys.argv[1]).read()
def f32(x): return struct.unpack("f", struct.pack("f", x))[0]
for tok in re.findall(r'(?<=[\[,:])-?\d[0-9.eE+-]*(?=[\],}])', text):
    x = float(tok)
    sig = re.sub(r"[-.]|e.*", "", tok.lower()).lstrip("0")
    digits = len(sig.rstrip("0") if "." not in tok else sig) or 1
    assert digits <= 9, tok
    # no shorter decimal reads back to the same float32
    for p in range(1, digits):
        assert f32(float("%.*g" % (p, x))) != f32(x), f"{tok} could be {p} digits"
PYEOF
then pass "numbers are the shortest float32 decimals"; else fail "numbers are the shortest float32 decimals"; fi

# ---- CSV in and out -------------------------------------------------------------------------
strip() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["usage"].pop("elapsed_ms"); print(json.dumps(d, sort_keys=True))' "$1"; }
http POST "$A/forecast?horizon=5&samples=4&seed=3&quantiles=0.1,0.5,0.9" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "CSV body with query parameters" 200 'd["horizon"] == 5'
cmp -s <(strip "$BODY") <(strip "$WORK/same_out.json") && pass "CSV answers what the same JSON answers" \
    || fail "CSV answers what the same JSON answers"
http POST "$A/forecast?horizon=5&samples=4&seed=3&quantiles=0.1,0.5,0.9" -H "Content-Type: text/csv" --data-binary @"$WORK/indexed.csv"
cmp -s <(strip "$BODY") <(strip "$WORK/same_out.json") && pass "pandas index column, any column order, CRLF" \
    || fail "pandas index column, any column order, CRLF" "$(head -c 300 "$BODY")"
http POST "$A/forecast?horizon=5&samples=4&seed=3&quantiles=0.1,0.5,0.9&format=csv" -H "Content-Type: text/csv" --data-binary @"$CSV"
if [ "$STATUS" = 200 ] && grep -qi '^content-type: text/csv' "$HEADERS" && "$PY" - "$BODY" "$WORK/same_out.json" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
d = json.load(open(sys.argv[2]))
assert len(rows) == 5 and list(rows[0])[:2] == ["timestamps", "open"], list(rows[0])
assert [r["timestamps"] for r in rows] == d["timestamps"]
for i, r in enumerate(rows):
    assert float(r["close"]) == d["mean"]["close"][i]
    assert float(r["close_q0.9"]) == d["quantiles"]["0.9"]["close"][i]
PYEOF
then pass "?format=csv answers the forecast rows as CSV"; else fail "?format=csv answers the forecast rows as CSV" "$(head -c 300 "$BODY")"; fi
http POST "$A/forecast?horizon=2" -H "Content-Type: text/csv" -H "Accept: text/csv" --data-binary @"$CSV"
grep -qi '^content-type: text/csv' "$HEADERS" && pass "Accept: text/csv answers CSV" || fail "Accept: text/csv answers CSV"
http POST "$A/forecast?horizon=2&pred_len=2" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "unknown query parameter: 400 naming it" 400 '"pred_len" in d["error"]["message"] and "horizon" in d["error"]["message"]'
http POST "$A/forecast?horizon=0" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "query parameters checked like fields" 400 'd["error"]["message"].startswith("horizon: must be an integer >= 1")'
http POST "$A/forecast?horizon=2&quantiles=0.1,0.1" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "duplicate quantiles in the query" 400 '"quantiles[1]" in d["error"]["message"]'
sed '7s/^\([^,]*\),[^,]*,/\1,abc,/' "$CSV" >"$WORK/bad.csv"
http POST "$A/forecast?horizon=2" -H "Content-Type: text/csv" --data-binary @"$WORK/bad.csv"
expect "a bad CSV value names line and column" 400 'd["error"]["message"].startswith("CSV line 7, column 2 (open):")'
printf 'timestamps,open,high,low,close,vwap\n' >"$WORK/bad.csv"
http POST "$A/forecast?horizon=2" -H "Content-Type: text/csv" --data-binary @"$WORK/bad.csv"
expect "an unknown CSV column: 400" 400 '"column 6" in d["error"]["message"] and "vwap" in d["error"]["message"]'
printf 'timestamps,open,high,low,close,\xff\xfe\n' >"$WORK/bad.csv"
http POST "$A/forecast?horizon=2" -H "Content-Type: text/csv" --data-binary @"$WORK/bad.csv"
expect "bytes that are not UTF-8 are quoted as ?" 400 '"unknown column \"??\"" in d["error"]["message"]'
http GET "$A/%FF"
expect "a path that is not UTF-8 gets a JSON 404" 404 'd["error"]["code"] == "not_found"'
http POST "$A/forecast" -d @"$CSV"
expect "CSV without Content-Type: text/csv: the message says what to send" 400 'd["error"]["code"] == "invalid_json" and "text/csv" in d["error"]["message"]'
http POST "$A/generate" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "/generate refuses a CSV body: 415" 415 '"/generate takes JSON" in d["error"]["message"]'
http POST "$A/tokenize" -H "Content-Type: text/csv" --data-binary @"$CSV"
expect "/tokenize takes CSV" 200 'len(d["tokens"]) == 80'

summary
