#!/usr/bin/env bash
# durable.sh KRONOSD SRCDIR — sessions that survive the process (state-dir, the journal).
#
# Shows: four clients append candles one at a time to their sessions while the daemon is
# killed (-9): after the restart every acknowledged candle is in its session and none twice
# (the session's forecast equals a stateless /forecast of exactly those candles); forecasts
# and token sessions are the same bytes after SIGTERM and after kill -9; a journal whose tail
# was cut mid-record loses that record alone, logged; on a changed model a journal's sessions are refused
# with a message saying so; deleted and expired sessions leave the journal and the rewrite
# (under appends) shrinks it. About 20 s.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

STATE="$WORK/state"
# up NAME [ARGS]: the daemon with the journal in $STATE (sets U)
up() {
    local name=$1
    shift
    start_daemon "$name" --state-dir "$STATE" --workers 2 "$@"
    U=$(eval echo "\$URL_$name")
    PID=$(eval echo "\$PID_$name")
}
down9() { kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
downterm() { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }

strip_usage() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage",None); print(json.dumps(d,sort_keys=True))' "$1"
}
same() {
    if [ "$(strip_usage "$2")" == "$(strip_usage "$3")" ]; then pass "$1"; else
        fail "$1" "$(diff <(strip_usage "$2" | head -c 300) <(strip_usage "$3" | head -c 300))"
    fi
}

# bodies: 4 sessions' first candles, the candles they are appended, a forecast's options
"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'EOF'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, rows = rows[0], rows[1:]
def cand(r):
    d = {"timestamps": [x[0] for x in r]}
    for i, n in enumerate(hdr[1:], 1):
        d[n] = [float(x[i]) for x in r]
    return d
json.dump({"rows": rows, "hdr": hdr}, open(f"{sys.argv[2]}/rows.json", "w"))
for k in range(4):
    json.dump({"candles": cand(rows[k * 600:k * 600 + 120])}, open(f"{sys.argv[2]}/create{k}.json", "w"))
json.dump({"horizon": 6, "samples": 3, "seed": 11, "quantiles": [0.25, 0.75]},
          open(f"{sys.argv[2]}/fc.json", "w"))
EOF

up a
for k in 0 1 2 3; do
    http POST "$U/sessions" -d @"$WORK/create$k.json"
    SID[$k]=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
done
[ "$STATUS" = 201 ] && pass "4 candle sessions created with a journal" || fail "4 candle sessions created" "$STATUS"

# ---- kill -9 under appends from 4 clients -------------------------------------------------------
# each client appends its session's next candles one at a time and notes every one answered 200
"$PY" - "$U" "$WORK" "${SID[@]}" <<'EOF' >"$WORK/appenders.out" 2>&1 &
import http.client, json, sys, threading, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); w = sys.argv[2]; sids = sys.argv[3:]
data = json.load(open(f"{w}/rows.json")); rows, hdr = data["rows"], data["hdr"]
def client(k):
    acked = open(f"{w}/acked{k}", "w")
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    for i in range(120, 600):
        r = rows[k * 600 + i]
        body = {"candles": {"timestamps": [r[0]], **{n: [float(r[j])] for j, n in enumerate(hdr[1:], 1)}}}
        try:
            c.request("POST", f"/sessions/{sids[k]}/candles", body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
            resp = c.getresponse(); resp.read()
        except Exception:
            return
        if resp.status != 200:
            return
        acked.write(f"{i}\n"); acked.flush()
ts = [threading.Thread(target=client, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
EOF
APPENDERS=$!
for i in $(seq 1 600); do # until 9 candles are acknowledged (30 s at most): kill -9 mid-appends
    [ "$(cat "$WORK"/acked[0-3] 2>/dev/null | wc -l)" -gt 8 ] && break
    sleep 0.05
done
down9
wait "$APPENDERS"
up b
"$PY" - "$U" "$WORK" "${SID[@]}" <<'EOF' >"$WORK/check.out"
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); w = sys.argv[2]; sids = sys.argv[3:]
data = json.load(open(f"{w}/rows.json")); rows, hdr = data["rows"], data["hdr"]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
def call(method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())
bad, total = [], 0
for k, sid in enumerate(sids):
    acked = [int(x) for x in open(f"{w}/acked{k}").read().split()]
    total += len(acked)
    st, info = call("GET", f"/sessions/{sid}")
    n = info.get("length", -1) - 120
    # every acknowledged candle, and at most the one in flight when the process died
    if st != 200 or not (len(acked) <= n <= len(acked) + 1):
        bad.append(f"session {k}: {st}, {n} candles appended, {len(acked)} acknowledged"); continue
    fc = {"horizon": 6, "samples": 3, "seed": 11}
    st1, a = call("POST", f"/sessions/{sid}/forecast", fc)
    r = rows[k * 600:k * 600 + 120 + n]
    cand = {"timestamps": [x[0] for x in r], **{h: [float(x[j]) for x in r] for j, h in enumerate(hdr[1:], 1)}}
    st2, b = call("POST", "/forecast", {**fc, "candles": cand, "normalization": info["normalization"]})
    a.pop("usage", None); b.pop("usage", None)
    if st1 != 200 or st2 != 200 or a != b:
        bad.append(f"session {k}: its forecast ({st1}) differs from the stateless one ({st2}) on {n} appended candles")
    # the next candle: the restored session's series is rebuilt, and forecasts the same
    nxt = rows[k * 600 + 120 + n]
    st3, _ = call("POST", f"/sessions/{sid}/candles", {"candles": {"timestamps": [nxt[0]], **{h: [float(nxt[j])] for j, h in enumerate(hdr[1:], 1)}}})
    st4, a = call("POST", f"/sessions/{sid}/forecast", fc)
    r = rows[k * 600:k * 600 + 121 + n]
    cand = {"timestamps": [x[0] for x in r], **{h: [float(x[j]) for x in r] for j, h in enumerate(hdr[1:], 1)}}
    st5, b = call("POST", "/forecast", {**fc, "candles": cand, "normalization": info["normalization"]})
    a.pop("usage", None); b.pop("usage", None)
    if st3 != 200 or st4 != 200 or a != b:
        bad.append(f"session {k}: after an append on the rebuilt series ({st3}, {st4}) its forecast differs")
print(total, "; ".join(bad) if bad else "ok")
EOF
read -r ACKED RESULT <"$WORK/check.out"
echo "     $ACKED candles acknowledged by 4 clients before kill -9"
[ "$RESULT" = ok ] && [ "$ACKED" -gt 8 ] \
    && pass "kill -9 under appends: every acknowledged candle is in its session, none twice (and after the next append, on the rebuilt series)" \
    || fail "kill -9 under appends: every acknowledged candle is in its session, none twice" "$ACKED acked: $RESULT"

# ---- the same bytes after SIGTERM and after kill -9, token sessions too -------------------------
http POST "$U/sessions/${SID[0]}/forecast" -d @"$WORK/fc.json"
cp "$BODY" "$WORK/before.json"
http POST "$U/sessions" -d '{}'
TID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
GEN1='{"tokens": [[1, 2], [3, 4], [5, 6]], "stamps": [[0, 9, 0, 3, 6], [5, 9, 0, 3, 6], [10, 9, 0, 3, 6]], "max_new_tokens": 3, "future_stamps": [[15, 9, 0, 3, 6], [20, 9, 0, 3, 6], [25, 9, 0, 3, 6]], "seed": 3}'
GEN2='{"tokens": [[7, 8]], "stamps": [[30, 9, 0, 3, 6]], "max_new_tokens": 4, "future_stamps": [[35, 9, 0, 3, 6], [40, 9, 0, 3, 6], [45, 9, 0, 3, 6], [50, 9, 0, 3, 6]], "seed": 5}'
http POST "$U/sessions/$TID/generate" -d "$GEN1"
expect "a token session generates" 200 'd["length"] == 6'
downterm
up c
http POST "$U/sessions/${SID[0]}/forecast" -d @"$WORK/fc.json"
same "after SIGTERM and a restart, a candle session forecasts the same bytes" "$WORK/before.json" "$BODY"
down9
up d
http POST "$U/sessions/${SID[0]}/forecast" -d @"$WORK/fc.json"
same "after kill -9 and a restart, a candle session forecasts the same bytes" "$WORK/before.json" "$BODY"
http POST "$U/sessions/$TID/generate" -d "$GEN2"
cp "$BODY" "$WORK/gen_restored.json"
# the same generation on a session that never restarted
http POST "$U/sessions" -d '{}'
TID2=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY")
http POST "$U/sessions/$TID2/generate" -d "$GEN1"
http POST "$U/sessions/$TID2/generate" -d "$GEN2"
"$PY" - "$WORK/gen_restored.json" "$BODY" <<'EOF' && pass "a token session generates the same tokens after kill -9 as one never restarted" || fail "token session after kill -9" "$(cat "$WORK/gen_restored.json") vs $(cat "$BODY")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if a["tokens"] == b["tokens"] and a["length"] == b["length"] == 11 else 1)
EOF
grep -q "6 sessions restored" "$WORK/d.log" || grep -q "5 sessions restored" "$WORK/d.log" \
    && pass "the log says how many sessions came back" || fail "the log says how many sessions came back" "$(grep journal "$WORK/d.log")"

# ---- a tail cut mid-record ----------------------------------------------------------------------
http POST "$U/sessions/${SID[1]}" -X GET
LEN1=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["length"])' "$BODY")
"$PY" - "$WORK/rows.json" >"$WORK/one.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); r = d["rows"][2400]
print(json.dumps({"candles": {"timestamps": ["2030-01-01 00:00:00"], **{n: [float(r[j])] for j, n in enumerate(d["hdr"][1:], 1)}}}))
EOF
http POST "$U/sessions/${SID[1]}/candles" -d @"$WORK/one.json"
expect "one more candle appended" 200 "d['length'] == $LEN1 + 1"
down9
SIZE=$(stat -c %s "$STATE/journal")
truncate -s $((SIZE - 20)) "$STATE/journal"
up e
grep -q "cut .* bytes at offset .*a record cut short" "$WORK/e.log" \
    && pass "a journal cut mid-record starts, and the log says what was cut" \
    || fail "a journal cut mid-record starts, and the log says what was cut" "$(grep journal "$WORK/e.log")"
http GET "$U/sessions/${SID[1]}"
expect "the cut record alone is lost" 200 "d['length'] == $LEN1"
http POST "$U/sessions/${SID[1]}/candles" -d @"$WORK/one.json"
expect "the session takes the lost candle again" 200 "d['length'] == $LEN1 + 1"
down9
# garbage after the last record: a checksum mismatch, cut likewise
head -c 64 /dev/urandom >>"$STATE/journal"
up f
grep -q "cut 64 bytes" "$WORK/f.log" && pass "garbage after the last record is cut" \
    || fail "garbage after the last record is cut" "$(grep journal "$WORK/f.log")"
http GET "$U/sessions/${SID[1]}"
expect "and every record before it is kept" 200 "d['length'] == $LEN1 + 1"

# ---- a journal of another model --------------------------------------------------------------------
down9
cp -r "$MODEL" "$WORK/other"
"$PY" - "$WORK/other/predictor/model.safetensors" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
b[-1] ^= 0x01  # one weight of the last layer changed
open(p, "wb").write(b)
EOF
# the same id on changed files: the journal is opened and each session is judged by its model
start_only other --model "tiny=$WORK/other" --state-dir "$STATE" --workers 2
grep -q "session ${SID[1]} is not restored: it was created with model tiny of hash" "$WORK/other.log" \
    && grep -q "sessions restored ([1-9][0-9]* refused)" "$WORK/other.log" \
    && pass "a journal replayed on a changed default model refuses its sessions, each logged" \
    || fail "a journal of another model" "$(grep journal "$WORK/other.log")"
http GET "$URL_other/sessions/${SID[1]}"
expect "such a session is 404 saying its model changed" 404 \
    '"not restored" in d["error"]["message"] and "model" in d["error"]["message"]'
kill -TERM "$PID_other" 2>/dev/null; wait "$PID_other" 2>/dev/null

# ---- deletes, expiry and the rewrite under appends -----------------------------------------------------
up g --journal-rewrite-min 4096 --session-ttl 4
SIZE0=$(stat -c %s "$STATE/journal")
# 24 sessions created and deleted while a live one is appended to; then appends go on until
# a session created before them (and the others not appended to) expired (TTL 4 s)
"$PY" - "$U" "$WORK" "${SID[1]}" <<'EOF' >"$WORK/rewrite.out"
import http.client, json, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); w = sys.argv[2]; sid = sys.argv[3]
d = json.load(open(f"{w}/rows.json")); r = d["rows"][2400]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
def call(method, path, body=None):
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    resp = c.getresponse()
    return resp.status, json.loads(resp.read())
create = open(f"{w}/create3.json").read()
expiring = call("POST", "/sessions", create)[1]["session"]
ok = 0
for i in range(1, 200):
    if i <= 24:
        st, cr = call("POST", "/sessions", create)
        ok += st == 201 and call("DELETE", f"/sessions/{cr['session']}")[0] == 200
    one = {"candles": {"timestamps": [f"2030-01-02 {i // 60:02d}:{i % 60:02d}:00"],
                       **{n: [float(r[j])] for j, n in enumerate(d["hdr"][1:], 1)}}}
    ok += call("POST", f"/sessions/{sid}/candles", json.dumps(one))[0] == 200
    if i > 24 and call("GET", f"/sessions/{expiring}")[0] == 404:
        break
    time.sleep(0.2 if i > 24 else 0.02)
st, fc = call("POST", f"/sessions/{sid}/forecast", open(f"{w}/fc.json").read())
json.dump(fc, open(f"{w}/before_rewrite.json", "w"))
print(expiring, ok == 24 + i and st == 200, i)
EOF
read -r EXPIRING REWRITE_OK ROUNDS <"$WORK/rewrite.out"
[ "$REWRITE_OK" = True ] && pass "appends go on while 24 sessions are created and deleted, until others expire ($ROUNDS appends)" \
    || fail "appends go on while sessions are created, deleted and expire" "$(cat "$WORK/rewrite.out")"
for i in $(seq 1 200); do # the flusher's next round (every second)
    grep -q "journal: rewritten" "$WORK/g.log" && break
    sleep 0.05
done
SIZE1=$(stat -c %s "$STATE/journal")
grep -q "journal: rewritten" "$WORK/g.log" \
    && pass "the journal is rewritten once ended sessions outgrow the live ones ($SIZE0 -> $SIZE1 bytes)" \
    || fail "the journal is rewritten" "sizes $SIZE0 $SIZE1: $(grep journal "$WORK/g.log")"
down9
up h
http GET "$U/sessions/$EXPIRING"
expect "an expired session stays gone after a restart" 404
http POST "$U/sessions/${SID[1]}/forecast" -d @"$WORK/fc.json"
same "after the rewrite, a live session forecasts the same bytes" "$WORK/before_rewrite.json" "$BODY"

summary
