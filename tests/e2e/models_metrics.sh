#!/usr/bin/env bash
# models_metrics.sh — /metrics step figures by model: a generation on one model moves that
# model's kronosd_model_scheduler_{steps,rows,step_seconds}_total and not the other's; its
# rows are the pairs it appended and generated (counted here from the request) and the
# scheduler's rows over all models; its steps are within the scheduler's; its seconds grow.
# Usage: KR_MKMODEL=PATH models_metrics.sh KRONOSD SRC_DIR
set -uo pipefail
KRONOSD=$1
SRC=$2
. "$SRC/tests/e2e/lib.sh"

make_model wide
N_APPEND=24
N_NEW=6
"$PY" - "$WORK" "$N_APPEND" "$N_NEW" <<'PYEOF'
import json, sys
w, a, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stamps = [[5 * (i % 12), 9 + i // 12, 1, 3, 6] for i in range(a + n)]
tokens = [[(i * 37) % 1024, (i * 91) % 1024] for i in range(a)]
body = {"tokens": tokens, "stamps": stamps[:a], "max_new_tokens": n,
        "future_stamps": stamps[a:], "seed": 2}
json.dump(dict(body, model="wide"), open(f"{w}/gen_wide.json", "w"))
json.dump(body, open(f"{w}/gen_tiny.json", "w"))
PYEOF
start_daemon m --workers 1 --model "wide=$WORK/wide"

# snap NAME: every figure now, as NAME_<key>
snap() {
    local t
    t=$(curl -sS -m 10 "$URL_m/metrics")
    local k
    for k in steps rows step_seconds; do
        for id in tiny wide; do
            printf -v "${1}_${k}_${id}" '%s' \
                "$(awk -v n="kronosd_model_scheduler_${k}_total{model=\"$id\"}" '$1 == n { print $2 }' <<<"$t")"
        done
    done
    printf -v "${1}_all_rows" '%s' "$(awk '$1 == "kronosd_scheduler_rows_total" { print $2 }' <<<"$t")"
    printf -v "${1}_all_steps" '%s' "$(awk '$1 == "kronosd_scheduler_steps_total" { print $2 }' <<<"$t")"
}
snap s0
[ "$s0_rows_tiny" = 0 ] && [ "$s0_rows_wide" = 0 ] && [ "$s0_steps_wide" = 0 ] \
    && [ "$s0_step_seconds_wide" = 0.000000 ] \
    && pass "before any request: every model's step figures are 0, listed by id" \
    || fail "the figures before" "tiny rows '$s0_rows_tiny', wide rows '$s0_rows_wide' steps '$s0_steps_wide' s '$s0_step_seconds_wide'"

# check WHO OTHER BEFORE AFTER: WHO's figures moved by one generation, OTHER's did not
check() {
    local who=$1 other=$2 b=$3 a=$4
    local v
    v() { local n="${1}_${2}"; echo "${!n}"; }
    "$PY" - "$N_APPEND" "$N_NEW" \
        "$(v "$b" "rows_$who")" "$(v "$a" "rows_$who")" "$(v "$b" "steps_$who")" "$(v "$a" "steps_$who")" \
        "$(v "$b" "step_seconds_$who")" "$(v "$a" "step_seconds_$who")" \
        "$(v "$b" "rows_$other")" "$(v "$a" "rows_$other")" "$(v "$b" "steps_$other")" "$(v "$a" "steps_$other")" \
        "$(v "$b" "step_seconds_$other")" "$(v "$a" "step_seconds_$other")" \
        "$(v "$b" all_rows)" "$(v "$a" all_rows)" "$(v "$b" all_steps)" "$(v "$a" all_steps)" <<'PYEOF'
import sys
a, n = int(sys.argv[1]), int(sys.argv[2])
x = [float(v) for v in sys.argv[3:]]
rows, steps, secs = x[1] - x[0], x[3] - x[2], x[5] - x[4]
o_rows, o_steps, o_secs = x[7] - x[6], x[9] - x[8], x[11] - x[10]
all_rows, all_steps = x[13] - x[12], x[15] - x[14]
errs = []
if rows != a + n: errs.append(f"rows {rows}, expected {a} appended + {n} generated")
if rows != all_rows: errs.append(f"rows {rows} but the scheduler's {all_rows}")
if not (1 <= steps <= all_steps): errs.append(f"steps {steps} not in 1..{all_steps}")
if not secs > 0: errs.append(f"seconds {secs}")
if (o_rows, o_steps, o_secs) != (0, 0, 0): errs.append(f"the other model moved: {o_rows} {o_steps} {o_secs}")
print("; ".join(errs))
sys.exit(1 if errs else 0)
PYEOF
}
http POST "$URL_m/generate" -H 'Content-Type: application/json' --data-binary @"$WORK/gen_wide.json"
expect "a generation on wide" 200 'd["model"]["id"] == "wide" and len(d["tokens"]) == '"$N_NEW"
snap s1
out=$(check wide tiny s0 s1) && pass "wide's steps, rows (appended + generated) and seconds moved; tiny's did not" \
    || fail "wide's figures" "$out"
http POST "$URL_m/generate" -H 'Content-Type: application/json' --data-binary @"$WORK/gen_tiny.json"
expect "a generation on tiny (the default)" 200 'd["model"]["id"] == "tiny"'
snap s2
out=$(check tiny wide s1 s2) && pass "tiny's figures moved; wide's did not" || fail "tiny's figures" "$out"
summary
