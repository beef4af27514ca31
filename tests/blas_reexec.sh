#!/usr/bin/env bash
# kronosd on an OpenBLAS that fell back to a generic core (faked by preloading
# fake_corename.so): it re-executes itself once with OPENBLAS_CORETYPE set, saying so in one
# line; with the user's own OPENBLAS_CORETYPE it says and does nothing. Skipped on CPUs
# without AVX2, where Prescott is no worse than what there is.
set -u
kronosd=$1 fake=$2 src=$3
grep -qw avx2 /proc/cpuinfo || { echo "SKIP: no AVX2"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
pass=0 fail=0
check() { if [ "$2" = 0 ]; then echo "ok - $1"; pass=$((pass + 1)); else echo "not ok - $1"; fail=$((fail + 1)); fi; }

req="$src/tests/data/forecast-request.json"
env -u OPENBLAS_CORETYPE LD_PRELOAD="$fake" "$kronosd" forecast --model "$src/tests/data/tiny" \
    "$req" >"$tmp/out" 2>"$tmp/err"
check "the forecast runs after the re-exec" $?
n=$(grep -c "re-executing with OPENBLAS_CORETYPE=" "$tmp/err")
check "one line says what it did ($(head -1 "$tmp/err"))" $([ "$n" = 1 ] && echo 0 || echo 1)
grep -Eq "OPENBLAS_CORETYPE=(SkylakeX|Cooperlake|Haswell|Zen)$" "$tmp/err"
check "it names a core with the CPU's widest vectors" $?
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out"
check "the answer is JSON" $?

OPENBLAS_CORETYPE=Prescott LD_PRELOAD="$fake" "$kronosd" forecast --model "$src/tests/data/tiny" \
    "$req" >"$tmp/out2" 2>"$tmp/err2"
check "the user's OPENBLAS_CORETYPE runs as given" $?
[ ! -s "$tmp/err2" ]
check "and nothing is said about it" $?
strip='import json,sys; d=json.load(open(sys.argv[1])); d.pop("usage"); print(json.dumps(d, sort_keys=True))'
[ "$(python3 -c "$strip" "$tmp/out")" = "$(python3 -c "$strip" "$tmp/out2")" ]
check "the same answer on either core (timings aside)" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
