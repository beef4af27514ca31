#!/usr/bin/env bash
# models_live.sh — a model loaded while serving (POST /models), end to end (models_check.py
# recomputes):
#   * the admin key is asked for: 401 without a key, with an API key, and on a daemon with
#     no admin-key-file;
#   * a loaded model's entry: its hash recomputed from the files, shapes, parameters; a
#     tokenizer with a loaded model's files is shared;
#   * its forecast, series forecast, evaluation, generation and tokenization answer what a
#     one-model daemon of it answers, byte for byte (elapsed_ms aside);
#   * /metrics counts the loaded models' requests;
#   * a loaded id is 409 model_exists; a folder whose files do not load is 422
#     model_load_failed with the loader's message (what a daemon started on it says), a body
#     breaking a rule is 400; after each refusal GET /models is as it was.
# Usage: KR_MKMODEL=PATH models_live.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

make_wide_narrow
# broken: wide's folder with its predictor's weights cut short (the files hash; they do not load)
cp -r "$WORK/wide" "$WORK/broken"
head -c 100 "$WORK/wide/predictor/model.safetensors" >"$WORK/broken/predictor/model.safetensors"

model_keys
start_daemon L --api-key-file "$WORK/keys" --admin-key-file "$WORK/admin"
start_daemon N
start_solo wide

# models_now: GET /models as L answers it, in $WORK/now.json
models_now() {
    http GET "$URL_L/models" "${API[@]}"
    cp "$BODY" "$WORK/now.json"
}
# unchanged LABEL: GET /models is $WORK/before.json
unchanged() {
    models_now
    cmp -s "$WORK/now.json" "$WORK/before.json" && pass "$1: GET /models unchanged" \
        || fail "$1: GET /models changed" "$(head -c 300 "$WORK/now.json")"
}

# ---- the admin key ---------------------------------------------------------------------------
LOAD_WIDE="{\"id\": \"wide\", \"path\": \"$WORK/wide\"}"
models_now
cp "$WORK/now.json" "$WORK/before.json"
http POST "$URL_L/models" "${JSON[@]}" -d "$LOAD_WIDE"
expect "POST /models without a key: 401" 401 \
    'd["error"]["code"] == "unauthorized" and "admin key" in d["error"]["message"]'
http POST "$URL_L/models" "${JSON[@]}" "${API[@]}" -d "$LOAD_WIDE"
expect "POST /models with an API key: 401 (an API key is no admin key)" 401 \
    'd["error"]["code"] == "unauthorized"'
http POST "$URL_N/models" "${JSON[@]}" "${ADMIN[@]}" -d "$LOAD_WIDE"
expect "POST /models on a daemon without admin-key-file: 401 saying so" 401 \
    '"no admin-key-file" in d["error"]["message"]'
unchanged "after the refused keys"

# ---- a body breaking a rule, a folder that does not load --------------------------------------
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"path\": \"$WORK/wide\", \"dir\": 1}"
expect "an unknown field: 400 naming it" 400 \
    'd["error"]["code"] == "invalid_request" and d["error"]["message"].startswith("dir:")'
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d '{"id": "wide"}'
expect "no path: 400 naming it" 400 'd["error"]["message"].startswith("path:")'
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"id\": \"a/b\", \"path\": \"$WORK/wide\"}"
expect "an id that is not one: 400" 400 '"model id" in d["error"]["message"]'
"$KRONOSD" serve --port 0 --model "broken=$WORK/broken" >"$WORK/broken.log" 2>&1 \
    && fail "a daemon started on the broken folder" "$(cat "$WORK/broken.log")"
LOADER=$(grep -o "cannot load model 'broken': .*" "$WORK/broken.log" | head -1)
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"id\": \"broken\", \"path\": \"$WORK/broken\"}"
expect "a folder that does not load: 422 with the loader's message" 422 \
    "d['error']['code'] == 'model_load_failed' and len('''$LOADER''') > 30 and '''$LOADER''' in d['error']['message']"
unchanged "after the broken folder"

# ---- loaded --------------------------------------------------------------------------------------
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "$LOAD_WIDE"
expect "POST /models with the admin key: 201, its entry" 201 'd["id"] == "wide" and d["default"] is False'
cp "$BODY" "$WORK/entry_wide.json"
out=$(models_check entry "$WORK/entry_wide.json" "$WORK/wide")
[ "$out" = ok ] && pass "wide: hash recomputed from the files, shapes, parameters" \
    || fail "wide: the entry against the files" "$out"
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"path\": \"$WORK/narrow\"}"
expect "narrow (the folder's name its id) shares tiny's tokenizer" 201 \
    'd["id"] == "narrow" and d["tokenizer"]["shared_with"] == "tiny" and d["bytes"] < 4 * d["parameters"]'
cp "$BODY" "$WORK/entry_narrow.json"
out=$(models_check entry "$WORK/entry_narrow.json" "$WORK/narrow")
[ "$out" = ok ] && pass "narrow: its entry against the files" || fail "narrow: entry" "$out"
models_now
jq_ok '[m["id"] for m in d["models"]] == ["tiny", "wide", "narrow"]' "$WORK/now.json" \
    && pass "GET /models lists tiny, wide, narrow" || fail "GET /models" "$(head -c 300 "$WORK/now.json")"
http GET "$URL_L/models/wide" "${API[@]}"
"$PY" -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else 1)" \
    "$BODY" "$WORK/entry_wide.json" && pass "GET /models/wide is the entry POST answered" \
    || fail "GET /models/wide" "$(head -c 300 "$BODY")"
cp "$WORK/now.json" "$WORK/before.json"
http POST "$URL_L/models" "${JSON[@]}" "${ADMIN[@]}" -d "{\"id\": \"wide\", \"path\": \"$WORK/narrow\"}"
expect "a loaded id: 409 model_exists" 409 'd["error"]["code"] == "model_exists" and "wide" in d["error"]["message"]'
unchanged "after the loaded id"

# ---- the loaded model answers as a one-model daemon of it --------------------------------------
as_solo "loaded" wide "$URL_L" "${API[@]}"
# five requests ran on wide, none on narrow: /metrics counts the loaded models too
wide_n=$(metric "$URL_L" 'kronosd_model_requests_total{model="wide"}' "${API[@]}")
narrow_n=$(metric "$URL_L" 'kronosd_model_requests_total{model="narrow"}' "${API[@]}")
[ "$wide_n" = 5 ] && [ "$narrow_n" = 0 ] && pass "/metrics: wide's 5 requests, narrow's 0" \
    || fail "/metrics of the loaded models" "wide '$wide_n', narrow '$narrow_n'"
grep -q "model wide loaded from $WORK/wide: hash $(models_check hash "$WORK/wide" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hash"])')" "$WORK/L.log" \
    && pass "the log names the loaded model and its hash" || fail "log line" "$(tail -5 "$WORK/L.log")"

summary
