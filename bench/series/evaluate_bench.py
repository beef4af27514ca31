#!/usr/bin/env python3
"""evaluate_bench.py URL CSV [--n 1200 --lookback 256 --horizon 8 --stride 24 --samples 16]
                   [--no-live]

The walk-forward figures against a running kronosd (README "Walk-forward evaluation"): the
first n candles of CSV evaluated in one POST /evaluate (window mode, then live mode), and
the same origins sent as sequential POST /forecast requests (each checked equal to its
origin in mean and quantiles). Prints one JSON line per run: wall seconds, the answer's
elapsed_ms and GFLOP, and GFLOP/s."""
import argparse
import csv
import json
import os
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("csv")
ap.add_argument("--n", type=int, default=1200)
ap.add_argument("--lookback", type=int, default=256)
ap.add_argument("--horizon", type=int, default=8)
ap.add_argument("--stride", type=int, default=24)
ap.add_argument("--samples", type=int, default=16)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--no-live", action="store_true", help="skip the live-mode run")
ap.add_argument("--pid", type=int, help="the daemon's pid: report its CPU seconds per run too")
a = ap.parse_args()

rows = list(csv.DictReader(open(a.csv)))[:a.n]
candles = {"timestamps": [r["timestamps"] for r in rows]}
for k in ("open", "high", "low", "close", "volume", "amount"):
    candles[k] = [float(r[k]) for r in rows]


def cpu():
    """The daemon's CPU seconds so far (user + system), or 0 without --pid: on a shared
    machine a fairer measure than wall time."""
    if not a.pid:
        return 0.0
    f = open(f"/proc/{a.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def post(path, body):
    req = urllib.request.Request(a.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.load(r)


common = {"samples": a.samples, "seed": a.seed, "quantiles": [0.1, 0.5, 0.9]}
body = dict(common, candles=candles, lookback=a.lookback, horizon=a.horizon, stride=a.stride,
            return_origins=True)
for mode in ("window",) if a.no_live else ("window", "live"):
    t0, c0 = time.perf_counter(), cpu()
    ev = post("/evaluate", dict(body, mode=mode))
    wall, cpu_s = time.perf_counter() - t0, cpu() - c0
    if mode == "window":
        window = ev
    u = ev["usage"]
    print(json.dumps({"run": f"/evaluate {mode}", "origins": ev["origins"], "seconds": round(wall, 3),
                      "cpu_seconds": round(cpu_s, 2), "elapsed_ms": round(u["elapsed_ms"], 1), "planned_gflop": round(u["planned_gflop"], 2),
                      "crps_skill_vs_random_walk": ev["skill"]["random_walk"]["overall"]["crps"]}))

t0, c0 = time.perf_counter(), cpu()
same = True
for o in window["by_origin"]:
    i = o["origin"]
    f = post("/forecast", dict(common, horizon=a.horizon, future_timestamps=o["timestamps"],
                               candles={k: v[i - a.lookback:i] for k, v in candles.items()}))
    same &= f["mean"]["close"] == o["close"]["mean"] and all(
        f["quantiles"][q]["close"] == o["close"]["quantiles"][q] for q in ("0.1", "0.5", "0.9"))
wall, cpu_s = time.perf_counter() - t0, cpu() - c0
print(json.dumps({"run": "sequential /forecast", "origins": len(window["by_origin"]),
                  "seconds": round(wall, 3), "cpu_seconds": round(cpu_s, 2),
                  "same_as_evaluate": same}))
