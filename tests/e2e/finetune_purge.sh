#!/usr/bin/env bash
# finetune_purge.sh — a fine-tuned model unloaded or removed for good (DELETE /models/{id}
# with and without purge=true), across restarts on the same state-dir, end to end on
# tests/data/tiny:
#   * without purge the model is unloaded and its checkpoint kept: the answer names the folder
#     and says the next start loads it (loads_at_start); the folder is there, and a restart
#     lists the model again with the same hash and its job;
#   * with purge=true it is unloaded, its folder deleted and its job no longer listed, and a
#     restart neither loads nor lists it; the id can be trained again;
#   * purge of a tuned model unloaded before: its checkpoint still goes ("unloaded": false);
#   * refusals leave everything as it was: no admin key (401), a bad or unknown query
#     parameter (400 naming it), purge of a model that is not a tuned one (400 naming purge),
#     an unknown id (404), a tuned model a session is bound to (409 model_in_use);
#   * without state-dir the checkpoint is kept for this run only (loads_at_start false);
#   * the Python client's unload_model(purge=True).
# Usage: finetune_purge.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
CSV="$SRC/tests/data/kline_5min.csv"
STATE="$WORK/state"
mkdir -p "$STATE"
printf 'ops:admin-key-7\n' >"$WORK/admin"
ADMIN=(-H 'Authorization: Bearer admin-key-7')
CSVH=(-H 'Content-Type: text/csv' --data-binary "@$CSV")
JSON=(-H 'Content-Type: application/json')
Q="steps=2&batch=2&lookback=32&predict=4&gate_samples=0"

# train URL JOB ID: a short job registering ID, waited for
train() {
    http POST "$1/finetune?$Q&id=$3" "${CSVH[@]}" "${ADMIN[@]}"
    expect "POST /finetune as $3: 202 $2" 202 "d['id'] == '$2'"
    wait_job "$1" "$2"
    expect "job $2 done, model $3" 200 "d['state'] == 'done' and d['model'] == '$3'"
}
# listed URL ID: GET /models lists ID
listed() {
    http GET "$1/models"
    jq_ok "any(m['id'] == '$2' for m in d['models'])"
}
hash_of() {
    http GET "$1/models/$2"
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["hash"])' "$BODY" 2>/dev/null
}

start_daemon A --admin-key-file "$WORK/admin" --state-dir "$STATE"
train "$URL_A" ft-1 keep1
train "$URL_A" ft-2 gone1
train "$URL_A" ft-3 held1
HASH1=$(hash_of "$URL_A" keep1)

# ---- refusals: nothing changes ---------------------------------------------------------------
http DELETE "$URL_A/models/gone1?purge=true"
expect "purge without the admin key: 401" 401 'd["error"]["code"] == "unauthorized"'
http DELETE "$URL_A/models/gone1?purge=maybe" "${ADMIN[@]}"
expect "purge=maybe: 400 naming purge" 400 'd["error"]["message"].startswith("purge:")'
http DELETE "$URL_A/models/gone1?purgee=true" "${ADMIN[@]}"
expect "an unknown query parameter: 400 naming it" 400 '"purgee" in d["error"]["message"]'
http DELETE "$URL_A/models/tiny?purge=true" "${ADMIN[@]}"
expect "purge of a model that is not a tuned one: 400 naming purge" 400 \
    'd["error"]["code"] == "invalid_request" and d["error"]["message"].startswith("purge:")'
http DELETE "$URL_A/models/nope?purge=true" "${ADMIN[@]}"
expect "purge of an unknown id: 404" 404 'd["error"]["code"] == "model_not_found"'
http POST "$URL_A/sessions" "${JSON[@]}" -d '{"model": "held1"}'
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$BODY" 2>/dev/null)
http DELETE "$URL_A/models/held1?purge=true" "${ADMIN[@]}"
expect "purge of a tuned model a session is bound to: 409" 409 'd["error"]["code"] == "model_in_use"'
if [ -d "$STATE/models/gone1" ] && [ -d "$STATE/models/held1" ] && listed "$URL_A" gone1 &&
    listed "$URL_A" held1 && listed "$URL_A" tiny
then pass "after the refusals: every model listed, every folder there"
else fail "after the refusals: every model listed, every folder there" "$(ls -A "$STATE/models")"; fi
http DELETE "$URL_A/sessions/$SID"

# ---- unloaded, kept --------------------------------------------------------------------------
http DELETE "$URL_A/models/keep1" "${ADMIN[@]}"
expect "DELETE /models/keep1: unloaded, its checkpoint kept and loaded at start" 200 \
    "d == {'id': 'keep1', 'unloaded': True, 'checkpoint': '$STATE/models/keep1', 'loads_at_start': True}"
listed "$URL_A" keep1 && fail "keep1 no longer listed" || pass "keep1 no longer listed"
[ -f "$STATE/models/keep1/predictor/model.safetensors" ] && pass "keep1's folder is there" \
    || fail "keep1's folder is there" "$(ls -A "$STATE/models")"
http POST "$URL_A/finetune?$Q&id=keep1" "${CSVH[@]}" "${ADMIN[@]}"
expect "a job as keep1 while its checkpoint stays: 409" 409 'd["error"]["code"] == "model_exists"'

# ---- removed for good ------------------------------------------------------------------------
http DELETE "$URL_A/models/gone1?purge=true" "${ADMIN[@]}"
expect "DELETE /models/gone1?purge=true: unloaded and purged" 200 \
    'd == {"id": "gone1", "unloaded": True, "purged": True}'
listed "$URL_A" gone1 && fail "gone1 no longer listed" || pass "gone1 no longer listed"
if [ -z "$(ls -A "$STATE/models" | grep gone1)" ]; then pass "gone1's folder is gone"
else fail "gone1's folder is gone" "$(ls -A "$STATE/models")"; fi
http GET "$URL_A/finetune/ft-2" "${ADMIN[@]}"
expect "its job ft-2 is no longer known" 404 'd["error"]["code"] == "job_not_found"'
http GET "$URL_A/finetune" "${ADMIN[@]}"
expect "GET /finetune lists ft-1 and ft-3" 200 '[j["id"] for j in d["jobs"]] == ["ft-1", "ft-3"]'
http DELETE "$URL_A/models/gone1?purge=true" "${ADMIN[@]}"
expect "purge again: 404" 404 'd["error"]["code"] == "model_not_found"'
grep -q "model gone1: checkpoint .* removed for good" "$WORK/A.log" && pass "the log says so" \
    || fail "the log says so" "$(grep gone1 "$WORK/A.log")"

# ---- a restart -------------------------------------------------------------------------------
kill -TERM "$PID_A"
wait "$PID_A" 2>/dev/null
start_daemon B --admin-key-file "$WORK/admin" --state-dir "$STATE"
if listed "$URL_B" keep1 && [ "$(hash_of "$URL_B" keep1)" = "$HASH1" ]
then pass "after a restart: keep1 (unloaded, not purged) loaded again, the same hash"
else fail "after a restart: keep1 (unloaded, not purged) loaded again, the same hash" "$(head -c 300 "$BODY")"; fi
listed "$URL_B" gone1 && fail "after a restart: gone1 stays gone" || pass "after a restart: gone1 stays gone"
http GET "$URL_B/finetune" "${ADMIN[@]}"
expect "after a restart: the jobs of ft-1 and ft-3 only" 200 'sorted(j["id"] for j in d["jobs"]) == ["ft-1", "ft-3"]'

# unloaded first, then purged: the checkpoint still goes
http DELETE "$URL_B/models/keep1" "${ADMIN[@]}"
expect "keep1 unloaded again" 200 'd["unloaded"] is True and "checkpoint" in d'
http DELETE "$URL_B/models/keep1?purge=true" "${ADMIN[@]}"
expect "then purged: 200, unloaded false" 200 'd == {"id": "keep1", "unloaded": False, "purged": True}'
[ ! -e "$STATE/models/keep1" ] && pass "keep1's folder is gone" || fail "keep1's folder is gone"
train "$URL_B" ft-4 gone1
kill -TERM "$PID_B"
wait "$PID_B" 2>/dev/null
start_daemon C --admin-key-file "$WORK/admin" --state-dir "$STATE"
http GET "$URL_C/models"
expect "after another restart: tiny, held1 and the new gone1" 200 \
    'sorted(m["id"] for m in d["models"]) == ["gone1", "held1", "tiny"]'
if [ "$(ls -A "$STATE/models" | tr '\n' ' ')" = "gone1 held1 " ]; then pass "no leftover folder"
else fail "no leftover folder" "$(ls -A "$STATE/models")"; fi

if PYTHONPATH="$SRC/clients/python" KRONOSD_CLIENT_NO_PANDAS=1 "$PY" - "$URL_C" <<'PYEOF'
import sys
from kronosd_client import Client
kd = Client(sys.argv[1], admin_key="admin-key-7")
assert kd.unload_model("held1", purge=True) == {"id": "held1", "unloaded": True, "purged": True}
assert not any(m["id"] == "held1" for m in kd.models())
assert [j["id"] for j in kd.finetune_jobs()] == ["ft-4"]
PYEOF
then pass "the Python client: unload_model(purge=True)"
else fail "the Python client: unload_model(purge=True)"; fi
[ ! -e "$STATE/models/held1" ] && pass "held1's folder is gone" || fail "held1's folder is gone"

# ---- without state-dir -----------------------------------------------------------------------
start_daemon D --admin-key-file "$WORK/admin"
train "$URL_D" ft-1 temp1
http DELETE "$URL_D/models/temp1" "${ADMIN[@]}"
expect "without state-dir: kept for this run only" 200 \
    'd["unloaded"] is True and d["loads_at_start"] is False and d["checkpoint"].endswith("/temp1")'
http DELETE "$URL_D/models/temp1?purge=true" "${ADMIN[@]}"
expect "without state-dir: purged" 200 'd == {"id": "temp1", "unloaded": False, "purged": True}'
summary
