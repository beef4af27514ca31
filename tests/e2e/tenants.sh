#!/usr/bin/env bash
# tenants.sh KRONOSD SRCDIR — each API key alone: named keys, sessions, quotas, metrics, the
# admin key, SIGHUP, the key file's refusals.
#
# Two keys, alice and bob, with max-sessions-per-key 1. Each of alice's sessions (a token
# one, then a candle one) is 404 to bob on every session route, with the body an unknown id
# gets (the id aside), and stays alice's; a deleted session's fate is told to alice alone.
# alice's second session is refused while bob still creates one. /metrics has a series per
# key name. The Bearer scheme in any case; the admin key is no API key. SIGHUP with the
# file edited adds carol and removes bob (401 at once); a file with a key given twice is
# refused, the keys in use kept; carol's new key keeps her session. A restart with state-dir keeps each
# session its owner's, named or the single bare key's. At start, a 5,000-byte key and a
# directory as the key file are refused, saying which.
set -u
[ $# -eq 2 ] || { echo "usage: $0 KRONOSD SRCDIR" >&2; exit 2; }
KRONOSD=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/e2e/lib.sh" # shellcheck source=lib.sh

printf '# the tenants\nalice:alice-key-1\n\nbob : bob-key-2\n' >"$WORK/keys"
printf 'ops:admin-key-9\n' >"$WORK/admin"
"$PY" - "$GOLDEN" "$WORK" <<'EOF'
import datetime, json, sys
inp = json.load(open(sys.argv[1]))["cases"][0]["input"]
w = sys.argv[2]
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
dump("forecast", {"candles": inp, "horizon": 2, "top_k": 1})
dump("candle_session", {"candles": {k: v[:-1] for k, v in inp.items()}})
dump("append", {"candles": {k: v[-1:] for k, v in inp.items()}})
dump("session_forecast", {"horizon": 2, "top_k": 1})
dump("tokens", {"tokens": [[1, 2]], "stamps": [[0, 9, 0, 3, 6]]})
EOF

start_daemon T --workers 1 --api-key-file "$WORK/keys" --admin-key-file "$WORK/admin" \
    --max-sessions-per-key 1
T=$URL_T
ALICE=(-H "Authorization: Bearer alice-key-1")
BOB=(-H "Authorization: Bearer bob-key-2")

# session_of: the "session" of the last body
session_of() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY"; }

# same_404 NAME ID METHOD PATH-WITH-ID [CURL ARGS...]: bob's call on alice's session ID is
# 404 with the body of the same call on an unknown id of this node, the ids aside
same_404() {
    local name=$1 id=$2 method=$3 path=$4
    shift 4
    local unknown="${id%-*}-00000000000000000000000000000000"
    http "$method" "$T${path//\{id\}/$unknown}" "${BOB[@]}" "$@"
    local unknown_status=$STATUS
    sed "s/$unknown/ID/g" "$BODY" >"$WORK/unknown.body"
    http "$method" "$T${path//\{id\}/$id}" "${BOB[@]}" "$@"
    sed "s/$id/ID/g" "$BODY" >"$WORK/other.body"
    if [ "$STATUS" = 404 ] && [ "$unknown_status" = 404 ] && cmp -s "$WORK/unknown.body" "$WORK/other.body" &&
        jq_ok 'd["error"]["code"] == "session_not_found"' "$WORK/other.body"; then
        pass "$name"
    else
        fail "$name" "status $STATUS ($unknown_status for an unknown id): $(head -c 300 "$WORK/other.body") / $(head -c 300 "$WORK/unknown.body")"
    fi
}

# ---- a token session ------------------------------------------------------------------------
http POST "$T/sessions" "${ALICE[@]}"
expect "alice creates a token session" 201
A1=$(session_of)
http POST "$T/sessions" "${ALICE[@]}"
expect "alice's second session: 429 session_limit (max-sessions-per-key 1)" 429 \
    'd["error"]["code"] == "session_limit" and "key alice" in d["error"]["message"]'
http POST "$T/sessions" "${BOB[@]}"
expect "bob still creates one" 201
B1=$(session_of)

same_404 "bob: GET alice's session is 404 as an unknown id" "$A1" GET "/sessions/{id}"
same_404 "bob: POST /sessions/{id}/generate on alice's is 404 as an unknown id" "$A1" POST \
    "/sessions/{id}/generate" --data-binary @"$WORK/tokens.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["session"]=sys.argv[2]; print(json.dumps(d))' \
    "$WORK/tokens.json" "$A1" >"$WORK/generate_a1.json"
sed "s/$A1/${A1%-*}-00000000000000000000000000000000/" "$WORK/generate_a1.json" >"$WORK/generate_unknown.json"
http POST "$T/generate" "${BOB[@]}" --data-binary @"$WORK/generate_unknown.json"
U_STATUS=$STATUS
sed "s/${A1%-*}-00000000000000000000000000000000/ID/g" "$BODY" >"$WORK/unknown.body"
http POST "$T/generate" "${BOB[@]}" --data-binary @"$WORK/generate_a1.json"
sed "s/$A1/ID/g" "$BODY" >"$WORK/other.body"
[ "$STATUS" = 404 ] && [ "$U_STATUS" = 404 ] && cmp -s "$WORK/unknown.body" "$WORK/other.body" \
    && pass "bob: POST /generate {\"session\": alice's} is 404 as an unknown id" \
    || fail "bob: POST /generate {\"session\": alice's} is 404 as an unknown id" "$STATUS: $(cat "$WORK/other.body")"
same_404 "bob: DELETE alice's session is 404 as an unknown id" "$A1" DELETE "/sessions/{id}"

http GET "$T/sessions/$A1" "${ALICE[@]}"
expect "alice's session is still there, hers" 200 'd["kind"] == "tokens"'
http POST "$T/sessions/$A1/generate" "${ALICE[@]}" --data-binary @"$WORK/tokens.json"
expect "alice generates on it" 200 'd["length"] == 1'
http GET "$T/sessions/$B1" "${BOB[@]}"
expect "bob reads his own" 200
http DELETE "$T/sessions/$A1" "${ALICE[@]}"
expect "alice deletes hers" 200
http GET "$T/sessions/$A1" "${ALICE[@]}"
expect "alice is told it was deleted" 404 '"was deleted" in d["error"]["message"]'
same_404 "bob is not told alice's session was deleted" "$A1" GET "/sessions/{id}"

# ---- a candle session ------------------------------------------------------------------------
http POST "$T/sessions" "${ALICE[@]}" --data-binary @"$WORK/candle_session.json"
expect "alice creates a candle session" 201 'd["kind"] == "candles"'
A2=$(session_of)
same_404 "bob: GET alice's candle session is 404 as an unknown id" "$A2" GET "/sessions/{id}"
same_404 "bob: POST /sessions/{id}/candles on alice's is 404 as an unknown id" "$A2" POST \
    "/sessions/{id}/candles" --data-binary @"$WORK/append.json"
same_404 "bob: POST /sessions/{id}/forecast on alice's is 404 as an unknown id" "$A2" POST \
    "/sessions/{id}/forecast" --data-binary @"$WORK/session_forecast.json"
same_404 "bob: DELETE alice's candle session is 404 as an unknown id" "$A2" DELETE "/sessions/{id}"
http POST "$T/sessions/$A2/candles" "${ALICE[@]}" --data-binary @"$WORK/append.json"
expect "alice appends to hers" 200 'd["appended"] == 1'
http POST "$T/sessions/$A2/forecast" "${ALICE[@]}" --data-binary @"$WORK/session_forecast.json"
expect "alice forecasts from hers" 200

# ---- metrics by key name -----------------------------------------------------------------
curl -sS -m 10 "$T/metrics" "${BOB[@]}" >"$WORK/metrics.txt"
val() { awk -v n="$1" '$1 == n { print $2; exit }' "$WORK/metrics.txt"; }
A_REQ=$(val 'kronosd_key_requests_total{key="alice"}')
B_REQ=$(val 'kronosd_key_requests_total{key="bob"}')
[ "${A_REQ:-0}" -ge 5 ] && [ "${B_REQ:-0}" -ge 5 ] \
    && [ "$(val 'kronosd_key_sessions{key="alice"}')" = 1 ] && [ "$(val 'kronosd_key_sessions{key="bob"}')" = 1 ] \
    && pass "/metrics: requests and sessions by key=\"alice\" and key=\"bob\"" \
    || fail "/metrics: requests and sessions by key=\"alice\" and key=\"bob\"" "$(grep 'key=' "$WORK/metrics.txt")"

# ---- the Bearer scheme in any case; the admin key ---------------------------------------------
http GET "$T/model" -H "Authorization: bearer alice-key-1"
expect "lower-case bearer is accepted" 200
http GET "$T/model" -H "Authorization: BEARER alice-key-1"
expect "upper-case BEARER is accepted" 200
http GET "$T/model" -H "Authorization: Bearer alice-key-"
expect "a prefix of a key is refused" 401
http POST "$T/forecast" -H "Authorization: Bearer admin-key-9" --data-binary @"$WORK/forecast.json"
expect "the admin key is no API key: 401 on /forecast" 401 'd["error"]["code"] == "unauthorized"'

# ---- SIGHUP: carol added, bob removed ----------------------------------------------------------
printf 'alice:alice-key-1\ncarol:carol-key-3\n' >"$WORK/keys"
kill -HUP "$PID_T"
for i in $(seq 1 100); do grep -q "reload: api-key-file" "$WORK/T.log" && break; sleep 0.05; done
grep -q "reload: api-key-file: 2 keys (added carol; removed bob)" "$WORK/T.log" \
    && pass "SIGHUP: the change of keys is logged" || fail "SIGHUP: the change of keys is logged" "$(grep reload "$WORK/T.log")"
http GET "$T/model" "${BOB[@]}"
expect "SIGHUP: the removed key gets 401" 401
http POST "$T/sessions" -H "Authorization: Bearer carol-key-3"
expect "SIGHUP: the added key creates a session" 201
C1=$(session_of)
http GET "$T/sessions/$A2" "${ALICE[@]}"
expect "SIGHUP: alice's session is still hers" 200
curl -sS -m 10 "$T/metrics" "${ALICE[@]}" >"$WORK/metrics.txt"
[ "$(val 'kronosd_key_sessions{key="carol"}')" = 1 ] && [ -z "$(val 'kronosd_key_sessions{key="bob"}')" ] \
    && [ -n "$(val 'kronosd_key_requests_total{key="bob"}')" ] \
    && pass "SIGHUP: /metrics has carol's sessions, not bob's; bob's requests stay counted" \
    || fail "SIGHUP: /metrics has carol's sessions, not bob's" "$(grep 'key=' "$WORK/metrics.txt")"
printf 'alice:alice-key-1\ncarol:alice-key-1\n' >"$WORK/keys"
kill -HUP "$PID_T"
for i in $(seq 1 100); do grep -q "keeping the current keys" "$WORK/T.log" && break; sleep 0.05; done
grep -q "line 2: the key of carol is alice's (line 1) already; keeping the current keys" "$WORK/T.log" \
    && pass "SIGHUP: a key given twice is refused, naming the line; the keys in use stay" \
    || fail "SIGHUP: a key given twice is refused, naming the line" "$(grep reload "$WORK/T.log")"
http GET "$T/model" -H "Authorization: Bearer carol-key-3"
expect "SIGHUP: after the refused file carol's key still works" 200
# a new key under the same name: the old one is refused, the name's sessions stay its own
printf 'alice:alice-key-1\ncarol:carol-key-4\n' >"$WORK/keys"
kill -HUP "$PID_T"
for i in $(seq 1 100); do grep -q "new key for carol" "$WORK/T.log" && break; sleep 0.05; done
grep -q "reload: api-key-file: 2 keys (new key for carol)" "$WORK/T.log" \
    && pass "SIGHUP: a rotated key is logged by name" || fail "SIGHUP: a rotated key is logged by name" "$(grep reload "$WORK/T.log")"
http GET "$T/model" -H "Authorization: Bearer carol-key-3"
expect "SIGHUP: carol's old key gets 401" 401
http GET "$T/sessions/$C1" -H "Authorization: Bearer carol-key-4"
expect "SIGHUP: carol's session is hers under her new key" 200
http POST "$T/sessions" -H "Authorization: Bearer carol-key-4"
expect "SIGHUP: and counts against her quota (max-sessions-per-key 1)" 429 \
    'd["error"]["code"] == "session_limit" and "key carol" in d["error"]["message"]'
kill -TERM "$PID_T"
wait "$PID_T" 2>/dev/null

# ---- a restart with state-dir: each session its owner's -----------------------------------------
printf 'alice:alice-key-1\nbob:bob-key-2\n' >"$WORK/keys"
printf 's3cret-key\n' >"$WORK/bare"
start_daemon J --workers 1 --api-key-file "$WORK/keys" --state-dir "$WORK/state"
http POST "$URL_J/sessions" "${ALICE[@]}" --data-binary @"$WORK/candle_session.json"
J1=$(session_of)
kill -KILL "$PID_J"
wait "$PID_J" 2>/dev/null
start_daemon J --workers 1 --api-key-file "$WORK/keys" --state-dir "$WORK/state"
http GET "$URL_J/sessions/$J1" "${ALICE[@]}"
expect "after a restart (kill -9) alice's session is hers" 200
http GET "$URL_J/sessions/$J1" "${BOB[@]}"
expect "after a restart bob still gets 404 for it" 404
kill -TERM "$PID_J"
wait "$PID_J" 2>/dev/null
# the single bare key: the owner the format always had, across restarts
start_daemon K --workers 1 --api-key-file "$WORK/bare" --state-dir "$WORK/state-bare"
http POST "$URL_K/sessions" -H "Authorization: Bearer s3cret-key"
K1=$(session_of)
kill -TERM "$PID_K"
wait "$PID_K" 2>/dev/null
start_daemon K --workers 1 --api-key-file "$WORK/bare" --state-dir "$WORK/state-bare"
http GET "$URL_K/sessions/$K1" -H "Authorization: Bearer s3cret-key"
expect "a bare key file: its session is its own after a restart" 200
kill -TERM "$PID_K"
wait "$PID_K" 2>/dev/null

# ---- refused at start --------------------------------------------------------------------------
# refused_at_start NAME WORD ARGS...: serve exits non-zero with WORD in its message
refused_at_start() {
    local name=$1 word=$2
    shift 2
    timeout 30 "$KRONOSD" serve --model "$MODEL" --port 0 "$@" >"$WORK/refused.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q -- "$word" "$WORK/refused.log"; then
        pass "$name"
    else
        fail "$name" "exit $rc: $(head -c 300 "$WORK/refused.log")"
    fi
}
"$PY" -c 'print("big:" + "k" * 4996)' >"$WORK/long"
refused_at_start "a 5,000-byte key is refused at start, not cut" \
    "api-key-file $WORK/long line 1: the key is 4996 bytes, longer than the 4096" --api-key-file "$WORK/long"
"$PY" -c 'print("k" * 5000)' >"$WORK/long-bare"
refused_at_start "a bare 5,000-byte key too" "line 1: the key is 5000 bytes" --api-key-file "$WORK/long-bare"
mkdir -p "$WORK/keydir"
refused_at_start "a directory as api-key-file: said to be a directory" \
    "api-key-file $WORK/keydir: is a directory" --api-key-file "$WORK/keydir"
refused_at_start "a directory as admin-key-file: said to be a directory" \
    "admin-key-file $WORK/keydir: is a directory" --admin-key-file "$WORK/keydir"
: >"$WORK/empty"
refused_at_start "an empty key file is refused" "api-key-file $WORK/empty: empty" --api-key-file "$WORK/empty"
printf 'alice:a1\nbob\n' >"$WORK/noname"
refused_at_start "a line without a name is refused with its number" "line 2: a key without a name" \
    --api-key-file "$WORK/noname"

summary
