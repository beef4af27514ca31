#!/usr/bin/env bash
# The same forecast request with the same seed gives the same answer whatever the number
# of threads: kronosd forecast on a random mini-size model, sampled paths, quantiles, run
# with 1, 2 and 4 threads; the responses (less their timings) must be identical.
set -u
kronosd=$1 mkmodel=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$mkmodel" --out "$tmp/model" --preset mini --seed 5 >/dev/null || { echo "mkmodel failed"; exit 1; }
python3 - "$src/tests/data/forecast-request.json" "$tmp/req.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r.update(samples=12, top_k=0, top_p=0.9, temperature=1.0, seed=7, return_paths=True,
         quantiles=[0.1, 0.5, 0.9])
json.dump(r, open(sys.argv[2], "w"))
PY
pass=0 fail=0
for threads in 1 2 4; do
    KRONOS_THREADS=$threads "$kronosd" forecast --model "$tmp/model" "$tmp/req.json" --compact \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("usage"); print(json.dumps(d, sort_keys=True))' \
        > "$tmp/out.$threads" || { echo "forecast with $threads threads failed"; fail=$((fail+1)); continue; }
done
for threads in 2 4; do
    if cmp -s "$tmp/out.1" "$tmp/out.$threads"; then
        echo "ok: $threads threads = 1 thread"; pass=$((pass+1))
    else
        echo "FAIL: $threads threads differ from 1 thread"; fail=$((fail+1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
