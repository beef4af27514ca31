#!/usr/bin/env bash
# smoke.sh KRONOSD SRCDIR — the kronosd HTTP API end to end, with curl.
#
# Starts the real daemon on free ports with the fixture model (tests/data/tiny), calls every
# endpoint, checks statuses and JSON fields, the greedy /forecast against the golden case,
# a session across several /generate calls against one call, deletion, expiry, eviction,
# every error status, the API key, the sd_notify protocol, and SIGTERM while a request runs.
# Prints "N passed, M failed"; exits non-zero on any failure.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"
make_bodies

# ---- the command line -------------------------------------------------------------------

if "$KRONOSD" serve --help | grep -q -- "--pool-bytes"; then pass "serve --help lists the keys"
else fail "serve --help lists the keys"; fi
missing=""
for key in $("$KRONOSD" serve --help | sed -n 's/^  --\([a-z-]*\) .*/\1/p'); do
    [ "$key" = config ] && continue
    grep -Eq "^#? ?$key = " "$SRC/config/kronosd.conf" || missing="$missing $key"
done
[ -z "$missing" ] && pass "config/kronosd.conf documents every key" \
    || fail "config/kronosd.conf documents every key" "missing:$missing"
"$KRONOSD" serve --model "$MODEL" --no-such-flag 1 2>/dev/null
[ $? -eq 2 ] && pass "unknown flag exits 2" || fail "unknown flag exits 2"

# ---- daemon A: one worker, a queue of one, a small body limit ----------------------------

start_daemon A --workers 1 --queue-size 1 --max-batch-rows 1 --max-body-bytes 64K
A=$URL_A

http GET "$A/health"
expect "GET /health" 200 'd == {"status": "ok"}'
has_header X-Request-Id && pass "responses carry X-Request-Id" || fail "responses carry X-Request-Id"
http GET "$A/model"
expect "GET /model" 200 'd["max_context"] == 512 and d["parameters"] > 0 and d["pool"]["bytes_total"] > 0 and d["threads"]["workers"] == 1 and d["predictor"]["d_model"] == 64 and d["version"]'
expect "/model names the kernels" 200 'd["kernels"]["simd"] in ("amx", "avx512", "avx2", "generic") and "blas_core" not in d["kernels"]'

http POST "$A/forecast" --data-binary @"$WORK/golden_forecast.json"
cp "$BODY" "$WORK/forecast_out.json"
expect "POST /forecast (golden case)" 200 'd["horizon"] == 16 and d["samples"] == 1 and d["usage"]["generated_tokens"] == 16'
if "$PY" - "$GOLDEN" "$WORK/forecast_out.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]
d = json.load(open(sys.argv[2]))
assert d["timestamps"] == g["future_timestamps"], "timestamps differ"
for col, want in g["expected"].items():
    got = d["mean"][col]
    assert len(got) == len(want), col
    for a, b in zip(got, want):
        assert abs(a - b) <= 1e-4 * abs(b) + 1e-9, f"{col}: {a} vs {b}"
EOF
then pass "greedy /forecast equals golden expected (rel 1e-4)"; else fail "greedy /forecast equals golden expected (rel 1e-4)"; fi

"$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
b = json.load(open(f"{w}/golden_forecast.json"))
b.update({"samples": 4, "quantiles": [0.1, 0.5, 0.9], "return_paths": True, "seed": 42,
          "top_k": 0, "top_p": 0.9})
json.dump(b, open(f"{w}/sampled.json", "w"))
EOF
http POST "$A/forecast" --data-binary @"$WORK/sampled.json"
cp "$BODY" "$WORK/sampled_1.json"
expect "POST /forecast with samples, quantiles, paths" 200 'len(d["paths"]) == 4 and set(d["quantiles"]) == {"0.1", "0.5", "0.9"} and len(d["prob_close_up"]) == 16'
http POST "$A/forecast" --data-binary @"$WORK/sampled.json"
cmp -s <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["usage"].pop("elapsed_ms"); print(json.dumps(d))' "$BODY") \
       <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["usage"].pop("elapsed_ms"); print(json.dumps(d))' "$WORK/sampled_1.json") \
    && pass "same seed, same forecast" || fail "same seed, same forecast"

# /tokenize and /detokenize against the fixture's tokens and tokenizer reconstruction
http POST "$A/tokenize" --data-binary @"$WORK/tokenize.json"
cp "$BODY" "$WORK/tokens.json"
expect "POST /tokenize" 200 'len(d["tokens"]) == 64 and len(d["mean"]) == 6 and len(d["std"]) == 6'
if "$PY" - "$GOLDEN" "$WORK/tokens.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]["intermediate"]
d = json.load(open(sys.argv[2]))
assert [t[0] for t in d["tokens"]] == g["context_s1"]
assert [t[1] for t in d["tokens"]] == g["context_s2"]
EOF
then pass "/tokenize tokens equal the golden context tokens"; else fail "/tokenize tokens equal the golden context tokens"; fi
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump(d, open(sys.argv[2],"w"))' \
    "$WORK/tokens.json" "$WORK/detok_req.json"
http POST "$A/detokenize" --data-binary @"$WORK/detok_req.json"
cp "$BODY" "$WORK/detok.json"
expect "POST /detokenize" 200 'len(d["candles"]) == 6 and all(len(v) == 64 for v in d["candles"].values())'
if "$PY" - "$GOLDEN" "$WORK/tokens.json" "$WORK/detok.json" <<'EOF'
import json, sys
rec = json.load(open(sys.argv[1]))["cases"][0]["intermediate"]["tokenizer_reconstruction"]
t = json.load(open(sys.argv[2]))
d = json.load(open(sys.argv[3]))["candles"]
cols = ["open", "high", "low", "close", "volume", "amount"]
for c, col in enumerate(cols):
    for i, row in enumerate(rec):
        want = row[c] * (t["std"][c] + 1e-5) + t["mean"][c]
        assert abs(d[col][i] - want) <= 1e-4 * (abs(want) + t["std"][c]), (col, i, d[col][i], want)
EOF
then pass "/detokenize equals the golden reconstruction"; else fail "/detokenize equals the golden reconstruction"; fi

# ---- sessions: several /generate calls equal one call ----------------------------------

"$PY" - "$GOLDEN" "$WORK" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]
w = sys.argv[2]
toks = json.load(open(f"{w}/tokens.json"))["tokens"]
ts, ft = g["input"]["timestamps"], g["future_timestamps"]
greedy = {"top_k": 1}
json.dump({"tokens": toks, "timestamps": ts, "max_new_tokens": 16, "future_timestamps": ft, **greedy},
          open(f"{w}/gen_one.json", "w"))
json.dump({"tokens": toks[:20], "timestamps": ts[:20]}, open(f"{w}/gen_a.json", "w"))
# the middle part as stamps: [minute, hour, weekday, day, month] of the same times
def stamp(s):
    import datetime
    t = datetime.datetime.fromisoformat(s)
    return [t.minute, t.hour, t.weekday(), t.day, t.month]
json.dump({"tokens": toks[20:50], "stamps": [stamp(s) for s in ts[20:50]], "max_new_tokens": 0},
          open(f"{w}/gen_b.json", "w"))
json.dump({"tokens": toks[50:], "timestamps": ts[50:], "max_new_tokens": 10,
           "future_timestamps": ft[:10], **greedy}, open(f"{w}/gen_c.json", "w"))
json.dump({"tokens": [], "max_new_tokens": 6, "future_stamps": [stamp(s) for s in ft[10:]], **greedy},
          open(f"{w}/gen_d.json", "w"))
EOF
http POST "$A/generate" --data-binary @"$WORK/gen_one.json"
cp "$BODY" "$WORK/gen_one_out.json"
expect "POST /generate without a session" 200 'len(d["tokens"]) == 16 and d["length"] == 80 and d["usage"]["generated"] == 16'

http POST "$A/sessions"
expect "POST /sessions: <node-id>-<32 hex>" 201 'len(d["session"].rsplit("-", 1)[1]) == 32 and int(d["session"].rsplit("-", 1)[1], 16) >= 0 and d["session"].rsplit("-", 1)[0] != ""'
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
for part in a b c d; do
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["session"]=sys.argv[2]; json.dump(d,open(sys.argv[1],"w"))' "$WORK/gen_$part.json" "$SID"
    http POST "$A/generate" --data-binary @"$WORK/gen_$part.json"
    cp "$BODY" "$WORK/gen_${part}_out.json"
done
expect "session: the last /generate call" 200 'd["length"] == 80 and d["session"] and len(d["tokens"]) == 6'
if "$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
one = json.load(open(f"{w}/gen_one_out.json"))["tokens"]
c = json.load(open(f"{w}/gen_c_out.json"))["tokens"]
d = json.load(open(f"{w}/gen_d_out.json"))["tokens"]
lengths = [json.load(open(f"{w}/gen_{p}_out.json"))["length"] for p in "abcd"]
assert lengths == [20, 50, 74, 80], lengths
assert c + d == one, (c + d, one)
EOF
then pass "four /generate calls on a session equal one call (greedy)"; else fail "four /generate calls on a session equal one call (greedy)"; fi

http GET "$A/sessions/$SID"
expect "GET /sessions/{id}" 200 'd["length"] == 80 and d["bytes"] > 0 and d["idle_seconds"] >= 0 and d["busy"] is False'
http DELETE "$A/sessions/$SID"
expect "DELETE /sessions/{id}" 200 'd["deleted"] is True'
http GET "$A/sessions/$SID"
expect "GET a deleted session: 404 saying so" 404 '"deleted" in d["error"]["message"]'
http POST "$A/generate" -d "{\"session\": \"$SID\", \"tokens\": [[1, 2]], \"stamps\": [[0, 9, 0, 3, 6]]}"
expect "/generate on a deleted session: 404" 404 'd["error"]["code"] == "session_not_found"'
http GET "$A/sessions/0123456789abcdef0123456789abcdef"
expect "GET an unknown session: 404" 404 '"unknown session" in d["error"]["message"]'
# an id of this node's form that it does not hold (as after a restart without state-dir)
FORMED="${SID%-*}-0123456789abcdef0123456789abcdef"
http GET "$A/sessions/$FORMED"
expect "GET a session this node does not hold: 404 naming state-dir" 404 \
    '"does not hold it" in d["error"]["message"] and "state-dir" in d["error"]["message"]'

# ---- errors -----------------------------------------------------------------------------

http POST "$A/forecast" -d '{"candles": '
expect "400 invalid JSON" 400 'd["error"]["code"] == "invalid_json" and "line 1" in d["error"]["message"]'
http POST "$A/forecast" -d '[1, 2]'
expect "400 body not an object" 400 '"object" in d["error"]["message"]'
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["horizon"]; json.dump(d,open(sys.argv[2],"w"))' \
    "$WORK/golden_forecast.json" "$WORK/no_horizon.json"
http POST "$A/forecast" --data-binary @"$WORK/no_horizon.json"
expect "400 names a missing field (horizon)" 400 'd["error"]["message"].startswith("horizon:")'
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["top_p"]=2; json.dump(d,open(sys.argv[2],"w"))' \
    "$WORK/golden_forecast.json" "$WORK/bad_top_p.json"
http POST "$A/forecast" --data-binary @"$WORK/bad_top_p.json"
expect "400 names a bad field (top_p)" 400 'd["error"]["message"].startswith("top_p:")'
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["candles"]["close"][3]="x"; json.dump(d,open(sys.argv[2],"w"))' \
    "$WORK/golden_forecast.json" "$WORK/bad_close.json"
http POST "$A/forecast" --data-binary @"$WORK/bad_close.json"
expect "400 names a bad candle (candles.close[3])" 400 'd["error"]["message"].startswith("candles.close[3]:")'
http POST "$A/generate" -d '{"tokens": [[1, 5000]], "stamps": [[0, 9, 0, 3, 6]]}'
expect "400 names a bad token (tokens[0][1])" 400 'd["error"]["message"].startswith("tokens[0][1]:")'
http POST "$A/generate" -d '{"tokens": [[1, 2]], "stamps": [[0, 24, 0, 3, 6]]}'
expect "400 names a bad stamp (stamps[0][1])" 400 'd["error"]["message"].startswith("stamps[0][1]:")'
http POST "$A/generate" -d '{"tokens": [[1, 2]], "timestamps": ["2024-06-18T11:15:00"], "max_new_tokens": 2, "future_timestamps": ["2024-06-18T11:20:00"]}'
expect "400 future_timestamps of the wrong length" 400 'd["error"]["message"].startswith("future_timestamps:")'
http POST "$A/detokenize" -d '{"tokens": [[1, 2]], "mean": [1, 2, 3], "std": [1, 1, 1, 1, 1, 1]}'
expect "400 names a bad field (mean)" 400 'd["error"]["message"].startswith("mean:")'
http POST "$A/tokenize" -d '{"candles": {"timestamps": [1, 2], "open": [1, 2]}}'
expect "400 names a missing column (candles.high)" 400 'd["error"]["message"].startswith("candles.high:")'
http POST "$A/generate" -d '{"session": 7}'
expect "400 session not a string" 400 'd["error"]["message"].startswith("session:")'

http GET "$A/no/such/route"
expect "404 unknown route" 404 'd["error"]["code"] == "not_found"'
http GET "$A/forecast"
expect "405 wrong method" 405 'd["error"]["code"] == "method_not_allowed"'
grep -qi '^Allow: POST' "$HEADERS" && pass "405 carries Allow" || fail "405 carries Allow"

head -c 70000 /dev/zero | tr '\0' ' ' >"$WORK/big.json"
http POST "$A/forecast" --data-binary @"$WORK/big.json"
expect "413 body over the limit (Content-Length)" 413 'd["error"]["code"] == "body_too_large"'
http POST "$A/forecast" -H "Transfer-Encoding: chunked" --data-binary @"$WORK/big.json"
expect "413 body over the limit (chunked)" 413 'd["error"]["code"] == "body_too_large"'

"$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
n = 500
json.dump({"tokens": [[1, 2]] * n, "stamps": [[0, 9, 0, 3, 6]] * n, "max_new_tokens": 20,
           "future_stamps": [[5, 9, 0, 3, 6]] * 20}, open(f"{w}/too_long.json", "w"))
EOF
http POST "$A/generate" --data-binary @"$WORK/too_long.json"
expect "422 beyond max_context" 422 'd["error"]["code"] == "context_overflow" and "max_context 512" in d["error"]["message"]'
http POST "$A/generate" -d '{"max_new_tokens": 1, "future_stamps": [[0, 9, 0, 3, 6]]}'
expect "422 nothing to generate from" 422 'd["error"]["code"] == "no_context"'

# 409 and 503: fill the scheduler's only place (max-batch-rows 1) with a long forecast, queue
# a /generate on a session (the queue of one is then full), then hit that session and the
# queue again.
http POST "$A/sessions"
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
# the drain's forecast (a few seconds): the checks below run while it holds the worker, on a
# fast machine too (the one-second forecast could end before the GET under load)
curl -sS -m 60 -o "$WORK/long.out" -w '%{http_code}' -X POST "$A/forecast" \
    --data-binary @"$WORK/drain_forecast.json" >"$WORK/long.status" 2>&1 &
LONG=$!
BG_PIDS+=("$LONG")
wait_metric "$A" kronosd_requests_running 1 || fail "the long forecast started"
curl -sS -m 60 -o "$WORK/queued.out" -w '%{http_code}' -X POST "$A/generate" \
    -d "{\"session\": \"$SID\", \"tokens\": [[1, 2], [3, 4]], \"stamps\": [[0, 9, 0, 3, 6], [5, 9, 0, 3, 6]]}" \
    >"$WORK/queued.status" 2>&1 &
QUEUED=$!
BG_PIDS+=("$QUEUED")
wait_metric "$A" kronosd_queue_depth 1 || fail "the /generate was queued"
# back to back while the worker is held; checked afterwards
http POST "$A/forecast" --data-binary @"$WORK/golden_forecast.json"
cp "$BODY" "$WORK/full.out"; cp "$HEADERS" "$WORK/full.headers"; FULL=$STATUS
http POST "$A/generate" -d "{\"session\": \"$SID\", \"tokens\": [[1, 2]], \"stamps\": [[0, 9, 0, 3, 6]]}"
cp "$BODY" "$WORK/busy_gen.out"; BUSY_GEN=$STATUS
http DELETE "$A/sessions/$SID"
cp "$BODY" "$WORK/busy_del.out"; BUSY_DEL=$STATUS
http GET "$A/sessions/$SID"
cp "$BODY" "$WORK/busy_get.out"; BUSY_GET=$STATUS
STATUS=$FULL; cp "$WORK/full.out" "$BODY"; cp "$WORK/full.headers" "$HEADERS"
expect "503 queue full" 503 'd["error"]["code"] == "overloaded"'
grep -qi '^Retry-After: ' "$HEADERS" && pass "503 carries Retry-After" || fail "503 carries Retry-After"
STATUS=$BUSY_GEN; cp "$WORK/busy_gen.out" "$BODY"
expect "409 session busy (/generate)" 409 'd["error"]["code"] == "session_busy"'
STATUS=$BUSY_DEL; cp "$WORK/busy_del.out" "$BODY"
expect "409 session busy (DELETE)" 409 'd["error"]["code"] == "session_busy"'
STATUS=$BUSY_GET; cp "$WORK/busy_get.out" "$BODY"
expect "GET a busy session says busy" 200 'd["busy"] is True'
http GET "$A/health"
expect "/health answers while the worker is busy" 200
wait "$LONG" "$QUEUED"
[ "$(cat "$WORK/long.status")" = 200 ] && pass "the long forecast completed" || fail "the long forecast completed" "$(cat "$WORK/long.status")"
[ "$(cat "$WORK/queued.status")" = 200 ] && jq_ok 'd["length"] == 2' "$WORK/queued.out" \
    && pass "the queued /generate completed" || fail "the queued /generate completed" "$(cat "$WORK/queued.status")"

http GET "$A/metrics"
if [ "$STATUS" = 200 ] && grep -q '^kronosd_requests_total{endpoint="forecast",status="503"} 1$' "$BODY" &&
    grep -q '^kronosd_request_duration_seconds_bucket{endpoint="forecast",le="+Inf"}' "$BODY" &&
    grep -q '^kronosd_generated_tokens_total [1-9]' "$BODY" && grep -q '^kronosd_pool_bytes_total [1-9]' "$BODY" &&
    grep -q '^kronosd_sessions 1$' "$BODY" &&
    grep -Eq '^kronosd_kernels_info[{]simd="(amx|avx512|avx2|generic)"[}] 1$' "$BODY"; then
    pass "GET /metrics"
else
    fail "GET /metrics" "$(grep -v '^#' "$BODY" | grep -v bucket | head -30)"
fi
grep -q 'POST /forecast 200 .*ms id=' "$WORK/A.log" && pass "access log: method, path, status, ms, id" \
    || fail "access log: method, path, status, ms, id"

# ---- daemon B: API key, expiry, sd_notify, SIGTERM during a request ----------------------

echo "s3cret-key" >"$WORK/key"
"$PY" - "$WORK/notify.sock" "$WORK/notify.log" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[2], "a") as log:
    while True:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        log.write(msg + "\n")
        log.flush()
        if "STOPPING=1" in msg:
            break
EOF
BG_PIDS+=("$!")
for i in $(seq 1 100); do [ -S "$WORK/notify.sock" ] && break; sleep 0.05; done
DAEMON_ENV=("NOTIFY_SOCKET=$WORK/notify.sock")
start_daemon B --workers 1 --session-ttl 3 --api-key-file "$WORK/key" --shutdown-timeout 30
DAEMON_ENV=()
B=$URL_B
AUTH=(-H "Authorization: Bearer s3cret-key")
for i in $(seq 1 100); do grep -q READY=1 "$WORK/notify.log" 2>/dev/null && break; sleep 0.05; done
grep -q READY=1 "$WORK/notify.log" 2>/dev/null && pass "sd_notify READY=1" || fail "sd_notify READY=1"

http GET "$B/health"
expect "/health needs no key" 200
http GET "$B/model"
expect "401 without a key" 401 'd["error"]["code"] == "unauthorized"'
grep -qi '^WWW-Authenticate: Bearer' "$HEADERS" && pass "401 carries WWW-Authenticate" || fail "401 carries WWW-Authenticate"
http POST "$B/forecast" -H "Authorization: Bearer wrong" --data-binary @"$WORK/golden_forecast.json"
expect "401 with a wrong key" 401
http GET "$B/model" "${AUTH[@]}"
expect "200 with the key" 200

http POST "$B/sessions" "${AUTH[@]}"
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http GET "$B/sessions/$SID" "${AUTH[@]}"
expect "a new session exists" 200
# past the TTL (3 s), the next sweep (every second) expires it
wait_metric "$B" kronosd_session_expirations_total 1 "${AUTH[@]}"
http GET "$B/sessions/$SID" "${AUTH[@]}"
expect "an idle session expires after the TTL: 404 saying so" 404 '"expired" in d["error"]["message"]'
[ "$(metric "$B" kronosd_session_expirations_total "${AUTH[@]}")" = 1 ] \
    && pass "metrics count the expiry" || fail "metrics count the expiry"

curl -sS -m 60 -o "$WORK/term.out" -w '%{http_code}' -X POST "$B/forecast" "${AUTH[@]}" \
    --data-binary @"$WORK/long_forecast.json" >"$WORK/term.status" 2>&1 &
TERM_REQ=$!
BG_PIDS+=("$TERM_REQ")
wait_metric "$B" kronosd_requests_running 1 "${AUTH[@]}" || fail "the forecast before SIGTERM started"
kill -TERM "$PID_B"
wait "$TERM_REQ"
[ "$(cat "$WORK/term.status")" = 200 ] && jq_ok 'd["horizon"] == 300' "$WORK/term.out" \
    && pass "SIGTERM: the running request completes" || fail "SIGTERM: the running request completes" "$(cat "$WORK/term.status")"
wait "$PID_B"
RC=$?
[ "$RC" -eq 0 ] && pass "SIGTERM: exit status 0" || fail "SIGTERM: exit status 0" "got $RC"
grep -q STOPPING=1 "$WORK/notify.log" && pass "sd_notify STOPPING=1" || fail "sd_notify STOPPING=1"
grep -q "kronosd: stopped" "$WORK/B.log" && pass "SIGTERM: clean stop logged" || fail "SIGTERM: clean stop logged"

# ---- daemon C: a config file, a tiny pool, eviction -------------------------------------

# 10 blocks of 16 positions: a 64-token session takes 4
cat >"$WORK/c.conf" <<'EOF'
# a comment
pool-bytes = 245760
max-sessions = 100
workers = 2   # overridden by the flag
EOF
# session-min-idle 0: the pool's evictions may take any idle session (with the default 60 s,
# none used within a minute is ever evicted: tests/e2e/room.sh)
start_daemon C --config "$WORK/c.conf" --workers 1 --session-min-idle 0
C=$URL_C
http GET "$C/model"
expect "config file read, flags override it" 200 'd["pool"]["blocks_total"] == 10 and d["sessions"]["max"] == 100 and d["threads"]["workers"] == 1'

"$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
json.dump({"tokens": [[i % 1024, (7 * i) % 1024] for i in range(64)],
           "stamps": [[i % 60, 9, 0, 3, 6] for i in range(64)]}, open(f"{w}/fill.json", "w"))
json.dump({"tokens": [[1, 2]] * 200, "stamps": [[0, 9, 0, 3, 6]] * 200}, open(f"{w}/huge.json", "w"))
EOF
declare -A S
for name in x y z; do
    http POST "$C/sessions"
    S[$name]=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["session"]=sys.argv[3]; json.dump(d,open(sys.argv[2],"w"))' \
        "$WORK/fill.json" "$WORK/fill_$name.json" "${S[$name]}"
    http POST "$C/generate" --data-binary @"$WORK/fill_$name.json"
    expect "fill session $name (64 tokens)" 200 'd["length"] == 64'
done
http GET "$C/sessions/${S[x]}"
expect "the pool ran dry: the least recently used idle session was evicted (404 saying so)" 404 '"evicted" in d["error"]["message"]'
http GET "$C/sessions/${S[y]}"
expect "a more recently used session survives" 200 'd["length"] == 64'
[ "$(metric "$C" kronosd_session_evictions_total)" = 1 ] && pass "metrics count the eviction" || fail "metrics count the eviction"
http POST "$C/generate" --data-binary @"$WORK/huge.json"
expect "422 when even an empty pool is too small" 422 'd["error"]["code"] == "pool_too_small"'
http POST "$C/forecast" --data-binary @"$WORK/golden_forecast.json"
expect "/forecast takes its caches from the pool, evicting idle sessions" 200 'd["horizon"] == 16'
kill -TERM "$PID_C"
wait "$PID_C"
RC=$?
[ "$RC" -eq 0 ] && pass "SIGTERM when idle: exit status 0" || fail "SIGTERM when idle: exit status 0" "got $RC"

# ---- malformed input: none may crash the daemon or get an unexpected status -------------

"$PY" - "$A" "$WORK" <<'EOF' >"$WORK/fuzz.out" 2>&1
import json, os, random, sys, http.client, urllib.parse
base, work = sys.argv[1], sys.argv[2]
host, port = urllib.parse.urlparse(base).hostname, urllib.parse.urlparse(base).port
rng = random.Random(int(os.environ.get("FUZZ_SEED", "4")))
bodies = {
    "/forecast": json.load(open(f"{work}/golden_forecast.json")),
    "/generate": json.load(open(f"{work}/gen_one.json")),
    "/tokenize": json.load(open(f"{work}/tokenize.json")),
    "/detokenize": json.load(open(f"{work}/detok_req.json")),
}
# keep the valid ones cheap
bodies["/forecast"]["horizon"] = 2
del bodies["/forecast"]["future_timestamps"]
bodies["/generate"]["max_new_tokens"] = 1
bodies["/generate"]["future_timestamps"] = bodies["/generate"]["future_timestamps"][:1]

def junk(depth=0):
    kinds = [None, True, False, 0, -1, 2**63 - 1, -2**63, 1.5, -1e308, 1e-320, "", "x" * 300,
             "2024-02-30T00:00:00", "\u0001", "NaN", [], {}, [[1, 2]], [1e308] * 3]
    v = rng.choice(kinds)
    if depth < 2 and rng.random() < 0.2:
        v = [junk(depth + 1) for _ in range(rng.randint(0, 3))]
    return v

def mutate(node):
    if isinstance(node, dict) and node:
        k = rng.choice(list(node))
        r = rng.random()
        if r < 0.3: del node[k]
        elif r < 0.6: node[k] = junk()
        else: mutate(node[k])
    elif isinstance(node, list) and node:
        i = rng.randrange(len(node))
        r = rng.random()
        if r < 0.2: del node[i]
        elif r < 0.5: node[i] = junk()
        else: mutate(node[i])

allowed = {200, 201, 400, 404, 405, 409, 413, 422, 503}
N, bad = int(os.environ.get("FUZZ_N", "400")), 0
for n in range(N):
    path = rng.choice(list(bodies))
    body = json.loads(json.dumps(bodies[path]))
    for _ in range(rng.randint(1, 3)):
        mutate(body)
    raw = json.dumps(body).encode()
    r = rng.random()
    if r < 0.1: raw = raw[: rng.randrange(len(raw))]
    elif r < 0.15: raw = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    method = "POST" if rng.random() < 0.95 else rng.choice(["GET", "PUT", "DELETE", "PATCH"])
    c = http.client.HTTPConnection(host, port, timeout=30)
    try:
        c.request(method, path, body=raw, headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        data = resp.read()
        if resp.status not in allowed or (resp.status >= 400 and b'"error"' not in data):
            bad += 1
            print("unexpected", resp.status, path, raw[:150], data[:200])
    except Exception as e:
        bad += 1
        print("failed", path, repr(e), raw[:150])
    finally:
        c.close()
print(f"fuzz: {N - bad} of {N} as expected")
sys.exit(1 if bad else 0)
EOF
RC=$?
[ $RC -eq 0 ] && pass "malformed requests: JSON errors with allowed statuses" \
    || fail "malformed requests: JSON errors with allowed statuses" "$(head -5 "$WORK/fuzz.out")"
http GET "$A/health"
expect "the daemon survived the malformed requests" 200

kill -TERM "$PID_A"
wait "$PID_A"
RC=$?
[ "$RC" -eq 0 ] && pass "daemon A stops with status 0" || fail "daemon A stops with status 0" "got $RC"

summary
