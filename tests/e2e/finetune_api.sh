#!/usr/bin/env bash
# finetune_api.sh — fine-tuning jobs in the daemon (POST /finetune), end to end on
# tests/data/tiny and the example series:
#   * the admin key is asked for (401), a setting breaking a rule is 400 naming the field;
#   * a short job (a text/csv body, its settings in the query) reaches done: `steps` finite
#     losses, the validations, the gate's table; the model it registers is listed, and its
#     forecast equals a one-model daemon's of the written folder, byte for byte (elapsed_ms
#     aside);
#   * kronosd finetune with the same settings writes the same checkpoint bytes and losses;
#   * a JSON body's job streams its progress (text/event-stream): progress events, a final
#     "done";
#   * DELETE during a longer job: cancelled, no model, no folder;
#   * a restart on the same state-dir lists the model again with the same hash, and the job;
#   * a light forecast every second during a job answers (its times in the log; no timing
#     assertion).
# Usage: finetune_api.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"
CSV="$SRC/tests/data/kline_5min.csv"
CHECK="$SRC/tests/e2e/models_check.py"
STATE="$WORK/state"
mkdir -p "$STATE"
printf 'ops:admin-key-9\n' >"$WORK/admin"
ADMIN=(-H 'Authorization: Bearer admin-key-9')
CSVH=(-H 'Content-Type: text/csv' --data-binary "@$CSV")
JSON=(-H 'Content-Type: application/json')
start_daemon A --admin-key-file "$WORK/admin" --state-dir "$STATE"

# ---- refusals --------------------------------------------------------------------------------
Q="steps=6&batch=4&lookback=48&predict=8&lr=0.001&seed=3&eval_every=2&s2_condition=sampled"
http POST "$URL_A/finetune?$Q" "${CSVH[@]}"
expect "POST /finetune without a key: 401" 401 'd["error"]["code"] == "unauthorized"'
http GET "$URL_A/finetune"
expect "GET /finetune without a key: 401" 401
http POST "$URL_A/finetune?steps=6&batch=0" "${CSVH[@]}" "${ADMIN[@]}"
expect "batch 0: 400 naming batch" 400 'd["error"]["message"].startswith("batch:")'
http POST "$URL_A/finetune?steps=6&depth=9" "${CSVH[@]}" "${ADMIN[@]}"
expect "depth above n_layers: 400 naming depth" 400 'd["error"]["message"].startswith("depth:")'
http POST "$URL_A/finetune" "${JSON[@]}" "${ADMIN[@]}" -d '{"candles": [], "steps": 2, "lrr": 1}'
expect "an unknown field: 400 naming it" 400 '"lrr" in d["error"]["message"]'
http POST "$URL_A/finetune" "${JSON[@]}" "${ADMIN[@]}" -d '{"model": "nope", "steps": 2}'
expect "an unknown base model: 404" 404 'd["error"]["code"] == "model_not_found"'

# ---- a short job, a light forecast every second beside it ------------------------------------
head -201 "$CSV" >"$WORK/light.csv"
light_loop() {
    while :; do
        local t
        t=$(curl -sS -m 30 -o /dev/null -w '%{http_code} %{time_total}' -H 'Content-Type: text/csv' \
            --data-binary "@$WORK/light.csv" "$URL_A/forecast?horizon=4&samples=1")
        echo "light forecast: $t" >>"$WORK/light.log"
        sleep 1
    done
}
for i in 1 2 3 4 5; do # the same forecast alone first, for the log's comparison
    curl -sS -m 30 -o /dev/null -w 'light forecast alone: %{http_code} %{time_total}\n' \
        -H 'Content-Type: text/csv' --data-binary "@$WORK/light.csv" \
        "$URL_A/forecast?horizon=4&samples=1" >>"$WORK/alone.log"
done
cat "$WORK/alone.log"
light_loop &
LIGHT=$!
BG_PIDS+=("$LIGHT")
http POST "$URL_A/finetune?$Q&id=tuned1" "${CSVH[@]}" "${ADMIN[@]}"
expect "POST /finetune: 202 queued" 202 \
    'd["id"] == "ft-1" and d["state"] in ("queued", "running") and d["registers_as"] == "tuned1"'
grep -qi '^location: /finetune/ft-1' "$HEADERS" && pass "Location: /finetune/ft-1" \
    || fail "Location: /finetune/ft-1" "$(cat "$HEADERS")"
wait_job "$URL_A" ft-1
cp "$BODY" "$WORK/job1.json"
kill "$LIGHT" 2>/dev/null
wait "$LIGHT" 2>/dev/null
expect "the job is done" 200 'd["state"] == "done" and d["model"] == "tuned1"'
if jq_ok 'len(d["loss"]) == d["steps"] == 6 and all(x == x and abs(x) < 1e9 for x in d["loss"]) and [v["step"] for v in d["validation"]] == [0, 2, 4, 6] and all(v["loss"] == v["loss"] for v in d["validation"])' "$WORK/job1.json"
then pass "6 finite losses, validations at steps 0, 2, 4, 6"
else fail "6 finite losses, validations at steps 0, 2, 4, 6" "$(head -c 400 "$WORK/job1.json")"; fi
jq_ok 'len(d["gate"]["series"]) == 1 and all(k in d["gate"]["series"][0][s] for s in ("base", "tuned") for k in ("crps", "direction_accuracy", "origins")) and d["gate"]["tuned_better_crps"] == (d["gate"]["series"][0]["tuned"]["crps"] < d["gate"]["series"][0]["base"]["crps"])' "$WORK/job1.json" \
    && pass "the gate's table and verdict" || fail "the gate's table and verdict" "$(head -c 400 "$WORK/job1.json")"
echo "light forecasts during the job (status seconds):"
cat "$WORK/light.log" 2>/dev/null
if [ -s "$WORK/light.log" ] && ! grep -qv '^light forecast: 200 ' "$WORK/light.log"
then pass "light forecasts during the job answer 200"
else fail "light forecasts during the job answer 200" "$(cat "$WORK/light.log" 2>/dev/null)"; fi
grep -q "finetune ft-1: done, model tuned1" "$WORK/A.log" && pass "the log says the job is done" \
    || fail "the log says the job is done" "$(grep finetune "$WORK/A.log")"

DIR="$STATE/models/tuned1"
http GET "$URL_A/models"
expect "GET /models lists tuned1" 200 'any(m["id"] == "tuned1" for m in d["models"])'
"$PY" -c 'import json,sys; print([m["hash"] for m in json.load(open(sys.argv[1]))["models"] if m["id"] == "tuned1"][0])' "$BODY" >"$WORK/hash1"
"$PY" "$CHECK" hash "$DIR" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hash"])' >"$WORK/hash_files"
cmp -s "$WORK/hash1" "$WORK/hash_files" && pass "its hash is its files'" || fail "its hash is its files'"
http POST "$URL_A/forecast?horizon=4&samples=2&seed=1&model=tuned1" -H 'Content-Type: text/csv' \
    --data-binary "@$WORK/light.csv"
cp "$BODY" "$WORK/fc_a.json"
fc_status=$STATUS
MODEL="$DIR" start_daemon solo
http POST "$URL_solo/forecast?horizon=4&samples=2&seed=1" -H 'Content-Type: text/csv' \
    --data-binary "@$WORK/light.csv"
if [ "$fc_status" = 200 ] && [ "$STATUS" = 200 ] && "$PY" "$CHECK" same "$WORK/fc_a.json" "$BODY"
then pass "model tuned1 forecasts as a one-model daemon of its folder"
else fail "model tuned1 forecasts as a one-model daemon of its folder" "$fc_status $(head -c 200 "$WORK/fc_a.json")"; fi
kill "$PID_solo"

# the same settings through the CLI: the same checkpoint bytes and losses
"$KRONOSD" finetune --model "$MODEL" --csv "$CSV" --steps 6 --batch 4 --lookback 48 --predict 8 \
    --lr 0.001 --seed 3 --eval-every 2 --s2-condition sampled --out "$WORK/cli" \
    >"$WORK/cli.out" 2>"$WORK/cli.err"
if cmp -s "$DIR/predictor/model.safetensors" "$WORK/cli/predictor/model.safetensors" &&
    cmp -s "$DIR/tokenizer/model.safetensors" "$WORK/cli/tokenizer/model.safetensors" &&
    "$PY" -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(0 if a["loss"]==b["loss"] and a["validation"]==b["validation"] and a["gate"]["series"][0]["tuned"]==b["gate"]["series"][0]["tuned"] else 1)' "$DIR/finetune.json" "$WORK/cli/finetune.json"
then pass "kronosd finetune: the same checkpoint bytes, losses and gate"
else fail "kronosd finetune: the same checkpoint bytes, losses and gate" "$(tail -2 "$WORK/cli.err")"; fi

http POST "$URL_A/finetune?$Q&id=tuned1" "${CSVH[@]}" "${ADMIN[@]}"
expect "the id of a loaded model: 409" 409 'd["error"]["code"] == "model_exists"'

# ---- a JSON body's job, streamed -------------------------------------------------------------
"$PY" - "$CSV" "$WORK/job2.json" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    cols[k] = [float(r[k]) for r in rows]
half = {k: v[:1300] for k, v in cols.items()}
rest = {k: v[1300:] for k, v in cols.items()}
json.dump({"series": [half, {"candles": rest}], "steps": 4, "batch": 2, "lookback": 32,
           "predict": 4, "lr": 1e-3, "eval_every": 2, "gate_samples": 0}, open(sys.argv[2], "w"))
PYEOF
http POST "$URL_A/finetune" "${JSON[@]}" "${ADMIN[@]}" --data-binary "@$WORK/job2.json"
expect "a JSON body of two series: 202, default id" 202 'd["id"] == "ft-2" and d["registers_as"].endswith("-ft-2")'
curl -sS -N -m 120 -H 'Accept: text/event-stream' "${ADMIN[@]}" "$URL_A/finetune/ft-2" >"$WORK/sse.txt"
if grep -q '^event: progress' "$WORK/sse.txt" && tail -3 "$WORK/sse.txt" | grep -q '^event: done'
then pass "the stream: progress events and a final done"
else fail "the stream: progress events and a final done" "$(tail -c 400 "$WORK/sse.txt")"; fi
http GET "$URL_A/finetune/ft-2" "${ADMIN[@]}"
expect "two series: done, no gate asked" 200 'd["state"] == "done" and d["gate"] is None and len(d["loss"]) == 4'
curl -sS -N -m 20 "${ADMIN[@]}" "$URL_A/finetune/ft-2?stream=true" >"$WORK/sse2.txt"
grep -q '^event: done' "$WORK/sse2.txt" && pass "?stream=true of a finished job: its final event" \
    || fail "?stream=true of a finished job: its final event" "$(head -c 300 "$WORK/sse2.txt")"

# ---- cancelled -------------------------------------------------------------------------------
http POST "$URL_A/finetune?steps=100000&batch=2&lookback=32&predict=4&eval_every=50000&id=long" \
    "${CSVH[@]}" "${ADMIN[@]}"
expect "a long job: 202" 202 'd["id"] == "ft-3"'
for i in $(seq 1 300); do
    http GET "$URL_A/finetune/ft-3" "${ADMIN[@]}"
    jq_ok 'd["step"] >= 1' && break
    sleep 0.1
done
http DELETE "$URL_A/finetune/ft-3" "${ADMIN[@]}"
expect "DELETE /finetune/ft-3: 202" 202 'd["id"] == "ft-3"'
wait_job "$URL_A" ft-3
expect "the job is cancelled" 200 'd["state"] == "cancelled" and d["model"] is None and 1 <= len(d["loss"]) < 100000'
http GET "$URL_A/models"
expect "no model of it" 200 'not any(m["id"] == "long" for m in d["models"])'
if [ -z "$(ls -A "$STATE/models" | grep -v -e '^tuned1$' -e '-ft-2$')" ]; then pass "no folder of it"
else fail "no folder of it" "$(ls -A "$STATE/models")"; fi
http DELETE "$URL_A/finetune/ft-3" "${ADMIN[@]}"
expect "DELETE of an ended job: 409" 409 'd["error"]["code"] == "job_finished"'
http GET "$URL_A/finetune/ft-99" "${ADMIN[@]}"
expect "an unknown job: 404" 404 'd["error"]["code"] == "job_not_found"'
http GET "$URL_A/finetune" "${ADMIN[@]}"
expect "GET /finetune lists the three" 200 '[j["state"] for j in d["jobs"]] == ["done", "done", "cancelled"]'


# ---- the Python client ---------------------------------------------------------------------
if PYTHONPATH="$SRC/clients/python" KRONOSD_CLIENT_NO_PANDAS=1 "$PY" - "$URL_A" "$CSV" <<'PYEOF'
import csv, sys
from kronosd_client import Client, KronosdError
url, path = sys.argv[1:3]
rows = list(csv.DictReader(open(path)))[:600]
df = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    df[k] = [float(r[k]) for r in rows]
seen = []
kd = Client(url, admin_key="admin-key-9")
job = kd.finetune(df, steps=2, batch=2, lookback=32, predict=4, gate_samples=0, id="py-ft",
                  poll=0.2, progress=seen.append)
assert job["state"] == "done" and job["model"] == "py-ft" and len(job["loss"]) == 2, job
assert seen and seen[-1] == job
assert any(m["id"] == "py-ft" for m in kd.models())
assert kd.forecast(df, horizon=2, model="py-ft").model["id"] == "py-ft"
assert [j["id"] for j in kd.finetune_jobs()][-1] == job["id"]
try:
    Client(url).finetune(df, steps=2)
    raise SystemExit("no admin key: not refused")
except KronosdError as e:
    assert e.status == 401, e
PYEOF
then pass "the Python client: finetune() polls the job to done, the model answers"
else fail "the Python client: finetune() polls the job to done, the model answers"; fi

# ---- a restart on the same state-dir ---------------------------------------------------------
kill -TERM "$PID_A"
wait "$PID_A" 2>/dev/null
start_daemon B --admin-key-file "$WORK/admin" --state-dir "$STATE"
http GET "$URL_B/models"
cp "$BODY" "$WORK/models_b.json"
"$PY" -c 'import json,sys; print([m["hash"] for m in json.load(open(sys.argv[1]))["models"] if m["id"] == "tuned1"][0])' "$WORK/models_b.json" >"$WORK/hash2" 2>/dev/null
cmp -s "$WORK/hash1" "$WORK/hash2" && pass "after a restart: tuned1 listed, the same hash" \
    || fail "after a restart: tuned1 listed, the same hash" "$(head -c 300 "$WORK/models_b.json")"
http GET "$URL_B/finetune/ft-1" "${ADMIN[@]}"
if [ "$STATUS" = 200 ] && "$PY" -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(0 if a==b else 1)' "$BODY" "$WORK/job1.json"
then pass "after a restart: job ft-1 answers as before"
else fail "after a restart: job ft-1 answers as before" "$(head -c 300 "$BODY")"; fi
http POST "$URL_B/finetune?steps=1&batch=2&lookback=32&predict=4&gate_samples=0" "${CSVH[@]}" \
    "${ADMIN[@]}"
expect "after a restart: the next job's number follows the listed ones" 202 'd["id"] == "ft-5"'
wait_job "$URL_B" ft-5
expect "after a restart: a new job runs" 200 'd["state"] == "done" and d["model"] == "tiny-ft-5"'
summary
