#!/usr/bin/env bash
# models.sh — several models in one daemon, end to end (models_check.py recomputes):
#   * three models: tests/data/tiny and two kronos-mkmodel checkpoints of other shapes, one
#     with tiny's tokenizer files (loaded once: shared_with);
#   * GET /models and /models/{id}: each hash recomputed from the files (SHA-256, as
#     docs/api.md defines it), shapes from config.json, parameters from the safetensors
#     headers; a changed weight changes the hash, the same files give the same one;
#   * per model, a forecast, a series forecast, an evaluation, a generation and a
#     tokenization answer what a one-model daemon of that model answers, byte for byte
#     (the answers' elapsed_ms, the time they took, aside), alone and while the other two
#     are under load;
#   * every answer names its model ({"id", "hash"}: "model", an evaluation's "model_ref";
#     CSV: Kronos-Model headers); an unknown
#     id is 404 model_not_found naming the known ones;
#   * sessions are bound to their model; a journal replayed after one model's weight
#     changed refuses that model's sessions (a log line, 404 saying so) and keeps the others.
# Usage: KR_MKMODEL=PATH models.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

# ---- the models ------------------------------------------------------------------------------
make_wide_narrow
declare -A DIR=([tiny]="$MODEL" [wide]="$WORK/wide" [narrow]="$WORK/narrow")
IDS=(tiny wide narrow)

start_daemon multi --model "wide=$WORK/wide" --model "narrow=$WORK/narrow"
for id in "${IDS[@]}"; do start_solo "$id"; done

# ---- the registry ------------------------------------------------------------------------------
http GET "$URL_multi/models"
expect "GET /models lists three, the default first" 200 \
    '[m["id"] for m in d["models"]] == ["tiny", "wide", "narrow"] and [m["default"] for m in d["models"]] == [True, False, False]'
cp "$BODY" "$WORK/models.json"
for i in 0 1 2; do
    id=${IDS[$i]}
    "$PY" -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['models'][$i], open(sys.argv[2], 'w'))" \
        "$WORK/models.json" "$WORK/entry_$id.json"
    out=$(models_check entry "$WORK/entry_$id.json" "${DIR[$id]}")
    [ "$out" = ok ] && pass "$id: hash recomputed from the files, shapes, parameters" \
        || fail "$id: the entry against the files" "$out"
done
jq_ok 'd["models"][2]["tokenizer"]["shared_with"] == "tiny" and d["models"][1]["tokenizer"]["shared_with"] is None and d["models"][2]["bytes"] < 4 * d["models"][2]["parameters"] and d["models"][1]["bytes"] == 4 * d["models"][1]["parameters"]' "$WORK/models.json" \
    && pass "the tokenizer with tiny's files is shared, its bytes counted once" \
    || fail "shared tokenizer" "$(head -c 400 "$WORK/models.json")"
http GET "$URL_multi/models/wide"
"$PY" -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else 1)" \
    "$BODY" "$WORK/entry_wide.json" && pass "GET /models/wide is its entry" \
    || fail "GET /models/wide" "$(head -c 300 "$BODY")"
http GET "$URL_multi/models/nope"
expect "GET /models/nope: 404 model_not_found naming the models" 404 \
    'd["error"]["code"] == "model_not_found" and "tiny, wide, narrow" in d["error"]["message"]'
http GET "$URL_multi/model"
expect "/model is the default model's view" 200 \
    'd["id"] == "tiny" and d["name"] == "tiny" and len(d["hash"]) == 64'

# ---- the same answers as a one-model daemon ----------------------------------------------------
# compare_all LABEL: each model's answers on the multi daemon against its solo daemon's
compare_all() {
    local id
    for id in "${IDS[@]}"; do as_solo "$1" "$id" "$URL_multi"; done
}
compare_all alone

# the other two models under load while each model's answers are compared again
LOADERS=()
load_loop() { # load_loop ID
    while :; do
        curl -s -o /dev/null "$URL_multi/forecast" -d @"$WORK/load_$1.json"
    done
}
for id in "${IDS[@]}"; do
    with_model "$WORK/load.json" "$id"
    cp "$WORK/with.json" "$WORK/load_$id.json"
done
for id in "${IDS[@]}"; do
    load_loop "$id" &
    LOADERS+=($!)
    BG_PIDS+=($!)
done
sleep 0.5
compare_all "under load"
for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null; done
wait "${LOADERS[@]}" 2>/dev/null

# /metrics by model, recounted from this script's calls: per model, 5 requests alone and 5
# under load generating 2 x (forecast 8 x 6 + series 2 x 4 x 3 + evaluate 6 origins x 4 x 4
# + generate 8) = 352 token pairs, plus its load loop's forecasts of 24 x 16 = 384 each (the
# one cut short when the loop stopped may count its request and not its tokens, or the
# tokens before its request's end)
curl -s "$URL_multi/metrics" >"$WORK/metrics.txt"
"$PY" - "$WORK/metrics.txt" <<'PYEOF' && pass "/metrics counts requests and tokens by model" \
    || fail "/metrics by model" "$(grep model_ "$WORK/metrics.txt")"
import re, sys
t = open(sys.argv[1]).read()
req = dict(re.findall(r'kronosd_model_requests_total\{model="(\w+)"\} (\d+)', t))
tok = dict(re.findall(r'kronosd_model_generated_tokens_total\{model="(\w+)"\} (\d+)', t))
ok = set(req) == set(tok) == {"tiny", "wide", "narrow"}
for m in req:
    r, k = int(req[m]), int(tok[m]) - 352
    ok = ok and k >= 384 and k % 384 == 0 and abs((r - 10) - k // 384) <= 1
sys.exit(0 if ok else 1)
PYEOF

# ---- model fields and names ----------------------------------------------------------------------
with_model "$WORK/forecast.json" nope
http POST "$URL_multi/forecast" -d @"$WORK/with.json"
expect "an unknown model: 404 model_not_found naming the models" 404 \
    'd["error"]["code"] == "model_not_found" and "tiny, wide, narrow" in d["error"]["message"]'
http POST "$URL_multi/forecast?horizon=2&model=wide" -H 'Content-Type: text/csv' -H 'Accept: text/csv' \
    --data-binary @"$SRC/tests/data/kline_5min.csv"
WIDE_HASH=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['hash'])" "$WORK/entry_wide.json")
if [ "$STATUS" = 200 ] && grep -qi "^Kronos-Model: wide" "$HEADERS" && grep -qi "^Kronos-Model-Hash: $WIDE_HASH" "$HEADERS"; then
    pass "a CSV answer names its model in Kronos-Model headers"
else
    fail "CSV model headers" "$STATUS $(cat "$HEADERS")"
fi
http POST "$URL_multi/forecast" -d '{"candles": {"timestamps": [1, 2], "open": [1, 1], "high": [1, 1], "low": [1, 1], "close": [1, 1]}, "horizon": 1, "model": 3}'
expect "a model that is not a string: 400 naming the field" 400 \
    'd["error"]["code"] == "invalid_request" and d["error"]["message"].startswith("model:")'

# ---- the Python client's model= --------------------------------------------------------------------
if PYTHONPATH="$SRC/clients/python" KRONOSD_CLIENT_NO_PANDAS=1 "$PY" - "$URL_multi" "$URL_solo_narrow" "$WORK" <<'PYEOF'
import json, sys
from kronosd_client import Client
multi, solo, work = sys.argv[1:4]
body = json.load(open(work + "/forecast.json"))
c = body["candles"]
rows = {k: v for k, v in c.items() if k != "timestamps"}
df = {"timestamps": c["timestamps"], **rows}
opts = dict(horizon=8, samples=6, seed=11, quantiles=[0.1, 0.9], return_paths=True)
a = Client(multi, model="narrow").forecast(df, **opts)
b = Client(solo).forecast(df, **opts)
w = Client(multi).forecast(df, model="wide", **opts)
same = lambda x, y: {**x, "usage": None} == {**y, "usage": None} and x["usage"].keys() == y["usage"].keys()
assert a.model["id"] == "narrow" and same(a.raw, b.raw), "narrow by the client's model"
assert w.model["id"] == "wide" and w.raw != a.raw, "wide by the call's model"
assert [m["id"] for m in Client(multi).models()] == ["tiny", "wide", "narrow"]
assert Client(multi).get_model("wide")["predictor"]["d_model"] == 96
ev = json.load(open(work + "/evaluate.json"))
e = Client(multi, model="wide").evaluate(df, lookback=64, horizon=4, stride=16, samples=4, seed=3)
assert e.model_ref["id"] == "wide"
s = Client(multi, model="wide").create_session()
assert s["model"]["id"] == "wide"
PYEOF
then pass "the Python client: model= per client and per call, models(), model_ref"
else fail "the Python client's model="; fi

# ---- the page's model picker (headless Chromium; left out without it) ---------------------------
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
    profile=$(mktemp -d "$WORK/profile.XXXXXX")
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --user-data-dir="$profile" --window-size=1280,900 \
        --virtual-time-budget=30000 --dump-dom "$URL_multi/?autorun=1&horizon=4&samples=2&model=wide" \
        >"$WORK/page.html" 2>>"$WORK/chromium.log"
    "$PY" - "$WORK/page.html" <<'PYEOF' && pass "the page: a picker of the three models, the forecast on the picked one" \
        || fail "the page's model picker" "$(grep -o '<header.*</header>' "$WORK/page.html" | head -c 300)"
import re, sys
dom = open(sys.argv[1]).read()
assert re.search(r'id="modelpick-label" class=""', dom) or 'id="modelpick-label" class="hidden"' not in dom
assert [m for m in re.findall(r'<option value="(\w+)"', dom) if m in ("tiny", "wide", "narrow")] == ["tiny", "wide", "narrow"]
assert "model: wide" in dom, "the header names the picked model"
assert re.search(r'on <b>wide</b>', dom), "the forecast ran on it"
assert re.search(r'id="chart" data-state="ready"', dom)
PYEOF
fi

# ---- sessions bound to their model ----------------------------------------------------------------
http POST "$URL_multi/sessions" -d '{"model": "wide"}'
expect "a token session on wide" 201 'd["model"]["id"] == "wide"'
TOK_WIDE=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['session'])" "$BODY")
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('seed'); json.dump(d, open(sys.argv[2],'w'))" \
    "$WORK/generate.json" "$WORK/gen_session.json"
http POST "$URL_multi/sessions/$TOK_WIDE/generate" -d @"$WORK/gen_session.json"
expect "its generation runs on wide" 200 'd["model"]["id"] == "wide"'
with_model "$WORK/gen_session.json" narrow
http POST "$URL_multi/sessions/$TOK_WIDE/generate" -d @"$WORK/with.json"
expect "naming another model for it: 400" 400 '"bound to model wide" in d["error"]["message"]'
http GET "$URL_multi/sessions/$TOK_WIDE"
expect "GET /sessions/{id} names its model" 200 'd["model"]["id"] == "wide" and d["length"] == 32'

# ---- the journal: one model's weight changed, its sessions refused, the others kept -------------
cp -r "$WORK/wide" "$WORK/wide2"
mkdir -p "$WORK/state"
start_daemon durable --model "wide=$WORK/wide2" --state-dir "$WORK/state"
"$PY" -c "
import json,sys
d=json.load(open(sys.argv[1])); c=d['candles']
json.dump({'candles': {k: v[:60] for k, v in c.items()}}, open(sys.argv[2],'w'))
json.dump({'candles': {k: v[:60] for k, v in c.items()}, 'model': 'wide'}, open(sys.argv[3],'w'))
" "$WORK/forecast.json" "$WORK/cs_tiny.json" "$WORK/cs_wide.json"
http POST "$URL_durable/sessions" -d @"$WORK/cs_tiny.json"; CS_TINY=$(sid)
http POST "$URL_durable/sessions" -d @"$WORK/cs_wide.json"; CS_WIDE=$(sid)
http POST "$URL_durable/sessions" -d '{}'; TS_TINY=$(sid)
http POST "$URL_durable/sessions" -d '{"model": "wide"}'; TS_WIDE=$(sid)
http POST "$URL_durable/sessions/$TS_WIDE/generate" -d @"$WORK/gen_session.json"
expect "sessions of both models, journaled" 200 'd["model"]["id"] == "wide"'
http POST "$URL_durable/sessions/$CS_WIDE/forecast" -d '{"horizon": 3, "samples": 2, "seed": 4}'
cp "$BODY" "$WORK/cs_wide_before.json"
stop durable
models_check flip "$WORK/wide2/predictor/model.safetensors"
NEW_HASH=$(models_check hash "$WORK/wide2" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['hash'])")
[ "$NEW_HASH" != "$WIDE_HASH" ] && pass "one weight changed: another hash" || fail "the hash did not change"
start_daemon durable2 --model "wide=$WORK/wide2" --state-dir "$WORK/state"
http GET "$URL_durable2/models/wide"
expect "the daemon reports the changed files' hash" 200 "d['hash'] == '$NEW_HASH'"
grep -q "session $CS_WIDE is not restored: it was created with model wide of hash $WIDE_HASH" "$WORK/durable2.log" \
    && grep -q "session $TS_WIDE is not restored" "$WORK/durable2.log" \
    && grep -q "2 sessions restored (2 refused)" "$WORK/durable2.log" \
    && pass "the replay refuses wide's sessions with a log line each, and keeps tiny's" \
    || fail "replay log" "$(grep -i "journal\|restored" "$WORK/durable2.log")"
for s in "$CS_WIDE" "$TS_WIDE"; do
    http GET "$URL_durable2/sessions/$s"
    expect "a refused session: 404 saying its model changed" 404 \
        'd["error"]["code"] == "session_not_found" and "not restored" in d["error"]["message"] and "model" in d["error"]["message"]'
done
http GET "$URL_durable2/sessions/$CS_TINY"
expect "tiny's candle session is kept" 200 'd["model"]["id"] == "tiny" and d["length"] == 60'
http GET "$URL_durable2/sessions/$TS_TINY"
expect "tiny's token session is kept" 200 'd["model"]["id"] == "tiny"'
stop durable2
# the files back as they were: the session comes back with its answer
models_check flip "$WORK/wide2/predictor/model.safetensors"
start_daemon durable3 --model "wide=$WORK/wide2" --state-dir "$WORK/state"
http POST "$URL_durable3/sessions/$CS_WIDE/forecast" -d '{"horizon": 3, "samples": 2, "seed": 4}'
if [ "$STATUS" = 200 ] && models_check same_forecast "$BODY" "$WORK/cs_wide_before.json"; then
    pass "with wide's files as they were, its session is back with the same forecast"
else
    fail "wide's session back" "$STATUS $(head -c 300 "$BODY")"
fi

summary
