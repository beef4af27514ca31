#!/usr/bin/env bash
# journal.sh KRONOSD SRCDIR — the journal's promise when things go wrong (docs/operations.md).
#
# Shows: on a full disk (a small tmpfs, when this runs as root) a DELETE, an append, a
# generate and a create each answer 500 journal_failed saying what became of the session,
# and a restart brings back exactly what was acknowledged; a changed node-id or a lower
# max-sessions refuses to start, names the setting and changes nothing; a byte damaged
# before the journal's end refuses to start (nothing changed), `kronosd journal check`
# names the record and its session and `repair` drops that session alone; a damaged header
# is refused with a message, never started afresh; a record with a valid checksum that
# breaks a live request's rules is refused the same way. About 15 s.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 KRONOSD SRCDIR" >&2
    exit 2
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"
EDIT=("$PY" "$SRC/tests/e2e/journal_edit.py")

STATE="$WORK/state"
mkdir -p "$STATE"
TMPFS=false
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=512k kronosd-e2e "$STATE" 2>/dev/null; then
    TMPFS=true
    unmount() {
        kill_children
        wait 2>/dev/null
        umount "$STATE" 2>/dev/null
        cleanup
    }
    trap unmount EXIT
fi

up() {
    local name=$1
    shift
    start_daemon "$name" --state-dir "$STATE" --node-id node1 --workers 2 "$@"
    U=$(eval echo "\$URL_$name")
    PID=$(eval echo "\$PID_$name")
}
down9() { kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
length() {
    http GET "$U/sessions/$1"
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("length", -1))' "$BODY"
}
# refused NAME ARGS...: the daemon refuses to start (exit != 0) and its log says PATTERN
refused() {
    local name=$1 pattern=$2
    shift 2
    timeout 30 "$KRONOSD" serve --model "$MODEL" --port 0 --state-dir "$STATE" --workers 2 "$@" \
        >"$WORK/$name.log" 2>&1
    local rc=$?
    if [ "$rc" != 0 ] && grep -q -- "$pattern" "$WORK/$name.log"; then
        pass "$name (exit $rc)"
    else
        fail "$name" "exit $rc: $(tail -c 400 "$WORK/$name.log")"
    fi
}
same_file() { # NAME: the journal is what it was at the last snapshot
    if cmp -s "$STATE/journal" "$WORK/snapshot"; then pass "$1"; else fail "$1"; fi
}

"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'EOF'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, rows = rows[0], rows[1:]
def cand(r):
    return {"timestamps": [x[0] for x in r], **{n: [float(x[i]) for x in r] for i, n in enumerate(hdr[1:], 1)}}
for k in range(3):
    json.dump({"candles": cand(rows[k * 100:k * 100 + 40])}, open(f"{sys.argv[2]}/create{k}.json", "w"))
    json.dump([cand(rows[i:i + 1]) for i in range(k * 100 + 40, k * 100 + 100)],
              open(f"{sys.argv[2]}/more{k}.json", "w"))
EOF
GEN='{"tokens": [[1, 2], [3, 4]], "stamps": [[0, 9, 0, 3, 6], [5, 9, 0, 3, 6]], "max_new_tokens": 2, "future_stamps": [[10, 9, 0, 3, 6], [15, 9, 0, 3, 6]], "seed": 3}'

up a --journal-fsync always
for k in 0 1 2; do
    http POST "$U/sessions" -d @"$WORK/create$k.json"
    S[$k]=$(sid)
done
http POST "$U/sessions" -d '{}'
TOK=$(sid)
http POST "$U/sessions/$TOK/generate" -d "$GEN"
expect "three candle sessions and a token session with a journal" 200 'd["length"] == 4'

# ---- a full disk -----------------------------------------------------------------------------
if $TMPFS; then
    for k in 0 1 2 3; do # sessions to delete once the disk is full
        http POST "$U/sessions" -d '{}'
        X[$k]=$(sid)
    done
    dd if=/dev/zero of="$STATE/filler" bs=4k 2>/dev/null # until the tmpfs is full
    # appends go on into the journal's last page until it is full too: the first refused one
    "$PY" "$SRC/tests/e2e/journal_full.py" fill "$U" "$WORK" "${S[1]}" >"$WORK/full.out"
    read -r ACKED REFUSED <"$WORK/full.out"
    cp "$WORK/full.json" "$BODY"
    STATUS=$REFUSED
    expect "an append on a full disk ($ACKED acknowledged before it): 500, not appended, as it was" 500 \
        'd["error"]["code"] == "journal_failed" and "not appended" in d["error"]["message"]'
    [ "$(length "${S[1]}")" = $((40 + ACKED)) ] \
        && pass "the session holds its $((40 + ACKED)) acknowledged candles" \
        || fail "the session holds its acknowledged candles" "$(cat "$BODY")"
    "$PY" "$SRC/tests/e2e/journal_full.py" compare "$U" "$WORK" "${S[1]}" "$ACKED" \
        && pass "and forecasts as a stateless forecast of exactly them" \
        || fail "the session forecasts as a stateless forecast of its candles"
    "$PY" "$SRC/tests/e2e/journal_full.py" creates "$U" "$WORK" >"$WORK/full.out"
    read -r CREATED REFUSED <"$WORK/full.out"
    cp "$WORK/full.json" "$BODY"
    STATUS=$REFUSED
    expect "a create on a full disk ($CREATED made before it): 500, not created" 500 \
        '"not created" in d["error"]["message"]'
    "$PY" "$SRC/tests/e2e/journal_full.py" deletes "$U" "$WORK" "${X[@]}" >"$WORK/full.out"
    read -r DELETED REFUSED KEPT <"$WORK/full.out"
    cp "$WORK/full.json" "$BODY"
    STATUS=$REFUSED
    expect "a DELETE on a full disk ($DELETED done before it): 500 journal_failed, not deleted" 500 \
        'd["error"]["code"] == "journal_failed" and "not deleted" in d["error"]["message"]'
    http GET "$U/sessions/$KEPT"
    expect "and the session goes on" 200
    http POST "$U/sessions/$TOK/generate" -d "$GEN"
    expect "a generate on a full disk: 500, saying what became of the session" 500 \
        '"journal" in d["error"]["message"] and "session was ended" in d["error"]["message"]'
    rm -f "$STATE/filler"
    http DELETE "$U/sessions/$KEPT"
    expect "with room again, the DELETE is done" 200
    "$PY" "$SRC/tests/e2e/journal_full.py" one "$WORK" "$ACKED" >"$WORK/retry.json"
    http POST "$U/sessions/${S[1]}/candles" -d @"$WORK/retry.json"
    expect "and the refused append, sent again" 200 "d['length'] == $((41 + ACKED))"
    down9
    up b
    http GET "$U/sessions/$KEPT"
    expect "after kill -9, the deleted session stays deleted" 404
    [ "$(length "${S[1]}")" = $((41 + ACKED)) ] \
        && pass "and the appended session holds what was acknowledged" \
        || fail "the appended session holds what was acknowledged" "$(cat "$BODY")"
else
    echo "     (not root, or no tmpfs: the full-disk cases are not run)"
    http DELETE "$U/sessions/${S[0]}"
    down9
    up b
fi
http GET "$U/sessions/$TOK"
TOKLEN=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("length", -1))' "$BODY")
down9
cp "$STATE/journal" "$WORK/snapshot"

# ---- a configuration that does not fit --------------------------------------------------------
refused "another node-id refuses to start, naming it" "node-id node1" --node-id node2
same_file "and the journal is as it was"
refused "fewer max-sessions refuse to start, naming it" "max-sessions" --node-id node1 --max-sessions 1
same_file "and the journal is as it was"

# ---- damage before the end -----------------------------------------------------------------------
OFF=$("${EDIT[@]}" records "$STATE/journal" | awk -v s="${S[1]}" '$2 == "C" && $3 == s { print $1; exit }')
"${EDIT[@]}" flip "$STATE/journal" $((OFF + 60))
cp "$STATE/journal" "$WORK/snapshot"
refused "a byte damaged in the middle refuses to start" "is damaged" --node-id node1
same_file "and the journal is as it was"
"$KRONOSD" journal check "$STATE" >"$WORK/check.out" 2>&1
RC=$?
[ "$RC" = 1 ] && grep -q "offset $OFF" "$WORK/check.out" && grep -q "${S[1]}" "$WORK/check.out" \
    && pass "journal check names the damaged record and its session (exit 1)" \
    || fail "journal check names the damaged record" "exit $RC: $(cat "$WORK/check.out")"
"$KRONOSD" journal repair "$STATE" --model "$MODEL" >"$WORK/repair.out" 2>&1
RC=$?
[ "$RC" = 0 ] && ls "$STATE"/journal.damaged-* >/dev/null 2>&1 \
    && pass "journal repair drops that session and keeps the original beside it" \
    || fail "journal repair" "exit $RC: $(cat "$WORK/repair.out")"
up c
http GET "$U/sessions/${S[1]}"
expect "the damaged session is gone" 404
[ "$(length "${S[2]}")" = 40 ] && pass "the others are whole (a candle session)" \
    || fail "the others are whole" "$(cat "$BODY")"
[ "$(length "$TOK")" = "$TOKLEN" ] && pass "and a token session of $TOKLEN pairs" \
    || fail "the token session is whole" "$(cat "$BODY")"
down9

# ---- a record with a valid checksum that breaks the rules ----------------------------------------
"${EDIT[@]}" hostile-append "$STATE/journal" "${S[2]}"
cp "$STATE/journal" "$WORK/snapshot"
refused "an appended NaN close, checksum and all, refuses to start" "candles.close" --node-id node1
same_file "and the journal is as it was"
"$KRONOSD" journal repair "$STATE" --model "$MODEL" >"$WORK/repair2.out" 2>&1 \
    && pass "repair drops it" || fail "repair drops it" "$(cat "$WORK/repair2.out")"
up d
http GET "$U/sessions/${S[2]}"
expect "the session it named is gone" 404
[ "$(length "$TOK")" = "$TOKLEN" ] && pass "the other session is whole" || fail "the other session is whole"
down9

# ---- headers it never writes -------------------------------------------------------------------------
cp "$STATE/journal" "$WORK/good"
for n in 5000 100; do
    cp "$WORK/good" "$STATE/journal"
    "${EDIT[@]}" header-length "$STATE/journal" "$n"
    cp "$STATE/journal" "$WORK/snapshot"
    refused "a header's length of $n refuses to start, saying the header is damaged" \
        "header" --node-id node1
    same_file "and the journal is as it was"
done
cp "$WORK/good" "$STATE/journal"
up e
[ "$(length "$TOK")" = "$TOKLEN" ] && pass "the good journal starts again" || fail "the good journal starts again"
down9

# ---- a state-dir path too long for the file system's calls ------------------------------------------
LONG="$WORK/$(printf 'd%.0s' $(seq 1 250))"
for _ in $(seq 1 16); do LONG="$LONG/$(printf 'e%.0s' $(seq 1 250))"; done
timeout 30 "$KRONOSD" serve --model "$MODEL" --port 0 --state-dir "$LONG" >"$WORK/long.log" 2>&1
RC=$?
[ "$RC" != 0 ] && grep -q "the path is too long (at most" "$WORK/long.log" \
    && pass "a state-dir path too long is refused, saying so (exit $RC)" \
    || fail "a state-dir path too long is refused" "exit $RC: $(tail -c 300 "$WORK/long.log")"

summary
