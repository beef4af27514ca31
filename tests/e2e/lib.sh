# lib.sh — shared by the kronosd end-to-end scripts: daemons, HTTP calls, checks, and the
# set-up of the scripts about several models (checkpoints, keys, one-model references).
# Source it after setting KRONOSD (the binary) and SRC (the source tree).

# the interpreter itself: version-manager shims cost a few hundred ms a call
PY=$(python3 -c 'import sys; print(sys.executable)')
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-e2e.XXXXXX")
MODEL="$SRC/tests/data/tiny"
GOLDEN="$MODEL/golden.json"
PASSED=0
FAILED=0
BG_PIDS=()     # every process started here, killed on exit
STATUS=""      # of the last http call
BODY="$WORK/body"
HEADERS="$WORK/headers"

# kill_children: SIGKILL each process of BG_PIDS that is still this shell's child. One waited on
# before may by now be another test's process under a reused PID (PIDs wrap around in a long CI
# run), so the parent is checked first.
kill_children() {
    local p stat ppid
    for p in "${BG_PIDS[@]}"; do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        read -r _ ppid _ <<<"${stat##*) }" # past "pid (comm) ": state, ppid, ...
        [ "$ppid" = "$$" ] && kill -KILL "$p" 2>/dev/null
    done
}

cleanup() {
    kill_children
    wait 2>/dev/null
    if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 1' INT TERM

T0=${EPOCHREALTIME/./}
elapsed() {
    local us=$((${EPOCHREALTIME/./} - T0))
    printf '%3d.%02ds' $((us / 1000000)) $((us / 10000 % 100))
}
pass() { PASSED=$((PASSED + 1)); echo "ok   $(elapsed) $1"; }
fail() {
    FAILED=$((FAILED + 1))
    echo "FAIL $(elapsed) $1"
    [ -n "${2:-}" ] && echo "     $2"
    return 0
}
# skip NAME: a part that could not run here (its tool is missing); a script with no failure
# and a skipped part exits 77, which meson reports as a skip, not a pass.
SKIPPED=0
# sanitized FILE: true when FILE is built with AddressSanitizer or ThreadSanitizer, linked
# as gcc links it (a shared libasan) or as clang does (the runtime inside the binary)
sanitized() { grep -qa '__asan_init\|__tsan_init' "$1"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip $(elapsed) $1"; }
summary() {
    echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
    [ "$FAILED" -eq 0 ] || return 1
    [ "$SKIPPED" -eq 0 ] || return 77
}

# The first Python here with numpy (empty: none), for the checks that recompute with it.
NP_PY=""
for py in "$PY" /usr/bin/python3; do
    if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then NP_PY=$py; break; fi
done

# start_daemon NAME [ARGS...]: starts `kronosd serve` on a free port with its log in
# $WORK/NAME.log; sets PID_<NAME> and URL_<NAME>. Env vars in DAEMON_ENV (an array) apply.
start_daemon() {
    local name=$1
    shift
    start_only "$name" --model "$MODEL" "$@"
}

# start_only NAME [ARGS...]: start_daemon without the test model first (ARGS name the
# models: --model, models-dir, or a config file).
start_only() {
    local name=$1
    shift
    local log="$WORK/$name.log" i port
    env "${DAEMON_ENV[@]}" "$KRONOSD" serve --port 0 "$@" >"$log" 2>&1 &
    local pid=$!
    BG_PIDS+=("$pid")
    for i in $(seq 1 200); do
        grep -q "kronosd: ready" "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$log" | head -1)
    if ! grep -q "kronosd: ready" "$log" || [ -z "$port" ]; then
        echo "daemon $name did not start:"
        cat "$log"
        exit 1
    fi
    printf -v "PID_$name" '%s' "$pid"
    printf -v "URL_$name" '%s' "http://127.0.0.1:$port"
}

# http METHOD URL [CURL ARGS...]: sets STATUS; the body lands in $BODY, headers in $HEADERS.
http() {
    local method=$1 url=$2
    shift 2
    STATUS=$(curl -sS -m 60 -o "$BODY" -D "$HEADERS" -w '%{http_code}' -X "$method" "$url" "$@" \
        2>"$WORK/curl.err") || STATUS="curl-failed($(cat "$WORK/curl.err"))"
}

# jq_ok EXPR [FILE]: a Python expression on the JSON body `d` (or FILE) is true.
jq_ok() {
    "$PY" - "$1" "${2:-$BODY}" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[2]))
    ok = eval(sys.argv[1])
except Exception as e:
    print("     python:", repr(e)); ok = False
sys.exit(0 if ok else 1)
EOF
}

# expect NAME STATUS [PY-EXPR]: the last call answered STATUS and the body satisfies EXPR.
expect() {
    local name=$1 want=$2 expr=${3:-}
    if [ "$STATUS" != "$want" ]; then
        fail "$name" "status $STATUS, expected $want: $(head -c 300 "$BODY")"
    elif [ -n "$expr" ] && ! jq_ok "$expr"; then
        fail "$name" "body fails ($expr): $(head -c 300 "$BODY")"
    else
        pass "$name"
    fi
}

# has_header NAME: the last response carried header NAME.
has_header() { grep -qi "^$1:" "$HEADERS"; }

# metric URL NAME [AUTH ARGS]: a metric's value (first sample), or empty.
metric() {
    local url=$1 name=$2
    shift 2
    curl -sS -m 10 "$url/metrics" "$@" | awk -v n="$name" '$1 == n { print $2; exit }'
}

# wait_metric URL NAME VALUE [AUTH ARGS]: until the metric equals VALUE (10 s at most).
wait_metric() {
    local url=$1 name=$2 want=$3 i
    shift 3
    for i in $(seq 1 200); do
        [ "$(metric "$url" "$name" "$@")" = "$want" ] && return 0
        sleep 0.05
    done
    return 1
}

# series_json [ROWS]: the example series (tests/data/kline_5min.csv, its first ROWS candles or
# all) as one JSON object of columns, in $WORK/series.json.
series_json() {
    "$PY" - "$SRC/tests/data/kline_5min.csv" "$WORK" "${1:-0}" <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rows = rows[:int(sys.argv[3])] if int(sys.argv[3]) else rows
d = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    d[k] = [float(r[k]) for r in rows]
json.dump(d, open(sys.argv[2] + "/series.json", "w"))
PYEOF
}

# check_part CHECK NAME PYTHON: `PYTHON CHECK $U NAME $WORK` (a part of a *_check.py), its
# lines shown indented; a pass counting its "ok" lines, or a failure.
check_part() {
    local out
    if out=$("$3" "$1" "$U" "$2" "$WORK" 2>&1); then
        echo "$out" | sed 's/^/     /'
        pass "$2: $(echo "$out" | grep -c '^ok') checks"
    else
        echo "$out" | sed 's/^/     /'
        fail "$2"
    fi
}
# numpy_part CHECK NAME: check_part with the Python that has numpy, or a skip without one.
numpy_part() {
    if [ -n "$NP_PY" ]; then check_part "$1" "$2" "$NP_PY"; else skip "$2: no Python with numpy"; fi
}

# wait_log FILE PATTERN: until FILE has a line matching PATTERN (10 s at most); the check
# that follows says whether it came.
wait_log() {
    local i
    for i in $(seq 1 200); do
        grep -q -- "$2" "$1" && return 0
        sleep 0.05
    done
    return 1
}

# Request bodies made from the golden fixture.
make_bodies() {
    "$PY" - "$GOLDEN" "$WORK" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["cases"][0]
w = sys.argv[2]
inp = g["input"]
def dump(name, obj):
    json.dump(obj, open(f"{w}/{name}.json", "w"))
dump("golden_forecast", {"candles": inp, "horizon": len(g["future_timestamps"]),
     "future_timestamps": g["future_timestamps"], "top_k": 1, "top_p": 1.0,
     "max_context": g["max_context"]})
dump("tokenize", {"candles": inp})
# slow enough (about a second) to hold the only worker while other requests arrive
dump("long_forecast", {"candles": inp, "horizon": 300, "samples": 32, "top_k": 1})
# four times that: a drain's request must still run after SIGTERM and two more requests
dump("drain_forecast", {"candles": inp, "horizon": 300, "samples": 128, "top_k": 1})
# sampled paths, a fixed seed: the same bytes from the same model and mode
dump("sampled", {"candles": inp, "horizon": 16, "samples": 8, "seed": 3})
EOF
}

# refused NAME PATTERN COMMAND...: COMMAND exits non-zero and what it prints matches PATTERN.
refused() {
    local name=$1 pattern=$2 rc
    shift 2
    "$@" >"$WORK/refused.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q -- "$pattern" "$WORK/refused.out"; then
        pass "$name"
    else
        fail "$name" "exit $rc: $(head -3 "$WORK/refused.out")"
    fi
}

# same_answers NAME PY-EXPR FILE... -- OTHER: the JSON answers in FILE... are equal but for
# their usage, differ from OTHER's, and the first satisfies PY-EXPR (as `d`).
same_answers() {
    local name=$1 expr=$2
    shift 2
    "$PY" - "$expr" "$@" <<'PYEOF' && pass "$name" || fail "$name"
import json, sys
expr, files = sys.argv[1], sys.argv[2:]
cut = files.index("--")
same, other = files[:cut], files[cut + 1]
strip = lambda d: {k: v for k, v in d.items() if k != "usage"}
ds = [json.load(open(f)) for f in same]
d = ds[0]
assert eval(expr), f"{same[0]}: not {expr}"
assert all(strip(x) == strip(d) for x in ds), f"{same} differ"
assert strip(json.load(open(other))) != strip(d), f"{other} equals {same[0]}"
PYEOF
}

# weights_daemons MODE NAME: daemons f32, NAME (--weights MODE) and conf (`weights = MODE` in
# its config), one worker on one compute thread each; /model of NAME and of conf names weights
# MODE (and kv f32).
weights_daemons() {
    local mode=$1 name=$2 url=URL_$2
    start_daemon f32 --workers 1 --compute-threads 1
    start_daemon "$name" --workers 1 --compute-threads 1 --weights "$mode"
    printf 'weights = %s\n' "$mode" >"$WORK/$name.conf"
    start_daemon conf --workers 1 --compute-threads 1 --config "$WORK/$name.conf"
    http GET "${!url}/model"
    expect "/model names weights $mode (--weights $mode)" 200 \
        "d['weights'] == '$mode' and d['kv'] == 'f32'"
    http GET "$URL_conf/model"
    expect "/model names weights $mode (weights = $mode in the config)" 200 \
        "d['weights'] == '$mode' and d['kv'] == 'f32'"
}

# forecast_as NAME WEIGHTS TITLE: daemon NAME's forecast of sampled.json (make_bodies), kept as
# $WORK/NAME.json: 200, its usage naming weights WEIGHTS.
forecast_as() {
    local url=URL_$1
    http POST "${!url}/forecast" --data-binary @"$WORK/sampled.json"
    cp "$BODY" "$WORK/$1.json"
    expect "$3" 200 "d['usage']['weights'] == '$2'"
}

# sid: the session id of the last answer ($BODY).
sid() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$BODY"; }

# stop NAME: SIGTERM to daemon NAME, and wait for its exit.
stop() {
    local pid_var="PID_$1"
    kill -TERM "${!pid_var}" 2>/dev/null
    wait "${!pid_var}" 2>/dev/null
}

# ---- several models (models_check.py recomputes what the daemon says of them) ---------------

# models_check ARGS...: models_check.py (hash, entry, bodies, same, same_forecast, flip).
models_check() { "$PY" "$SRC/tests/e2e/models_check.py" "$@"; }

# make_model NAME [SHAPE [SEED]]: a random-weight checkpoint by kronos-mkmodel ($KR_MKMODEL)
# in $WORK/NAME. SHAPE wide (the default), narrow or twin (wide's width, a layer fewer); each
# has its seed. The script ends with a failure if it cannot be made.
make_model() {
    local name=$1 shape=${2:-wide} args
    case $shape in
    wide) args=(--d-model 96 --n-layers 3 --n-heads 4 --ff-dim 160 --seed "${3:-5}") ;;
    narrow) args=(--d-model 48 --n-layers 2 --n-heads 4 --ff-dim 96 --seed "${3:-9}") ;;
    twin) args=(--d-model 96 --n-layers 2 --n-heads 4 --ff-dim 128 --seed "${3:-7}") ;;
    *) fail "make_model: no shape $shape"; summary; exit 1 ;;
    esac
    "${KR_MKMODEL:?KR_MKMODEL names kronos-mkmodel}" --out "$WORK/$name" --preset tiny \
        "${args[@]}" >/dev/null || { fail "kronos-mkmodel $name"; summary; exit 1; }
}

# share_tokenizer FROM TO: TO's tokenizer files replaced by FROM's (the daemon then loads
# one tokenizer for both).
share_tokenizer() { rm -rf "$2/tokenizer" && cp -r "$1/tokenizer" "$2/tokenizer"; }

# make_wide_narrow: models wide and narrow in $WORK, narrow on tiny's tokenizer files (so it
# shares tiny's tokenizer), and models_check's request bodies.
make_wide_narrow() {
    make_model wide
    make_model narrow narrow
    share_tokenizer "$MODEL" "$WORK/narrow"
    models_check bodies "$WORK" "$SRC/tests/data/kline_5min.csv"
}

# model_keys: alice's API key in $WORK/keys and the admin key in $WORK/admin (the files of
# --api-key-file and --admin-key-file); their headers in API and ADMIN, JSON's in JSON.
model_keys() {
    printf 'alice:alice-key-1\n' >"$WORK/keys"
    printf 'ops:admin-key-9\n' >"$WORK/admin"
    API=(-H 'Authorization: Bearer alice-key-1')
    ADMIN=(-H 'Authorization: Bearer admin-key-9')
    JSON=(-H 'Content-Type: application/json')
}

# start_solo ID [ARGS...]: a one-model daemon of model ID (tiny: the test model; another:
# $WORK/ID), the reference a daemon of several models is compared with; URL_solo_ID.
start_solo() {
    local id=$1
    shift
    if [ "$id" = tiny ]; then start_only solo_tiny --model "$MODEL" "$@"
    else start_only "solo_$id" --model "$id=$WORK/$id" "$@"; fi
}

# with_model FILE ID: FILE's body with "model": ID, in $WORK/with.json
with_model() {
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['model']=sys.argv[2]; json.dump(d, open(sys.argv[3],'w'))" \
        "$1" "$2" "$WORK/with.json"
}

# as_solo LABEL ID URL [CURL ARGS...]: model ID's forecast, series forecast, evaluation,
# generation and tokenization on URL (the bodies of models_check bodies, naming ID) answer
# what its one-model daemon (start_solo ID) answers, byte for byte, and name ID.
as_solo() {
    local label=$1 id=$2 url=$3 kind route solo="URL_solo_$2" solo_status
    shift 3
    for kind in forecast series evaluate generate tokenize; do
        route=/$kind
        [ "$kind" = series ] && route=/forecast
        http POST "${!solo}$route" -H 'Content-Type: application/json' -d @"$WORK/$kind.json"
        cp "$BODY" "$WORK/solo.out"
        solo_status=$STATUS
        with_model "$WORK/$kind.json" "$id"
        http POST "$url$route" -H 'Content-Type: application/json' "$@" -d @"$WORK/with.json"
        if [ "$STATUS" = 200 ] && [ "$solo_status" = 200 ] && models_check same "$BODY" "$WORK/solo.out" \
            && jq_ok "d.get('model_ref', d['model'])['id'] == '$id'"; then
            pass "$label: $id $kind as its one-model daemon answers"
        else
            fail "$label: $id $kind" "$STATUS $(head -c 200 "$BODY") / solo $solo_status $(head -c 200 "$WORK/solo.out")"
        fi
    done
}

# wait_job URL ID: polls GET /finetune/ID, with the admin key's headers in ADMIN, until it
# has ended (120 s at most); the answer in $BODY
wait_job() {
    local i
    for i in $(seq 1 600); do
        http GET "$1/finetune/$2" "${ADMIN[@]}"
        [ "$STATUS" = 200 ] || return 1
        jq_ok 'd["state"] in ("done", "failed", "cancelled")' && return 0
        sleep 0.2
    done
    return 1
}
