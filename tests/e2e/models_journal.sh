#!/usr/bin/env bash
# models_journal.sh — the journal judged per model: sessions on models a (the default) and b,
# then a's files changed (one weight) and the daemon restarted with the same models:
#   * the journal is not refused for the default model's change: a's sessions (candle and
#     token) are not restored, each with a log line naming its model and hashes, and each is
#     404 session_not_found saying so; b's sessions go on: a candle session's forecast and a
#     token session's next generation are the bytes they were before the restart;
#   * a creation record naming no model (a journal written before models had ids: the model
#     tag stripped from it) is judged by the header's fingerprint: restored while the default
#     model is unchanged, refused with a line saying so once it changed.
# Usage: KR_MKMODEL=PATH models_journal.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

cp -r "$MODEL" "$WORK/a"
make_model b
"$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" <<'PYEOF'
import csv, json, sys
w = sys.argv[2]
rows = list(csv.DictReader(open(sys.argv[1])))[:80]
c = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    c[k] = [float(r[k]) for r in rows]
json.dump({"candles": c}, open(f"{w}/cs_a.json", "w"))
json.dump({"candles": c, "model": "b"}, open(f"{w}/cs_b.json", "w"))
stamps = [[5 * (i % 12), 9 + i // 12, 1, 3, 6] for i in range(40)]
tokens = [[(i * 37) % 1024, (i * 91) % 1024] for i in range(24)]
json.dump({"tokens": tokens, "stamps": stamps[:24], "max_new_tokens": 6,
           "future_stamps": stamps[24:30], "top_k": 1}, open(f"{w}/gen0.json", "w"))
json.dump({"max_new_tokens": 4, "future_stamps": stamps[30:34], "top_k": 1},
          open(f"{w}/gen1.json", "w"))
PYEOF
# strip_tag JOURNAL SESSION: that session's creation record (T) without its model, as a
# journal written before models had ids holds it (journal_format.h; CRC-32 as zlib's)
strip_tag() {
    "$PY" - "$1" "$2" <<'PYEOF'
import struct, sys, zlib
path, sid = sys.argv[1], sys.argv[2]
b = open(path, "rb").read()
(n,) = struct.unpack_from("<I", b, 16)
off, out, done = 20 + n + 4, bytearray(b[: 20 + n + 4]), False
while off + 8 <= len(b):
    (ln,) = struct.unpack_from("<I", b, off)
    p = b[off + 8 : off + 8 + ln]
    (il,) = struct.unpack_from("<H", p, 1)
    if chr(p[0]) == "T" and p[3 : 3 + il].decode() == sid:
        at = 3 + il
        (ol,) = struct.unpack_from("<H", p, at)
        p = p[: at + 2 + ol]  # type, id, owner: the model left off
        done = True
    out += struct.pack("<II", len(p), zlib.crc32(p) & 0xFFFFFFFF) + p
    off += 8 + ln
open(path, "wb").write(bytes(out))
sys.exit(0 if done else 1)
PYEOF
}

MODELS=(--model "a=$WORK/a" --model "b=$WORK/b" --state-dir "$WORK/state" --workers 1)
mkdir -p "$WORK/state"
start_only j1 "${MODELS[@]}"
http POST "$URL_j1/sessions" -d @"$WORK/cs_a.json"; CS_A=$(sid)
http POST "$URL_j1/sessions" -d @"$WORK/cs_b.json"; CS_B=$(sid)
expect "a candle session on b" 201 'd["model"]["id"] == "b"'
http POST "$URL_j1/sessions" -d '{}'; TS_A=$(sid)
http POST "$URL_j1/sessions" -d '{}'; TS_U=$(sid)
http POST "$URL_j1/sessions" -d '{"model": "b"}'; TS_B=$(sid)
http POST "$URL_j1/sessions" -d '{"model": "b"}'; TS_B2=$(sid)
for s in "$TS_A" "$TS_U" "$TS_B" "$TS_B2"; do
    http POST "$URL_j1/sessions/$s/generate" -d @"$WORK/gen0.json"
    [ "$STATUS" = 200 ] || fail "generate on $s" "$STATUS $(head -c 300 "$BODY")"
done
http POST "$URL_j1/sessions/$TS_B2/generate" -d @"$WORK/gen1.json"
expect "b's twin token session's next generation" 200 'd["length"] == 34'
cp "$BODY" "$WORK/gen_before.json"
http POST "$URL_j1/sessions/$CS_B/forecast" -d '{"horizon": 3, "samples": 2, "seed": 4}'
expect "b's candle session forecast" 200 'd["model"]["id"] == "b"'
cp "$BODY" "$WORK/cs_b_before.json"
http GET "$URL_j1/models/a"
A_HASH=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['hash'])" "$BODY")
stop j1

strip_tag "$WORK/state/journal" "$TS_U" && pass "a token session's creation record without its model" \
    || fail "strip the model from $TS_U's creation record"
start_only j2 "${MODELS[@]}"
grep -q "6 sessions restored (0 refused)" "$WORK/j2.log" \
    && pass "unchanged models: every session restored, the untagged one by the header's model" \
    || fail "restart with the same files" "$(grep journal "$WORK/j2.log")"
http GET "$URL_j2/sessions/$TS_U"
expect "the session naming no model is on the default model" 200 'd["model"]["id"] == "a" and d["length"] == 30'
stop j2

models_check flip "$WORK/a/predictor/model.safetensors"
start_only j3 "${MODELS[@]}"
http GET "$URL_j3/models/a"
expect "a's files now hash otherwise" 200 "d['hash'] != '$A_HASH' and d['default']"
grep -q "started with another default model" "$WORK/j3.log" \
    && pass "the header's other default model is logged, not a refusal" \
    || fail "the header's line" "$(grep journal "$WORK/j3.log")"
for s in "$CS_A" "$TS_A"; do
    grep -q "session $s is not restored: it was created with model a of hash $A_HASH, and that model's files now hash to" "$WORK/j3.log" \
        && pass "session $s on a: refused with a line naming its model and hashes" \
        || fail "the log line for $s" "$(grep "$s" "$WORK/j3.log")"
done
grep -q "session $TS_U is not restored: it was created before models had ids, with a default model of fingerprint" "$WORK/j3.log" \
    && pass "the session naming no model: refused by the header's fingerprint, logged" \
    || fail "the log line for $TS_U" "$(grep "$TS_U" "$WORK/j3.log")"
grep -q "3 sessions restored (3 refused)" "$WORK/j3.log" && pass "b's three sessions restored" \
    || fail "the count" "$(grep restored "$WORK/j3.log")"
for s in "$CS_A" "$TS_A" "$TS_U"; do
    http GET "$URL_j3/sessions/$s"
    expect "a's session $s: 404 saying its model changed" 404 \
        'd["error"]["code"] == "session_not_found" and "not restored" in d["error"]["message"] and "model" in d["error"]["message"]'
done
http POST "$URL_j3/sessions/$CS_B/forecast" -d '{"horizon": 3, "samples": 2, "seed": 4}'
if [ "$STATUS" = 200 ] && models_check same_forecast "$BODY" "$WORK/cs_b_before.json"; then
    pass "b's candle session forecasts the bytes it did before the restart"
else
    fail "b's candle session" "$STATUS $(head -c 300 "$BODY")"
fi
http POST "$URL_j3/sessions/$TS_B/generate" -d @"$WORK/gen1.json"
if [ "$STATUS" = 200 ] && "$PY" - "$BODY" "$WORK/gen_before.json" <<'PYEOF'; then
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if (a["tokens"], a["length"], a["model"]) == (b["tokens"], b["length"], b["model"]) else 1)
PYEOF
    pass "b's token session generates what its twin did before the restart"
else
    fail "b's token session" "$STATUS $(head -c 300 "$BODY") / $(head -c 300 "$WORK/gen_before.json")"
fi
stop j3
summary
