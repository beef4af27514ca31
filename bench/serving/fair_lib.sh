# fair_lib.sh — the set-up the fairness scripts share (fair_bench.sh, fair_eval_bench.sh,
# fair_finetune_bench.sh): SRC, a work folder removed at exit with the daemon in PID stopped,
# and MODEL, a random-weight model of Kronos-small's shape when none is given.
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
