# fair_lib.sh — the set-up the fairness scripts share (fair_bench.sh, fair_eval_bench.sh,
# fair_finetune_bench.sh): SRC, a work folder removed at exit with the daemon in PID stopped,
# MODEL, a random-weight model of Kronos-small's shape when none is given, and start_daemon.
# Source it after setting BUILD and MODEL; $1 names the work folder.
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kronosd-$1.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "$MODEL" ]; then
    MODEL="$WORK/model"
    "$BUILD/kronos-mkmodel" --out "$MODEL" --preset small --seed 1 >/dev/null || exit 1
fi

# Starts kronosd serve on MODEL at 127.0.0.1 (its log in $WORK/d.log) with the flags given, and
# waits for it: PID and port set, or the log shown and exit 1 when it did not start.
start_daemon() {
    "$BUILD/kronosd" serve --model "$MODEL" --host 127.0.0.1 --port 0 --access-log false "$@" \
        >"$WORK/d.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        grep -q "kronosd: ready" "$WORK/d.log" && break
        sleep 0.1
    done
    port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9]*\) .*|\1|p' "$WORK/d.log" | head -1)
    [ -n "$port" ] || { echo "the daemon did not start:"; cat "$WORK/d.log"; exit 1; }
}
