#!/usr/bin/env bash
# edge.sh KRONOSD SRCDIR — the daemon's edge against hostile or careless clients, end to end.
#
# Ambiguous framing (repeated Content-Length, Content-Length with Transfer-Encoding, codings
# other than chunked) gets a JSON error and a closed connection; malformed request lines an
# answer or a close within a second; slow senders are cut at read-timeout however they
# trickle; a 900-connection slowloris leaves /health answering within a second; HEAD works
# wherever GET does; SIGHUP reloads and never kills; a drain keeps answering /health 503;
# config quoting, comments and flag precedence; bind errors name the address and port.
# Everything listens on 127.0.0.1 and is bounded in time (about 25 s in all).
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
SLOW="$SRC/tests/e2e/slowclients.py"

hex() { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }
# raw NAME PORT REQUEST PY-EXPR: sends REQUEST (printf escapes) on a fresh connection; the
# result {seconds, closed, reply} must satisfy EXPR (as `d`).
raw() {
    local name=$1 port=$2 req expr=$4
    req=$(printf "$3" | od -An -tx1 -v | tr -d ' \n')
    "$PY" "$SLOW" raw "$port" "$req" 3 >"$WORK/raw.json"
    jq_ok "$expr" "$WORK/raw.json" && pass "$name" || fail "$name" "$(head -c 400 "$WORK/raw.json")"
}
port_of() { echo "${1##*:}"; }

# ---- daemon E: default limits and timeouts -------------------------------------------------

cat >"$WORK/e.conf" <<'EOF2'
max-candles = 100   # a comment after whitespace
node-id = "edge-1"
EOF2
start_daemon E --config "$WORK/e.conf"
E=$URL_E
EP=$(port_of "$E")

raw "repeated Content-Length: 400 JSON, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 61\r\n\r\n{}   ' \
    'd["closed"] and d["seconds"] < 1 and " 400 " in d["reply"] and "bad_framing" in d["reply"]'
raw "Content-Length with Transfer-Encoding: 400 JSON, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n' \
    'd["closed"] and " 400 " in d["reply"] and "bad_framing" in d["reply"]'
raw "Transfer-Encoding: gzip: 501 JSON, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n' \
    'd["closed"] and d["seconds"] < 1 and " 501 " in d["reply"] and "unsupported_transfer_coding" in d["reply"]'
raw "Content-Length that is not a number: 400, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5x\r\n\r\n{}   ' \
    'd["closed"] and d["seconds"] < 1 and " 400 " in d["reply"]'
# whitespace between a field name and its colon (RFC 9112 5.1): 400, closed, and what
# follows is never answered as a request of its own
for sep in ' ' '\t'; do
    raw "Content-Length${sep}: 56: 400 bad_framing, closed, nothing smuggled" "$EP" \
        "GET /health HTTP/1.1\\r\\nHost: x\\r\\nContent-Length${sep}: 56\\r\\n\\r\\nGET /model HTTP/1.1\\r\\nHost: x\\r\\nX-Request-Id: SMUGGLED\\r\\n\\r\\n" \
        'd["closed"] and " 400 " in d["reply"] and "bad_framing" in d["reply"] and d["reply"].count("HTTP/1.1 ") == 1 and "SMUGGLED" not in d["reply"]'
done
# obs-fold (RFC 9112 5.2): a line that starts with whitespace continues a field; refused,
# whatever the folded text (libmicrohttpd would glue "56" to the name)
for fold in ' 56' '\t56' ' x y' '   chunked'; do
    raw "obs-fold \"Content-Length: 0\\r\\n${fold}\": 400 bad_framing, closed, nothing smuggled" "$EP" \
        "GET /health HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n${fold}\\r\\n\\r\\nGET /model HTTP/1.1\\r\\nHost: x\\r\\nX-Request-Id: SMUGGLED\\r\\n\\r\\n" \
        'd["closed"] and " 400 " in d["reply"] and "obs-fold" in d["reply"] and d["reply"].count("HTTP/1.1 ") == 1 and "SMUGGLED" not in d["reply"]'
done
raw "obs-fold in Transfer-Encoding: 400 bad_framing, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n' \
    'd["closed"] and " 400 " in d["reply"] and "bad_framing" in d["reply"]'
raw "obs-fold in another field: 400 bad_framing" "$EP" \
    'GET /health HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\tmore\r\n\r\n' \
    'd["closed"] and " 400 " in d["reply"] and "bad_framing" in d["reply"]'
raw "spaces and tabs around values are fine" "$EP" \
    'GET /health HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Sp:    \r\nX-T:\t\t v v \t\r\nX-C: a:b\r\nConnection: close\r\n\r\n' \
    '" 200 " in d["reply"]'
raw "Transfer-Encoding : chunked: 400 bad_framing, closed" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n' \
    'd["closed"] and " 400 " in d["reply"] and "bad_framing" in d["reply"]'
raw "a garbage request line: closed within a second" "$EP" 'garbage\r\n\r\n' \
    'd["closed"] and d["seconds"] < 1'
raw "a request line with extra words: 400 within a second" "$EP" 'GET / HTTP/1.1 extra\r\n\r\n' \
    'd["closed"] and d["seconds"] < 1 and " 400 " in d["reply"]'
raw "a chunked body still works" "$EP" \
    'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n' \
    '" 400 " in d["reply"] and "candles: missing" in d["reply"]'

http HEAD "$E/health" -I
expect "HEAD /health" 200
http HEAD "$E/model" -I
[ "$STATUS" = 200 ] && ! grep -q '{' "$BODY" && pass "HEAD /model: 200, no body" || fail "HEAD /model: 200, no body" "$STATUS"
http POST "$E/health"
[ "$STATUS" = 405 ] && grep -qi "^Allow: GET, HEAD" "$HEADERS" && pass "405 lists HEAD with GET" \
    || fail "405 lists HEAD with GET" "$STATUS $(grep -i allow "$HEADERS")"

# SIGHUP: the file changed, the process stays, the change applies and is logged
sed -i 's/max-candles = 100/max-candles = 200/' "$WORK/e.conf"
kill -HUP "$PID_E"
wait_log "$WORK/E.log" "reload: max-candles"
kill -0 "$PID_E" 2>/dev/null && pass "SIGHUP: still running" || fail "SIGHUP: still running"
grep -q "reload: max-candles: 100 -> 200" "$WORK/E.log" && pass "SIGHUP: the change is logged" \
    || fail "SIGHUP: the change is logged" "$(grep reload "$WORK/E.log")"
http GET "$E/model"
expect "SIGHUP: the new limit applies" 200 'd["limits"]["max_candles"] == 200'
echo "no-such-key = 1" >>"$WORK/e.conf"
kill -HUP "$PID_E"
wait_log "$WORK/E.log" "reload: .*unknown key"
kill -0 "$PID_E" 2>/dev/null && grep -q "reload: .*unknown key 'no-such-key'.*nothing changed" "$WORK/E.log" \
    && pass "SIGHUP with a broken config file: logged, nothing changed, still running" \
    || fail "SIGHUP with a broken config file: logged, nothing changed, still running" "$(grep reload "$WORK/E.log")"
sed -i '/no-such-key/d' "$WORK/e.conf"

# ---- inputs: float32 range, instants, year 9999, the same rules in every route -----------------

C3='"open": [1, 1, 1], "high": [1, 1, 1], "low": [1, 1, 1], "close": [1, 1, 1]'
for route in forecast tokenize; do
    extra=', "horizon": 2'
    [ "$route" = tokenize ] && extra=''
    http POST "$E/$route" -d '{"candles": {"timestamps": [1, 2, 3], "open": [1, 1e39, 1], "high": [1, 1, 1], "low": [1, 1, 1], "close": [1, 1, 1]}'"$extra"'}'
    expect "/$route: open = 1e39 refused, naming the field" 400 '"candles.open[1]" in d["error"]["message"] and "float32" in d["error"]["message"]'
    http POST "$E/$route" -d '{"candles": {"timestamps": [1, 2, 3], "open": [3e38, -3e38, 3e38], "high": [1, 1, 1], "low": [1, 1, 1], "close": [1, 1, 1]}'"$extra"'}'
    expect "/$route: float32 statistics overflowing refused, naming the column" 422 '"candles.open" in d["error"]["message"]'
done
http POST "$E/detokenize" -d '{"tokens": [[1, 2]], "mean": [1, 1, 1, 1, 1e39, 1], "std": [1, 1, 1, 1, 1, 1]}'
expect "/detokenize: mean = 1e39 refused, naming the field" 400 '"mean[4]" in d["error"]["message"]'
http POST "$E/generate" -d '{"tokens": [[1, 2]], "timestamps": [1], "max_new_tokens": 1, "future_timestamps": [2], "temperature": 1e39}'
expect "/generate: temperature = 1e39 refused, naming the field" 400 '"temperature" in d["error"]["message"]'
http POST "$E/forecast" -d '{"candles": {"timestamps": ["2024-01-01T09:00+05:00", "2024-01-01T10:00+05:00", "2024-01-01T09:30Z"], '"$C3"'}, "horizon": 2}'
expect "/forecast: 10:00+05:00 then 09:30Z is increasing" 200 'd["timestamps"] == ["2024-01-01T14:00:00Z", "2024-01-01T18:30:00Z"]'
http POST "$E/forecast" -d '{"candles": {"timestamps": ["2024-01-01T10:00Z", "2024-01-01T10:30+05:00", "2024-01-01T11:00Z"], '"$C3"'}, "horizon": 1}'
expect "/forecast: 10:00Z then 10:30+05:00 (05:30Z) is refused" 400 '"candles.timestamps[1]" in d["error"]["message"]'
http POST "$E/generate" -d '{"tokens": [[1, 2], [3, 4]], "timestamps": ["2024-01-01T10:00:00", "2024-01-01T09:00:00"]}'
expect "/generate: decreasing timestamps refused, as in /forecast" 400 '"timestamps[1]" in d["error"]["message"]'
http POST "$E/generate" -d '{"tokens": [[1, 2], [3, 4]], "timestamps": ["2024-01-01T10:00:00+05:00", "2024-01-01T09:00:00Z"], "max_new_tokens": 1, "future_timestamps": ["2024-01-01T09:00:00Z"]}'
expect "/generate: a future timestamp not after the context refused" 400 '"future_timestamps[0]" in d["error"]["message"]'
http POST "$E/generate" -d '{"tokens": [[1, 2], [3, 4]], "timestamps": ["2024-01-01T10:00:00+05:00", "2024-01-01T09:00:00Z"], "max_new_tokens": 1, "future_timestamps": ["2024-01-01T09:01:00Z"]}'
expect "/generate: offsets compared as instants" 200
http POST "$E/forecast" -d '{"candles": {"timestamps": ["9999-12-31T20:00:00", "9999-12-31T21:00:00", "9999-12-31T22:00:00"], '"$C3"'}, "horizon": 3}'
expect "/forecast: a horizon past year 9999 refused" 400 '"year 9999" in d["error"]["message"] and "at most 1 here" in d["error"]["message"]'

# ---- sessions by path, ids carrying the node's name ----------------------------------------

http POST "$E/sessions"
expect "session ids carry node-id (quoted in the config file)" 201 'd["session"].startswith("edge-1-") and len(d["session"]) == len("edge-1-") + 32'
SID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http POST "$E/sessions/$SID/generate" -d '{"tokens": [[1, 2], [3, 4]], "stamps": [[0, 9, 0, 3, 6], [5, 9, 0, 3, 6]], "max_new_tokens": 1, "future_stamps": [[10, 9, 0, 3, 6]]}'
expect "POST /sessions/{id}/generate" 200 'd["session"] == "'"$SID"'" and d["length"] == 3'
http POST "$E/generate" -d '{"session": "'"$SID"'", "tokens": [[5, 6]], "stamps": [[15, 9, 0, 3, 6]]}'
expect "the body form still works on the same session" 200 'd["length"] == 4'
http POST "$E/sessions/$SID/generate" -d '{"session": "edge-1-00000000000000000000000000000000", "tokens": [[5, 6]], "stamps": [[15, 9, 0, 3, 6]]}'
expect "a body naming another session than the path: 400" 400
http POST "$E/sessions/other-node-0123456789abcdef0123456789abcdef/generate" -d '{"tokens": [[5, 6]], "stamps": [[15, 9, 0, 3, 6]]}'
expect "another node's session: 404 naming its node" 404 '"belongs to node other-node" in d["error"]["message"]'

# bind errors name the address and the port
"$KRONOSD" serve --model "$MODEL" --port "$EP" >"$WORK/bind.log" 2>&1
RC=$?
[ "$RC" -ne 0 ] && grep -q "cannot listen on 127.0.0.1:$EP: bind: Address already in use" "$WORK/bind.log" \
    && ! grep -q "port 0" "$WORK/bind.log" && pass "a busy port: the error names address and port" \
    || fail "a busy port: the error names address and port" "$(cat "$WORK/bind.log")"

# ---- daemon F: a short read-timeout ------------------------------------------------------

start_daemon F --read-timeout 2
FP=$(port_of "$URL_F")
"$PY" "$SLOW" trickle "$FP" "$(hex $'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ')" 6 >"$WORK/trickle.json"
jq_ok 'd["closed"] and 1.8 <= d["seconds"] < 3' "$WORK/trickle.json" \
    && pass "a header trickling a byte every 0.5 s is cut at read-timeout" \
    || fail "a header trickling a byte every 0.5 s is cut at read-timeout" "$(cat "$WORK/trickle.json")"
"$PY" "$SLOW" trickle "$FP" "$(hex $'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n')" 6 >"$WORK/trickle.json"
jq_ok 'd["closed"] and d["seconds"] < 3' "$WORK/trickle.json" \
    && pass "a body trickling a byte every 0.5 s is cut at read-timeout" \
    || fail "a body trickling a byte every 0.5 s is cut at read-timeout" "$(cat "$WORK/trickle.json")"
"$PY" "$SLOW" raw "$FP" "$(hex $'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc')" 5 >"$WORK/raw.json"
jq_ok 'd["closed"] and d["seconds"] < 1.5' "$WORK/raw.json" \
    && pass "chunk size ffffffffffffffff, then a pause: closed within a second" \
    || fail "chunk size ffffffffffffffff, then a pause: closed within a second" "$(cat "$WORK/raw.json")"
"$PY" "$SLOW" raw "$FP" "$(hex $'\x16\x03\x01\x00\xa5\x01\x00')" 5 >"$WORK/raw.json"
jq_ok 'd["closed"] and d["seconds"] < 1.5' "$WORK/raw.json" \
    && pass "a TLS handshake on the plain port (a line that never ends): closed within a second" \
    || fail "a TLS handshake on the plain port (a line that never ends): closed within a second" "$(cat "$WORK/raw.json")"
"$PY" "$SLOW" raw "$FP" "" 5 >"$WORK/raw.json"
jq_ok 'd["closed"] and d["seconds"] < 1.5' "$WORK/raw.json" \
    && pass "a connection that sends nothing: closed within a second" \
    || fail "a connection that sends nothing: closed within a second" "$(cat "$WORK/raw.json")"
# 900 slow connections from 30 loopback addresses, a header byte every 5 s each, for 5 s
# (past read-timeout, so they are cut and come back); /health asked every 0.1 s.
"$PY" "$SLOW" slowloris "$FP" 900 30 5 >"$WORK/slowloris.json"
echo "     slowloris, 900 connections from 30 addresses: $(cat "$WORK/slowloris.json")"
jq_ok 'd["health_failed"] == 0 and d["health_max_s"] < 1 and d["closed_by_server"] >= 800' \
    "$WORK/slowloris.json" && pass "slowloris (900 from 30 addresses): /health within 1 s" \
    || fail "slowloris (900 from 30 addresses): /health within 1 s"
# the same from one address: max-connections-per-ip turns most away at once
"$PY" "$SLOW" slowloris "$FP" 900 1 4 >"$WORK/slowloris1.json"
echo "     slowloris, 900 connections from one address: $(cat "$WORK/slowloris1.json")"
jq_ok 'd["health_failed"] == 0 and d["health_max_s"] < 1 and d["closed_by_server"] >= 800' \
    "$WORK/slowloris1.json" && pass "slowloris (900 from one address): /health within 1 s" \
    || fail "slowloris (900 from one address): /health within 1 s"

http GET "$URL_F/health"
expect "after all that, /health" 200

# ---- daemon G: a drain keeps listening -----------------------------------------------------

start_daemon G --workers 1 --shutdown-timeout 60
G=$URL_G
curl -sS -m 90 -o "$WORK/drain.out" -w '%{http_code}' -X POST "$G/forecast" \
    --data-binary @"$WORK/drain_forecast.json" >"$WORK/drain.status" 2>&1 &
DRAIN_REQ=$!
BG_PIDS+=("$DRAIN_REQ")
wait_metric "$G" kronosd_requests_running 1 || fail "the forecast before SIGTERM started"
kill -TERM "$PID_G"
for i in $(seq 1 100); do # until the signal is handled (5 s at most)
    http GET "$G/health"
    [ "$STATUS" = 503 ] && break
    sleep 0.05
done
expect "draining: /health answers 503 draining" 503 'd == {"status": "draining"}'
has_header Retry-After && pass "draining: 503 carries Retry-After" || fail "draining: 503 carries Retry-After"
http POST "$G/forecast" --data-binary @"$WORK/tokenize.json"
expect "draining: a new model request gets 503 draining" 503 'd["error"]["code"] == "draining"'
wait "$DRAIN_REQ"
[ "$(cat "$WORK/drain.status")" = 200 ] && pass "draining: the request in flight completes" \
    || fail "draining: the request in flight completes" "$(cat "$WORK/drain.status")"
wait "$PID_G"
RC=$?
[ "$RC" -eq 0 ] && pass "drained: exit 0" || fail "drained: exit 0" "got $RC"

# ---- config: comments, quotes, flags over the file -------------------------------------------

printf 'model = %s/no#such#model\n' "$WORK" >"$WORK/hash.conf"
"$KRONOSD" serve --config "$WORK/hash.conf" --port 0 >"$WORK/hash.log" 2>&1
grep -q "no#such#model" "$WORK/hash.log" && pass "config: # inside a value is kept" \
    || fail "config: # inside a value is kept" "$(cat "$WORK/hash.log")"
printf 'model = /nonexistent\nhost = "127.0.0.1"  # quoted\n' >"$WORK/flags.conf"
"$KRONOSD" serve --config "$WORK/flags.conf" --tokenizer "$MODEL/tokenizer" \
    --predictor "$MODEL/predictor" --port 0 >"$WORK/H.log" 2>&1 &
H_PID=$!
BG_PIDS+=("$H_PID")
for i in $(seq 1 100); do grep -q "kronosd: ready" "$WORK/H.log" && break; sleep 0.05; done
grep -q "kronosd: ready" "$WORK/H.log" && pass "config: --tokenizer/--predictor override the file's model" \
    || fail "config: --tokenizer/--predictor override the file's model" "$(cat "$WORK/H.log")"
kill -TERM "$H_PID"
wait "$H_PID"

summary
