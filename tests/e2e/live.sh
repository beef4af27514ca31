#!/usr/bin/env bash
# live.sh — live series end to end with curl:
#   * exactness: a candle session created with 400 candles, extended by 1, then by 20, and
#     forecast after each (sampled, 8 paths) answers the same bytes, all but "usage", as a
#     stateless /forecast of the same candles with "normalization" set to the session's
#     statistics and the same seed (also with a window that slides: max_context 64);
#   * GET /sessions/{id} of a candle session: kind, length, statistics, bytes, last timestamp;
#   * a "series" request answers each series as its solo request does;
#   * the errors: candles not after the last one, a token session given candles, an
#     unknown session, a missing column the session had, a bad series named by its index.
# Usage: live.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

"$PY" - "$WORK" <<'EOF'
import json, random, sys, datetime
w = sys.argv[1]
random.seed(8)
t0 = datetime.datetime(2024, 6, 18, 9, 30)
rows, close = [], 100.0
for i in range(421):
    o = close
    close = o * (1 + random.uniform(-0.01, 0.01))
    rows.append({"timestamps": (t0 + datetime.timedelta(minutes=5 * i)).isoformat(),
                 "open": o, "high": max(o, close) * (1 + random.uniform(0, 0.004)),
                 "low": min(o, close) * (1 - random.uniform(0, 0.004)), "close": close,
                 "volume": random.uniform(1000, 2000)})
def cols(a, b):
    return {k: [r[k] for r in rows[a:b]] for k in rows[0]}
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
dump("create", {"candles": cols(0, 400)})
dump("append1", {"candles": cols(400, 401)})
dump("append20", {"candles": cols(401, 421)})
opts = {"horizon": 12, "samples": 8, "seed": 11, "quantiles": [0.1, 0.9], "return_paths": True}
dump("opts", opts)
dump("opts_slide", dict(opts, max_context=64, seed=5))
for n in (400, 401, 421):
    dump(f"stateless{n}", dict(opts, candles=cols(0, n)))
    dump(f"stateless_slide{n}", dict(opts, candles=cols(0, n), max_context=64, seed=5))
# errors
dump("append_old", {"candles": cols(399, 401)})
dump("append_novolume", {"candles": {k: v for k, v in cols(421, 421).items()}})
late = [dict(r, timestamps=(t0 + datetime.timedelta(minutes=5 * (500 + i))).isoformat())
        for i, r in enumerate(rows[:2])]
dump("append_missing", {"candles": [{k: v for k, v in r.items() if k != "volume"} for r in late]})
# many series: different lengths and intervals
series = [{"candles": cols(0, 64)}, {"candles": cols(100, 300)},
          {"candles": {**cols(0, 30), "timestamps": [(t0 + datetime.timedelta(hours=i)).isoformat()
                                                   for i in range(30)]}},
          {"candles": cols(200, 421), "future_timestamps": [
              (t0 + datetime.timedelta(minutes=5 * (421 + 2 * i))).isoformat() for i in range(6)]}]
shared = {"horizon": 6, "samples": 3, "seed": 9, "quantiles": [0.5], "return_paths": True}
dump("series", dict(shared, series=series))
for i, s in enumerate(series):
    dump(f"solo{i}", dict(shared, **s))
bad = [dict(s) for s in series]
bad[3] = {"candles": dict(cols(0, 20), close=cols(0, 20)["close"][:17] + ["x"] + cols(0, 20)["close"][18:])}
dump("series_bad", dict(shared, series=bad))
EOF

strip_usage() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage",None); print(json.dumps(d,sort_keys=True))' "$1"
}

# same NAME A B: the two answers are the same, all but usage
same() {
    if [ "$(strip_usage "$2")" == "$(strip_usage "$3")" ]; then pass "$1"; else
        fail "$1" "$(diff <(strip_usage "$2" | head -c 400) <(strip_usage "$3" | head -c 400))"
    fi
}

start_daemon main --workers 2 --compute-threads 1 --max-request-cost 100000
U=$URL_main

http POST "$U/sessions" --data-binary @"$WORK/create.json"
expect "create a candle session with 400 candles" 201 \
    'd["length"] == 400 and d["kind"] == "candles" and set(d["normalization"]) == {"mean", "std"}'
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")

# the stateless requests get the session's statistics
"$PY" - "$BODY" "$WORK" <<'EOF'
import json, sys
norm = json.load(open(sys.argv[1]))["normalization"]
for n in (400, 401, 421):
    for kind in ("stateless", "stateless_slide"):
        p = f"{sys.argv[2]}/{kind}{n}.json"
        d = json.load(open(p))
        d["normalization"] = norm
        json.dump(d, open(p, "w"))
EOF

check_exact() { # N: session forecasts = stateless ones
    local n=$1
    http POST "$U/sessions/$SID/forecast" --data-binary @"$WORK/opts.json"
    cp "$BODY" "$WORK/session$n.out"
    expect "session forecast at $n candles" 200 "d['usage']['context_candles'] == $n"
    http POST "$U/forecast" --data-binary @"$WORK/stateless$n.json"
    cp "$BODY" "$WORK/stateless$n.out"
    expect "stateless forecast of the same $n candles" 200
    same "session = stateless /forecast with its statistics at $n candles" \
        "$WORK/session$n.out" "$WORK/stateless$n.out"
    http POST "$U/sessions/$SID/forecast" --data-binary @"$WORK/opts_slide.json"
    cp "$BODY" "$WORK/session_slide$n.out"
    http POST "$U/forecast" --data-binary @"$WORK/stateless_slide$n.json"
    same "the same with a sliding window (max_context 64) at $n candles" \
        "$WORK/session_slide$n.out" "$BODY"
}

check_exact 400
http POST "$U/sessions/$SID/candles" --data-binary @"$WORK/append1.json"
expect "append 1 candle" 200 'd["length"] == 401 and d["appended"] == 1'
check_exact 401
http POST "$U/sessions/$SID/candles" --data-binary @"$WORK/append20.json"
expect "append 20 candles" 200 'd["length"] == 421 and d["appended"] == 20'
check_exact 421
http POST "$U/sessions/$SID/forecast" --data-binary @"$WORK/opts.json"
same "a forecast leaves the session's cache as it was" "$WORK/session421.out" "$BODY"

http GET "$U/sessions/$SID"
expect "GET a candle session" 200 \
    'd["kind"] == "candles" and d["length"] == 421 and d["bytes"] > 0 and d["last_timestamp"] == "2024-06-19T20:30:00" and d["normalization"]["std"]["close"] > 0'

# the same session from CSV bodies (create, append) forecasts the same
"$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
for name in ("create", "append1"):
    c = json.load(open(f"{w}/{name}.json"))["candles"]
    keys = list(c)
    with open(f"{w}/{name}.csv", "w") as f:
        f.write(",".join(keys) + "\n")
        for i in range(len(c["timestamps"])):
            f.write(",".join(repr(c[k][i]) if k != "timestamps" else c[k][i] for k in keys) + "\n")
EOF
http POST "$U/sessions" -H 'Content-Type: text/csv' --data-binary @"$WORK/create.csv"
expect "a candle session from a CSV body" 201 'd["length"] == 400'
CID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http POST "$U/sessions/$CID/candles" -H 'Content-Type: text/csv' --data-binary @"$WORK/append1.csv"
expect "append a CSV body" 200 'd["length"] == 401'
http POST "$U/sessions/$CID/forecast" --data-binary @"$WORK/opts.json"
same "the CSV-fed session forecasts as the JSON-fed one" "$BODY" "$WORK/session401.out"

# pinned statistics as given: a session, /tokenize
NORM='{"mean": {"open": 100, "high": 101, "low": 99, "close": 100, "volume": 1500, "amount": 150000},
       "std": {"open": 2, "high": 2, "low": 2, "close": 2.5, "volume": 300, "amount": 30000}}'
"$PY" - "$WORK" "$NORM" <<'EOF'
import json, sys
w, norm = sys.argv[1], json.loads(sys.argv[2])
c = json.load(open(f"{w}/create.json"))["candles"]
json.dump({"candles": c, "normalization": norm}, open(f"{w}/create_pinned.json", "w"))
json.dump({"candles": c, "normalization": norm}, open(f"{w}/tokenize_pinned.json", "w"))
EOF
http POST "$U/sessions" --data-binary @"$WORK/create_pinned.json"
expect "a session with given statistics keeps them" 201 \
    'd["normalization"]["std"]["close"] == 2.5 and d["normalization"]["mean"]["amount"] == 150000'
http POST "$U/tokenize" --data-binary @"$WORK/tokenize_pinned.json"
expect "/tokenize with normalization uses it" 200 'd["std"][3] == 2.5 and d["mean"][4] == 1500'
http POST "$U/forecast" -d '{"candles": {"timestamps": [1, 2], "open": [1, 2], "high": [1, 2],
    "low": [1, 2], "close": [1, 2]}, "horizon": 1, "normalization": {"mean": {}, "std": {}}}'
expect "normalization needs every column: 400" 400 \
    'd["error"]["message"].startswith("normalization.mean.open: missing")'

# ---- errors ---------------------------------------------------------------------------------
http POST "$U/sessions/$SID/candles" --data-binary @"$WORK/append_old.json"
expect "candles not after the last one: 400" 400 \
    '"candles.timestamps[0]" in d["error"]["message"] and "last" in d["error"]["message"]'
http POST "$U/sessions/$SID/candles" --data-binary @"$WORK/append_missing.json"
expect "a column the session had is missing: 400" 400 \
    '"candles.volume: missing" in d["error"]["message"]'
http POST "$U/sessions"
TID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http POST "$U/sessions/$TID/candles" --data-binary @"$WORK/append1.json"
expect "a token session given candles: 400" 400 'd["error"]["code"] == "wrong_session_kind"'
http POST "$U/sessions/$TID/forecast" --data-binary @"$WORK/opts.json"
expect "a token session asked for a candle forecast: 400" 400 \
    'd["error"]["code"] == "wrong_session_kind"'
http POST "$U/sessions/0123456789abcdef0123456789abcdef/candles" --data-binary @"$WORK/append1.json"
expect "an unknown session: 404" 404 'd["error"]["code"] == "session_not_found"'
http POST "$U/sessions/0123456789abcdef0123456789abcdef/forecast" --data-binary @"$WORK/opts.json"
expect "an unknown session's forecast: 404" 404 'd["error"]["code"] == "session_not_found"'
http POST "$U/generate" -d "{\"session\": \"$SID\", \"max_new_tokens\": 1, \"future_timestamps\": [\"2024-07-01T00:00:00\"]}"
expect "a candle session given to /generate: 400" 400 'd["error"]["code"] == "wrong_session_kind"'
http POST "$U/sessions/$SID/forecast" -d '{"horizon": 2, "normalization": {}}'
expect "a session forecast takes no normalization: 400" 400 '"normalization" in d["error"]["message"]'

# ---- many series in one request -----------------------------------------------------------
http POST "$U/forecast" --data-binary @"$WORK/series.json"
cp "$BODY" "$WORK/series.out"
expect "a series request" 200 'len(d["series"]) == 4'
for i in 0 1 2 3; do
    http POST "$U/forecast" --data-binary @"$WORK/solo$i.json"
    "$PY" -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["series"][int(sys.argv[2])], open(sys.argv[3], "w"))' \
        "$WORK/series.out" "$i" "$WORK/series$i.out"
    same "series[$i] = its solo request" "$WORK/series$i.out" "$BODY"
done
# the one-shot command: the same series, and normalization
"$KRONOSD" forecast --model "$MODEL" --compact "$WORK/series.json" >"$WORK/oneshot_series.out" 2>"$WORK/oneshot.err"
for i in 0 1 2 3; do
    "$PY" -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["series"][int(sys.argv[2])], open(sys.argv[3], "w"))' \
        "$WORK/oneshot_series.out" "$i" "$WORK/oneshot$i.out" 2>>"$WORK/oneshot.err"
    same "kronosd forecast: series[$i] = the server's" "$WORK/oneshot$i.out" "$WORK/series$i.out"
done
"$KRONOSD" forecast --model "$MODEL" --compact "$WORK/stateless421.json" >"$WORK/oneshot421.out" 2>>"$WORK/oneshot.err"
same "kronosd forecast with normalization = the session forecast" "$WORK/oneshot421.out" \
    "$WORK/session421.out"

http POST "$U/forecast" --data-binary @"$WORK/series_bad.json"
expect "a bad series names its index" 400 \
    'd["error"]["message"].startswith("series[3].candles.close[17]: ")'

summary
