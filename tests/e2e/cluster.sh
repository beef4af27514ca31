#!/usr/bin/env bash
# cluster.sh KRONOSD SRCDIR — three kronosd behind nginx, with config/nginx/kronosd.conf.
#
# Starts three nodes (node-id n1..n3) and an nginx (not a daemon, its own prefix in a temp
# dir) on loopback ports; the shipped nginx file is used as is, with its addresses, node
# names and listen port replaced. Shows: 200 session requests over 20 sessions each land
# on their node; a node killed under wrk load of /forecast loses no request; a rolling
# restart (SIGTERM, drain, start) of all three nodes under load fails no request; candle
# sessions on a node restarted (SIGTERM, then kill -9) answer through nginx the forecasts
# they gave before (each node keeps a journal in its state-dir); a session on a stopped node
# gets a JSON 503 node_unavailable. About 30 s; skipped (exit 77) without
# nginx or wrk.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
NGINX=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null)
if [ -z "$NGINX" ] || ! command -v wrk >/dev/null; then
    echo "nginx or wrk not installed (apt-get install nginx wrk): skipped"
    exit 77
fi
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

declare -A PORT PID
# node N: starts (or restarts) node nN on its port; waits until /health answers 200.
node() {
    local n=$1 i
    "$KRONOSD" serve --model "$MODEL" --host 127.0.0.1 --port "${PORT[$n]}" --node-id "n$n" \
        --workers 1 --shutdown-timeout 10 --max-connections-per-ip 512 \
        --state-dir "$WORK/state-n$n" >>"$WORK/n$n.log" 2>&1 &
    PID[$n]=$!
    BG_PIDS+=("${PID[$n]}")
    for i in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT[$n]}/health")" = 200 ] && return 0
        sleep 0.05
    done
    echo "node n$n did not start:"; tail -5 "$WORK/n$n.log"; exit 1
}
for n in 1 2 3; do PORT[$n]=$(free_port); node "$n"; done
NP=$(free_port)
N="http://127.0.0.1:$NP"

# ---- nginx: the shipped file, addresses replaced ----------------------------------------------
mkdir -p "$WORK/nginx/logs" "$WORK/nginx/tmp"
sed -e "s/10\.0\.0\.11:8080/127.0.0.1:${PORT[1]}/g" -e "s/10\.0\.0\.12:8080/127.0.0.1:${PORT[2]}/g" \
    -e "s/10\.0\.0\.13:8080/127.0.0.1:${PORT[3]}/g" -e "s/kronos-\([123]\)/n\1/g" \
    -e "s/listen 80;/listen 127.0.0.1:$NP;/" "$SRC/config/nginx/kronosd.conf" >"$WORK/nginx/kronosd.conf"
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root root;"
cat >"$WORK/nginx/nginx.conf" <<EOF2
$USER_LINE
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log $WORK/nginx/logs/access.log;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    include $WORK/nginx/kronosd.conf;
}
EOF2
"$NGINX" -t -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/logs/error.log" 2>"$WORK/nginx-t.log" \
    && pass "nginx accepts config/nginx/kronosd.conf" \
    || { fail "nginx accepts config/nginx/kronosd.conf" "$(cat "$WORK/nginx-t.log")"; summary; exit 1; }
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/logs/error.log" &
NGINX_PID=$!
BG_PIDS+=("$NGINX_PID")
for i in $(seq 1 100); do curl -s -o /dev/null "$N/health" && break; sleep 0.05; done

# ---- bodies ----------------------------------------------------------------------------------
"$PY" - "$GOLDEN" "$WORK" <<'EOF2'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]["input"]
small = {k: v[:32] for k, v in g.items()}
body = json.dumps({"candles": small, "horizon": 4, "samples": 2, "seed": 1})
open(f"{sys.argv[2]}/forecast.json", "w").write(body)
open(f"{sys.argv[2]}/post.lua", "w").write(
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    f"wrk.body = {json.dumps(body)}\n")
EOF2
# load SECONDS OUT: wrk against /forecast through nginx, in the background (sets LOAD).
load() {
    wrk -t2 -c8 -d"$1s" --timeout 10s -s "$WORK/post.lua" "$N/forecast" >"$2" 2>&1 &
    LOAD=$!
    BG_PIDS+=("$LOAD")
}
# load_end: stops the load (wrk prints its totals on SIGINT as at the end of its time).
load_end() {
    kill -INT "$LOAD"
    wait "$LOAD"
}
# back_in_rotation N: under load, until nginx sends node nN a /forecast (10 s at most), past
# the fail_timeout of its last failure; a failure of the check otherwise.
back_in_rotation() {
    local n=$1 before i
    before=$(grep -c "POST /forecast 200" "$WORK/n$n.log")
    for i in $(seq 1 200); do
        [ "$(grep -c "POST /forecast 200" "$WORK/n$n.log")" -gt "$before" ] && return 0
        sleep 0.05
    done
    fail "n$n back in nginx's rotation within 10 s"
}
# wrk_failed FILE: non-2xx responses plus socket errors of a wrk run.
wrk_failed() {
    "$PY" - "$1" <<'EOF2'
import re, sys
t = open(sys.argv[1]).read()
bad = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses: (\d+)", t))
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
bad += sum(int(x) for x in m.groups()) if m else 0
print(bad if re.search(r"requests in", t) else "no-result")
EOF2
}
wrk_total() { sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$1"; }

# ---- sessions land on their node ---------------------------------------------------------------
"$PY" - "$N" "$WORK/sessions.txt" <<'EOF2' >"$WORK/sessions.out"
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
def post(path, body):
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())
sids = [post("/sessions", {})[1]["session"] for _ in range(20)]
open(sys.argv[2], "w").write("\n".join(sids) + "\n")
ok = 0
for rnd in range(1, 11):
    for sid in sids:
        st, d = post(f"/sessions/{sid}/generate", {"tokens": [[1, rnd]], "stamps": [[rnd, 9, 0, 3, 6]]})
        ok += st == 200 and d["length"] == rnd and d["session"] == sid
print(ok)
EOF2
ok=$(cat "$WORK/sessions.out")
NODES_USED=$(sed 's/-[0-9a-f]*$//' "$WORK/sessions.txt" | sort -u | tr '\n' ' ')
echo "     20 sessions created through nginx, on nodes: $NODES_USED; $ok of 200 requests answered by their session"
misrouted=0
for n in 1 2 3; do
    # every session request a node logged is one of its own sessions
    misrouted=$((misrouted + $(grep -c "POST /sessions/n[^$n][^ ]*/generate" "$WORK/n$n.log")))
done
[ "$ok" = 200 ] && [ "$misrouted" = 0 ] && [ "$(echo $NODES_USED | wc -w)" -ge 2 ] \
    && pass "200 session requests over 20 sessions all land on their node" \
    || fail "200 session requests over 20 sessions all land on their node" "$ok ok, $misrouted misrouted, nodes $NODES_USED"

# ---- kill a node under load ----------------------------------------------------------------------
load 60 "$WORK/wrk-kill.txt"
sleep 2
kill -KILL "${PID[2]}"
sleep 2
load_end
echo "     kill -9 of n2 after 2 s of a wrk run, 2 s more: $(wrk_total "$WORK/wrk-kill.txt") requests, $(wrk_failed "$WORK/wrk-kill.txt") failed"
[ "$(wrk_failed "$WORK/wrk-kill.txt")" = 0 ] && pass "a node killed under load: no request lost" \
    || fail "a node killed under load: no request lost" "$(cat "$WORK/wrk-kill.txt")"
node 2

# ---- rolling restart under load ---------------------------------------------------------------------
load 60 "$WORK/wrk-roll.txt"
back_in_rotation 2 # n2 back (fail_timeout) before the first node stops
for n in 1 2 3; do
    kill -TERM "${PID[$n]}"
    wait "${PID[$n]}"
    rc=$?
    [ "$rc" = 0 ] || fail "n$n drained and exited 0" "exit $rc"
    node "$n"
    back_in_rotation "$n" # nginx takes the node back before the next one stops
done
load_end
echo "     rolling restart of n1, n2, n3 under a wrk run: $(wrk_total "$WORK/wrk-roll.txt") requests, $(wrk_failed "$WORK/wrk-roll.txt") failed"
[ "$(wrk_failed "$WORK/wrk-roll.txt")" = 0 ] && pass "rolling restart under load: zero failed requests" \
    || fail "rolling restart under load: zero failed requests" "$(cat "$WORK/wrk-roll.txt")"
grep -q "draining" "$WORK/n1.log" && pass "the nodes drained on SIGTERM" || fail "the nodes drained on SIGTERM"

# ---- candle sessions survive their node's restarts ---------------------------------------------------
"$PY" - "$N" "$GOLDEN" "$WORK" <<'EOF2' >"$WORK/candle-sessions.out"
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); w = sys.argv[3]
g = json.load(open(sys.argv[2]))["cases"][0]["input"]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
def post(path, body):
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())
sids = []
for i in range(40):  # until 3 sessions are on n1
    st, d = post("/sessions", {"candles": {k: v[:40 + i] for k, v in g.items()}})
    if st == 201 and d["session"].startswith("n1-"):
        sids.append(d["session"])
    if len(sids) == 3:
        break
fcs = {s: post(f"/sessions/{s}/forecast", {"horizon": 4, "samples": 2, "seed": 5})[1] for s in sids}
for f in fcs.values():
    f.pop("usage", None)
json.dump(fcs, open(f"{w}/n1-forecasts.json", "w"))
print(len(sids))
EOF2
# same_forecasts: the n1 sessions answer through nginx what they answered before
same_forecasts() {
    "$PY" - "$N" "$WORK/n1-forecasts.json" <<'EOF2'
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); before = json.load(open(sys.argv[2]))
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
same = 0
for s, f in before.items():
    c.request("POST", f"/sessions/{s}/forecast", body=json.dumps({"horizon": 4, "samples": 2, "seed": 5}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); d = json.loads(r.read()); d.pop("usage", None)
    same += r.status == 200 and d == f
print(same)
EOF2
}
kill -TERM "${PID[1]}"
wait "${PID[1]}"
node 1
AFTER_TERM=$(same_forecasts)
kill -KILL "${PID[1]}"
wait "${PID[1]}" 2>/dev/null
node 1
AFTER_KILL=$(same_forecasts)
[ "$(cat "$WORK/candle-sessions.out")" = 3 ] && [ "$AFTER_TERM" = 3 ] && [ "$AFTER_KILL" = 3 ] \
    && pass "3 candle sessions of n1 answer the same forecasts through nginx after SIGTERM and after kill -9" \
    || fail "candle sessions survive their node's restarts" "$(cat "$WORK/candle-sessions.out") sessions; same after SIGTERM: $AFTER_TERM, after kill -9: $AFTER_KILL"

# ---- a session on a stopped node ---------------------------------------------------------------------
sid=""
for i in $(seq 1 30); do
    s=$(curl -sS -m 10 -X POST "$N/sessions" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["session"])')
    case "$s" in n3-*) sid=$s; break ;; esac
done
kill -TERM "${PID[3]}"
wait "${PID[3]}"
http POST "$N/sessions/$sid/generate" -d '{"tokens": [[1, 2]], "stamps": [[0, 9, 0, 3, 6]]}'
[ -n "$sid" ] && grep -qi "^Content-Type: application/json" "$HEADERS" && true
expect "a session on a stopped node: JSON 503 node_unavailable" 503 'd["error"]["code"] == "node_unavailable"'
grep -qi "^Content-Type: application/json" "$HEADERS" && pass "... with Content-Type application/json" \
    || fail "... with Content-Type application/json" "$(cat "$HEADERS")"
http POST "$N/sessions/nowhere-00000000000000000000000000000000/generate" -d '{}'
expect "a session id of no node: JSON 404" 404 'd["error"]["code"] == "session_not_found"'
http POST "$N/forecast" --data-binary @"$WORK/forecast.json"
expect "stateless requests still served with a node down" 200

kill -TERM "$NGINX_PID" 2>/dev/null
wait "$NGINX_PID" 2>/dev/null
summary
