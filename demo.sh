#!/usr/bin/env bash
# Build kronosd, start it with a model, and ask it for a forecast with curl.
#
#   ./demo.sh                 # a random-weight demo model (Kronos-small's shape)
#   ./demo.sh MODEL_DIR       # a real checkpoint: MODEL_DIR/tokenizer and MODEL_DIR/predictor
#
# The demo model is made by the project's own tool, kronos-mkmodel: its weights are random,
# so its forecasts mean nothing. It shows the service working, not a prediction.
set -euo pipefail
cd "$(dirname "$0")"
port=${PORT:-8080}

[ -d build ] || meson setup build --buildtype=release >/dev/null
ninja -C build >/dev/null

model=${1:-}
if [ -z "$model" ]; then
    model=build/demo-model
    if [ ! -d "$model" ]; then
        echo "no model given: writing a random-weight demo model to $model"
        ./build/kronos-mkmodel --out "$model" --preset small --seed 1
    fi
fi

./build/kronosd serve --model "$model" --port "$port" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.2
done

echo "POST /forecast: 64 five-minute candles in, 16 steps ahead, 8 sample paths out"
curl -s "http://127.0.0.1:$port/forecast" -H 'Content-Type: application/json' \
    -d @<(sed 's/"samples": 1/"samples": 8, "quantiles": [0.1, 0.5, 0.9]/; s/"top_k": 1/"top_k": 0/' \
          tests/data/forecast-request.json)
echo
