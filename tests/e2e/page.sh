#!/usr/bin/env bash
# page.sh KRONOSD SRCDIR BUILDDIR — the page at / in a real browser (headless Chromium).
#
# Starts the daemon on a free loopback port, opens /?autorun=1 (which loads the bundled
# example series and runs its forecast), and checks the drawn chart in the DOM Chromium
# dumps: data-state="ready", the context candles, the fan bands, the median, sample paths,
# the volume pane, the model's name and the timing. Then the same page against a daemon with an API key: it must ask
# for the key. A screenshot is kept as BUILDDIR/page.png. Exits 77 (skipped) only when
# chromium is not installed.
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 KRONOSD SRCDIR BUILDDIR" >&2
    exit 2
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "chromium is not installed: skipped (apt-get install chromium)"
    exit 77
fi
KRONOSD=$(realpath "$1")
SRC=$(realpath "$2")
OUT=$(realpath "$3")
# shellcheck source=lib.sh
. "$SRC/tests/e2e/lib.sh"

# browse URL ARGS...: headless Chromium with a throwaway profile, bounded in time. Virtual
# time runs the page's timers and waits for its fetches, so the DOM is dumped once the
# forecast has been drawn.
browse() {
    local url=$1
    shift
    local profile
    profile=$(mktemp -d "$WORK/profile.XXXXXX")
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --user-data-dir="$profile" --window-size=1280,900 \
        --virtual-time-budget=30000 "$@" "$url" 2>>"$WORK/chromium.log"
}

start_daemon A --workers 1
A=$URL_A

http GET "$A/"
if [ "$STATUS" = 200 ] && grep -qi '^content-type: text/html' "$HEADERS" &&
    grep -qi "^content-security-policy: default-src 'none'" "$HEADERS" &&
    ! grep -Eq '(src|href)="(https?:)?//' "$BODY"; then
    pass "GET / is the page, loading nothing from elsewhere"
else
    fail "GET / is the page, loading nothing from elsewhere" "status $STATUS"
fi
http GET "$A/example.csv"
expect "GET /example.csv is the bundled series" 200
[ "$(wc -l <"$BODY")" -eq 401 ] && head -1 "$BODY" | grep -q '^timestamps,open' \
    && pass "the example is a header and 400 candles" || fail "the example is a header and 400 candles"

browse "$A/?autorun=1&horizon=24&samples=8" --dump-dom >"$WORK/dom.html"
if "$PY" - "$WORK/dom.html" <<'PYEOF'
import re, sys
dom = open(sys.argv[1]).read()
state = re.search(r'id="chart" data-state="(\w+)"', dom)
assert state and state.group(1) == "ready", "chart state: %s; error: %s" % (
    state and state.group(1), re.search(r'id="error"[^>]*>([^<]*)<', dom).group(1))
assert dom.count('class="candle"') == 160, "candles drawn: %d" % dom.count('class="candle"')
bands = re.findall(r'data-band="([\d.]+)-([\d.]+)"', dom)
assert bands == [("0.1", "0.9"), ("0.25", "0.75")], bands
assert 'id="median"' in dom and 'id="mean"' in dom
vol = re.search(r'<g id="volume">(.*?)</g>', dom, re.S).group(1)
assert vol.count("<rect") == 160 + 24, "volume bars: %d" % vol.count("<rect")
paths = re.search(r'<g id="paths">(.*?)</g>', dom, re.S).group(1)
assert paths.count("<path") == 5, paths.count("<path")
assert "model: tiny" in dom, "the model's name is not shown"
assert re.search(r"model time <b>\d+ ms</b>", dom), "no timing"
PYEOF
then pass "the page draws the example forecast (candles, fan, median, paths, model, timing)"
else fail "the page draws the example forecast (candles, fan, median, paths, model, timing)"; fi

browse "$A/?autorun=1&horizon=24&samples=8" --screenshot="$OUT/page.png" >/dev/null
[ -s "$OUT/page.png" ] && pass "screenshot: $OUT/page.png" || fail "screenshot: $OUT/page.png"

# the Evaluate view: the walk-forward run of the example (400 candles, lookback 128, horizon
# 8, stride 32: origins 128, 160, ..., 384 -> 9), as one plain answer (stream=0): headless
# Chromium's virtual time does not wait for a streamed body, so the progress events the page
# reads otherwise are tested in e2e-evaluate
browse "$A/?autoevaluate=1&stream=0&context=128&horizon=8&stride=32&samples=4" --dump-dom >"$WORK/dom_eval.html"
if "$PY" - "$WORK/dom_eval.html" <<'PYEOF'
import re, sys
dom = open(sys.argv[1]).read()
state = re.search(r'id="evaluate" class="[^"]*" data-state="(\w+)"', dom)
assert state and state.group(1) == "ready", "evaluate state: %s; error: %s" % (
    state and state.group(1), re.search(r'id="error"[^>]*>([^<]*)<', dom).group(1))
assert dom.count('class="origin"') == 9, "origins drawn: %d" % dom.count('class="origin"')
assert 'id="actual"' in dom, "no actual closes"
assert dom.count('class="step"') == 8, "table rows: %d" % dom.count('class="step"')
pit = re.search(r'<svg[^>]*id="pit-chart"(.*?)</svg>', dom, re.S).group(1)
assert pit.count('class="bar"') == 10, pit.count('class="bar"')
cov = re.search(r'<svg[^>]*id="coverage-chart"(.*?)</svg>', dom, re.S).group(1)
assert cov.count('class="bar"') == 2 and cov.count('class="nominal"') == 2, cov
assert re.search(r"9 origins × 4 samples in \d+ ms", dom), "no summary"
assert '<div id="progress" class="hidden"' in dom, "the progress bar is still shown"
PYEOF
then pass "the Evaluate view draws the walk-forward run (origins, table, PIT, coverage)"
else fail "the Evaluate view draws the walk-forward run (origins, table, PIT, coverage)"; fi
browse "$A/?autoevaluate=1&stream=0&context=128&horizon=8&stride=32&samples=4" --screenshot="$OUT/page-evaluate.png" \
    --window-size=1280,1500 >/dev/null
# calibrated: stride 8 -> 34 origins, warm-up 10 outcomes per step -> the last 24 scored; the
# PIT histogram and coverage raw beside calibrated, the reliability diagram, the table's
# calibrated columns, the note with the scored origins
CAL="$A/?autoevaluate=1&stream=0&context=128&horizon=8&stride=8&samples=4&calibration=rolling&warmup=10"
browse "$CAL" --dump-dom >"$WORK/dom_cal.html"
if "$PY" - "$WORK/dom_cal.html" <<'PYEOF'
import re, sys
dom = open(sys.argv[1]).read()
state = re.search(r'id="evaluate" class="[^"]*" data-state="(\w+)"', dom)
assert state and state.group(1) == "ready", "evaluate state: %s; error: %s" % (
    state and state.group(1), re.search(r'id="error"[^>]*>([^<]*)<', dom).group(1))
pit = re.search(r'<svg[^>]*id="pit-chart"(.*?)</svg>', dom, re.S).group(1)
assert pit.count('class="bar"') == 10 and pit.count('class="bar2"') == 10, pit
cov = re.search(r'<svg[^>]*id="coverage-chart"(.*?)</svg>', dom, re.S).group(1)
assert cov.count('class="bar"') == 2 and cov.count('class="bar2"') == 2, cov
rel = re.search(r'<svg[^>]*id="reliability-chart"(.*?)</svg>', dom, re.S).group(1)
assert 'class="diagonal"' in rel and 'class="rel-raw"' in rel and 'class="rel-cal"' in rel, rel
assert "<th>CRPS calibrated</th>" in dom and "<th>coverage calibrated</th>" in dom, "no table columns"
assert re.search(r"Calibrated \(rolling, no look-ahead\) on 24 of 34 origins", dom), "no note"
PYEOF
then pass "the Evaluate view calibrated: PIT, coverage and reliability raw beside calibrated"
else fail "the Evaluate view calibrated: PIT, coverage and reliability raw beside calibrated"; fi
browse "$CAL" --screenshot="$OUT/page-calibrated.png" --window-size=1280,1800 >/dev/null

# a server error is shown with the server's message
browse "$A/?autorun=1&horizon=0" --dump-dom >"$WORK/dom_err.html"
grep -q 'data-state="error"' "$WORK/dom_err.html" && grep -q 'horizon: must be an integer' "$WORK/dom_err.html" \
    && pass "the page shows the server's error message" \
    || fail "the page shows the server's error message" "$(grep -o 'id="error"[^<]*<' "$WORK/dom_err.html")"

# with an API key the page asks for it
echo "page-test-key" >"$WORK/key"
start_daemon K --workers 1 --api-key-file "$WORK/key"
browse "$URL_K/?autorun=1" --dump-dom >"$WORK/dom_key.html"
grep -q 'data-state="auth"' "$WORK/dom_key.html" && grep -q '<div id="auth" class="">' "$WORK/dom_key.html" \
    && pass "with an API key set, the page asks for it" \
    || fail "with an API key set, the page asks for it" "$(grep -o 'id="chart" data-state="[a-z]*"' "$WORK/dom_key.html")"

summary
