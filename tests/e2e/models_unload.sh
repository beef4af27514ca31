#!/usr/bin/env bash
# models_unload.sh — a model unloaded while serving (DELETE /models/{id}), end to end:
#   * the admin key is asked for (401 without one and with an API key); an unknown id is 404;
#     the default model and a model a live session is bound to are refused (409 model_in_use,
#     the message saying why and counting the sessions);
#   * a long forecast in flight on the model when it is unloaded finishes with its whole 200
#     answer; the next request naming the model is 404 and GET /models no longer lists it;
#   * loaded again (the freed slot reused): the same hash, and the same forecast answers the
#     same bytes (elapsed_ms aside);
#   * a model whose tokenizer another model borrows: unloaded, the borrower goes on answering
#     as before, and a reload of it shares that tokenizer again;
#   * /metrics: models loaded, their bytes, loads and unloads;
#   * model-memory-bytes: a load over it unloads the least recently used idle model (load a
#     and b, use a, load c: b goes); with none idle it is 507 model_memory_exceeded;
#   * SIGHUP with the config file's model lines changed: the new model loaded, the removed
#     one unloaded, one holding a session kept, each logged; GET /models shows the set.
# Under ASan (build-asan), the frees at the last reference are what this exercises.
# Usage: KR_MKMODEL=PATH models_unload.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

make_model wide
# twin: another predictor on wide's tokenizer files (it borrows wide's tokenizer)
make_model twin twin
share_tokenizer "$WORK/wide" "$WORK/twin"
models_check bodies "$WORK" "$SRC/tests/data/kline_5min.csv"
# long: a forecast long enough to be in flight while the DELETE is answered
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d.update(horizon=120, samples=96, model='wide'); json.dump(d, open(sys.argv[2],'w'))" \
    "$WORK/load.json" "$WORK/long.json"
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['model']='twin'; json.dump(d, open(sys.argv[2],'w'))" \
    "$WORK/forecast.json" "$WORK/twin_forecast.json"

model_keys
start_daemon L --api-key-file "$WORK/keys" --admin-key-file "$WORK/admin" --max-horizon 256 \
    --max-samples 256 --pool-bytes $((256 << 20))

# listed: the ids GET /models lists, comma-separated
listed() {
    http GET "$URL_L/models" "${API[@]}"
    "$PY" -c "import json,sys; print(','.join(m['id'] for m in json.load(open(sys.argv[1]))['models']))" "$BODY"
}
load() { # load ID DIR: POST /models, its entry in $WORK/entry_ID.json
    http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"id\": \"$1\", \"path\": \"$2\"}"
    cp "$BODY" "$WORK/entry_$1.json"
}

load wide "$WORK/wide"
expect "wide loaded" 201 'd["id"] == "wide"'
WIDE_HASH=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['hash'])" "$WORK/entry_wide.json")
WIDE_BYTES=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['bytes'])" "$WORK/entry_wide.json")
http GET "$URL_L/models/tiny" "${API[@]}"
TINY_BYTES=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['bytes'])" "$BODY")

# ---- refusals -------------------------------------------------------------------------------
http DELETE "$URL_L/models/wide"
expect "DELETE without a key: 401" 401 \
    'd["error"]["code"] == "unauthorized" and "admin key" in d["error"]["message"]'
http DELETE "$URL_L/models/wide" "${API[@]}"
expect "DELETE with an API key: 401 (an API key is no admin key)" 401 'd["error"]["code"] == "unauthorized"'
http DELETE "$URL_L/models/nothing" "${ADMIN[@]}"
expect "DELETE of an unknown id: 404 naming the models" 404 \
    'd["error"]["code"] == "model_not_found" and "tiny, wide" in d["error"]["message"]'
http DELETE "$URL_L/models/tiny" "${ADMIN[@]}"
expect "DELETE of the default model: 409 saying so" 409 \
    'd["error"]["code"] == "model_in_use" and "default model" in d["error"]["message"]'
http POST "$URL_L/sessions" "${JSON[@]}" "${API[@]}" -d '{"model": "wide"}'
expect "a token session on wide" 201
SID=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['session'])" "$BODY")
http DELETE "$URL_L/models/wide" "${ADMIN[@]}"
expect "DELETE of a model with a live session: 409 counting it" 409 \
    'd["error"]["code"] == "model_in_use" and "1 live session" in d["error"]["message"]'
[ "$(listed)" = "tiny,wide" ] && pass "after the refusals: tiny, wide listed" \
    || fail "after the refusals" "$(listed)"
http DELETE "$URL_L/sessions/$SID" "${API[@]}"
expect "the session deleted" 200 'd["deleted"] is True'

# ---- unloaded with a forecast in flight --------------------------------------------------------
curl -sS -m 600 -o "$WORK/long.out" -w '%{http_code}' -X POST "$URL_L/forecast" "${JSON[@]}" \
    "${API[@]}" -d @"$WORK/long.json" >"$WORK/long.status" 2>"$WORK/long.err" &
LONG_PID=$!
BG_PIDS+=("$LONG_PID")
wait_metric "$URL_L" kronosd_requests_running 1 "${API[@]}" \
    || fail "the long forecast did not start" "$(cat "$WORK/long.err")"
http DELETE "$URL_L/models/wide" "${ADMIN[@]}"
expect "DELETE with a forecast in flight: 200" 200 'd == {"id": "wide", "unloaded": True}'
kill -0 "$LONG_PID" 2>/dev/null && pass "the forecast was still in flight when wide went" \
    || fail "the forecast ended before the DELETE (make long.json longer)"
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/long.json"
expect "the next request naming wide: 404" 404 \
    'd["error"]["code"] == "model_not_found" and "no model \"wide\"" in d["error"]["message"]'
http GET "$URL_L/models/wide" "${API[@]}"
expect "GET /models/wide: 404" 404 'd["error"]["code"] == "model_not_found"'
[ "$(listed)" = "tiny" ] && pass "GET /models lists tiny alone" || fail "GET /models" "$(listed)"
wait "$LONG_PID"
[ "$(cat "$WORK/long.status")" = 200 ] && jq_ok \
    'd["model"] == {"id": "wide", "hash": "'"$WIDE_HASH"'"} and len(d["timestamps"]) == 120 and len(d["mean"]["close"]) == 120' \
    "$WORK/long.out" && pass "the forecast in flight: a whole 200 answer on wide" \
    || fail "the forecast in flight" "$(cat "$WORK/long.status") $(head -c 300 "$WORK/long.out")"
grep -q "model wide unloaded" "$WORK/L.log" && pass "the log says wide was unloaded" \
    || fail "log line" "$(tail -3 "$WORK/L.log")"

# ---- loaded again ------------------------------------------------------------------------------
load wide "$WORK/wide"
expect "wide loaded again: 201, the same hash" 201 "d['hash'] == '$WIDE_HASH'"
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/long.json"
[ "$STATUS" = 200 ] && models_check same "$BODY" "$WORK/long.out" \
    && pass "reloaded wide answers the long forecast as before" \
    || fail "reloaded wide's answer" "$STATUS $(head -c 300 "$BODY")"

# ---- a borrowed tokenizer outlives its model's unload -------------------------------------------
load twin "$WORK/twin"
expect "twin borrows wide's tokenizer" 201 'd["tokenizer"]["shared_with"] == "wide"'
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/twin_forecast.json"
cp "$BODY" "$WORK/twin_before.out"
expect "twin forecasts" 200
http DELETE "$URL_L/models/wide" "${ADMIN[@]}"
expect "wide unloaded while twin borrows its tokenizer" 200
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/twin_forecast.json"
[ "$STATUS" = 200 ] && models_check same "$BODY" "$WORK/twin_before.out" \
    && pass "twin answers as before, wide gone" || fail "twin after wide's unload" "$STATUS $(head -c 300 "$BODY")"
load wide "$WORK/wide"
expect "wide loaded again shares its tokenizer (kept for twin)" 201 \
    "d['hash'] == '$WIDE_HASH' and d['tokenizer']['shared_with'] == 'wide'"
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/long.json"
[ "$STATUS" = 200 ] && models_check same "$BODY" "$WORK/long.out" \
    && pass "wide on the kept tokenizer answers as before" || fail "wide on the kept tokenizer" "$STATUS"
http DELETE "$URL_L/models/twin" "${ADMIN[@]}"
expect "twin unloaded" 200
http DELETE "$URL_L/models/wide" "${ADMIN[@]}"
expect "wide unloaded (the last holder of the tokenizer)" 200
[ "$(listed)" = "tiny" ] && pass "tiny alone again" || fail "GET /models" "$(listed)"

# ---- /metrics ----------------------------------------------------------------------------------
# loads: wide, wide, twin, wide; unloads: wide, wide, twin, wide
n_models=$(metric "$URL_L" kronosd_models_loaded "${API[@]}")
loads=$(metric "$URL_L" kronosd_model_loads_total "${API[@]}")
unloads=$(metric "$URL_L" kronosd_model_unloads_total "${API[@]}")
tiny_bytes=$(metric "$URL_L" 'kronosd_model_bytes{model="tiny"}' "${API[@]}")
http GET "$URL_L/models/tiny" "${API[@]}"
want_bytes=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['bytes'])" "$BODY")
[ "$n_models" = 1 ] && [ "$loads" = 4 ] && [ "$unloads" = 4 ] && [ "$tiny_bytes" = "$want_bytes" ] \
    && pass "/metrics: 1 model, 4 loads, 4 unloads, tiny's bytes as GET /models says" \
    || fail "/metrics" "models $n_models loads $loads unloads $unloads bytes $tiny_bytes/$want_bytes"
# the default model still answers after all this
http POST "$URL_L/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/forecast.json"
expect "tiny still forecasts" 200 'd["model"]["id"] == "tiny"'

# ---- model-memory-bytes: the least recently used idle model makes room -----------------------
# b and c: wide's shapes (so its bytes), their own weights and tokenizers
make_model b wide 11
make_model c wide 13
# room for tiny and two of a, b, c
BUDGET=$((TINY_BYTES + 2 * WIDE_BYTES + WIDE_BYTES / 2))
start_daemon M --api-key-file "$WORK/keys" --admin-key-file "$WORK/admin" \
    --model-memory-bytes "$BUDGET"
URL_L=$URL_M
load a "$WORK/wide"
expect "budget: a loaded" 201 "d['bytes'] == $WIDE_BYTES"
load b "$WORK/b"
expect "budget: b loaded" 201 "d['bytes'] == $WIDE_BYTES"
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['model']='a'; json.dump(d, open(sys.argv[2],'w'))" \
    "$WORK/forecast.json" "$WORK/a_forecast.json"
http POST "$URL_M/forecast" "${JSON[@]}" "${API[@]}" -d @"$WORK/a_forecast.json"
expect "budget: a used after b's load" 200
load c "$WORK/c"
expect "budget: c loaded over the budget" 201 "d['id'] == 'c'"
[ "$(listed)" = "tiny,a,c" ] && pass "budget: b, the least recently used idle model, unloaded" \
    || fail "budget: the models after c's load" "$(listed)"
grep -q "model b unloaded (least recently used) to make room for c under model-memory-bytes $BUDGET" \
    "$WORK/M.log" && pass "budget: the log names b, c and the budget" || fail "budget: log" "$(tail -3 "$WORK/M.log")"
# a and c each hold a session: nothing idle to unload, b is refused
for m in a c; do
    http POST "$URL_M/sessions" "${JSON[@]}" "${API[@]}" -d "{\"model\": \"$m\"}"
    expect "budget: a session on $m" 201
done
load b "$WORK/b"
expect "budget: b refused, 507 naming the need and the budget" 507 \
    "d['error']['code'] == 'model_memory_exceeded' and 'model-memory-bytes $BUDGET' in d['error']['message'] and 'needs $WIDE_BYTES bytes' in d['error']['message']"
[ "$(listed)" = "tiny,a,c" ] && pass "budget: after the refusal, tiny, a, c" || fail "budget: after 507" "$(listed)"

# ---- SIGHUP: the config file's model set read again ----------------------------------------
# wait_log NAME TEXT: until the daemon's log holds TEXT (20 s at most)
wait_log() {
    local i
    for i in $(seq 1 400); do
        grep -qF "$2" "$WORK/$1.log" && return 0
        sleep 0.05
    done
    return 1
}
printf 'model = tiny=%s\nmodel = wide=%s\nmodel = c=%s\nadmin-key-file = %s\napi-key-file = %s\n' \
    "$MODEL" "$WORK/wide" "$WORK/c" "$WORK/admin" "$WORK/keys" >"$WORK/hup.conf"
start_only H --config "$WORK/hup.conf"
URL_L=$URL_H
[ "$(listed)" = "tiny,wide,c" ] && pass "SIGHUP: started with tiny, wide, c" || fail "SIGHUP: start" "$(listed)"
http POST "$URL_H/sessions" "${JSON[@]}" "${API[@]}" -d '{"model": "c"}'
expect "SIGHUP: a session on c" 201
# wide and c out, b in: wide goes, c (a session) is kept, b is loaded
printf 'model = tiny=%s\nmodel = b=%s\nadmin-key-file = %s\napi-key-file = %s\n' \
    "$MODEL" "$WORK/b" "$WORK/admin" "$WORK/keys" >"$WORK/hup.conf"
kill -HUP "$PID_H"
wait_log H "reload: model b loaded from $WORK/b/predictor" \
    && pass "SIGHUP: the log says b was loaded" || fail "SIGHUP: b's log line" "$(tail -5 "$WORK/H.log")"
grep -qF "reload: model wide unloaded (no longer configured)" "$WORK/H.log" \
    && pass "SIGHUP: the log says wide was unloaded" || fail "SIGHUP: wide's log line" "$(tail -5 "$WORK/H.log")"
grep -qF "reload: model c kept: model c holds 1 live session" "$WORK/H.log" \
    && pass "SIGHUP: c, holding a session, kept and logged" || fail "SIGHUP: c's log line" "$(tail -5 "$WORK/H.log")"
[ "$(listed)" = "tiny,b,c" ] && pass "SIGHUP: GET /models lists tiny, b (in wide's freed slot), c" || fail "SIGHUP: the models" "$(listed)"
# the Python client's admin calls
out=$("$PY" - "$SRC/clients/python" "$URL_H" "$WORK/wide" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from kronosd_client import Client, KronosdError
c = Client(sys.argv[2], api_key="alice-key-1")
try:
    c.load_model(sys.argv[3], model_id="w2")
    print("loaded without the admin key")
except KronosdError as e:
    assert e.status == 401, e
e = c.load_model(sys.argv[3], model_id="w2", admin_key="admin-key-9")
assert e["id"] == "w2" and [m["id"] for m in c.models()] == ["tiny", "b", "c", "w2"], e
assert c.unload_model("w2", admin_key="admin-key-9") == {"id": "w2", "unloaded": True}
assert [m["id"] for m in c.models()] == ["tiny", "b", "c"]
print("ok")
EOF
)
[ "$out" = ok ] && pass "the Python client: load_model and unload_model with the admin key" \
    || fail "the Python client's admin calls" "$out"

summary
