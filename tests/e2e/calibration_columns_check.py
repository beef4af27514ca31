"""calibration_columns_check.py URL CHECK WORK — the checks of calibration_columns.sh
(WORK/series.json: the first 700 candles of the example series, columnar):

  numpy     a rolling walk-forward (lookback 64, horizon 4, stride 4, 8 paths, warm-up 10):
            each origin's open, high and low paths taken from /forecast of its window (its
            close paths must be the evaluation's), then every column's shifts from the
            outcomes before each origin only, its calibrated quantiles, its raw and calibrated
            coverage per band and step and overall, and the fitted object's column shifts;
  bytes     /forecast with the fitted object answers, for each column, the calibrated
            quantiles /evaluate answers for that origin with the object, as written;
  versions  a version 1 object (no columns) calibrates close only and the close as version
            2 does; columns in a version 1 object, a column of the wrong size or a missing
            column are a 400 naming the field.

Prints one line per check ("ok ..." or "FAIL ..."); exits 1 when any failed."""
import copy
import json
import sys

import check_util
from check_util import check, failed, lin_q, rank

URL, CHECK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = json.load(open(f"{WORK}/series.json"))
LEVELS = [0.1, 0.5, 0.9]
COLS = ["open", "high", "low"]
L, P, S = 64, 4, 8
BASE = {"candles": DATA, "lookback": L, "horizon": P, "stride": 4, "samples": S,
        "quantiles": LEVELS}


def post(path, body, raw=False):
    return check_util.post(URL + path, body, raw)


def key(x):
    return repr(x)


def window(o):
    return {k: v[o - L:o] for k, v in DATA.items()}


def rolling():
    return check_util.cached(WORK, "rolling", lambda: post("/evaluate", dict(
        BASE, calibration="rolling", calibration_warmup=10, return_origins=True)))


if CHECK == "numpy":
    import numpy as np

    r = rolling()
    N = r["origins"]
    o = np.array([b["origin"] for b in r["by_origin"]])
    close = np.array(DATA["close"], dtype=float)
    last = close[o - 1]
    f32 = lambda v: np.array(v, dtype=np.float32).astype(float)
    paths = {c: [] for c in COLS + ["close"]}
    for b in r["by_origin"]:
        st, f = post("/forecast", {"candles": window(b["origin"]), "horizon": P, "samples": S,
                                   "return_paths": True,
                                   "future_timestamps": DATA["timestamps"][b["origin"]:b["origin"] + P]})
        for c in paths:
            paths[c].append([p[c] for p in f["paths"]])
    check("numpy: each origin's close paths are the evaluation's (the same forecasts)",
          np.array_equal(f32(paths["close"]), f32([b["close"]["paths"] for b in r["by_origin"]])))
    fine = [i / 100 for i in range(1, 100)]
    grid = sorted(set(fine) | set(LEVELS))
    G = len(grid)
    gi = {g: i for i, g in enumerate(grid)}

    def same32(a, b):
        a, b = np.array(a, dtype=float), np.array(b, dtype=float)
        return bool(np.all(np.isnan(a) == np.isnan(b))
                    and np.all(np.isnan(a) | (np.float32(a) == np.float32(b))))

    warm = r["calibration_warmup"]
    known = np.array([[np.sum(o + h < ok) for ok in o] for h in range(P)])  # [P][N]
    k0 = int(np.argmax(known[P - 1] >= warm))
    check("numpy: scored origins", r["scored_origins"] == N - k0, (r["scored_origins"], N - k0))
    obj = r["calibration"]
    check("numpy: the fitted object is version 2 with columns",
          obj["version"] == 2 and sorted(obj.get("columns", {})) == sorted(COLS))
    lo_i, hi_i = gi[0.1], gi[0.9]
    for c in COLS:
        col = np.array(DATA[c], dtype=float)
        y = np.stack([col[o + h] for h in range(P)], axis=1)  # [N][P]
        srt = np.sort(f32(paths[c]), axis=1)  # [N][S][P]
        raw_grid = lin_q(srt.transpose(0, 2, 1), grid)  # [N][P][G]
        cal = np.full((N, P, G), np.nan)
        fit = np.zeros((P, G))
        for h in range(P):
            E = (y[:, h:h + 1] - raw_grid[:, h, :]) / last[:, None]
            for k in range(k0, N):
                n = known[h][k]
                Es = np.sort(E[:n], axis=0)
                shift = np.array([Es[rank(n, t) - 1, g] for g, t in enumerate(grid)])
                cal[k, h] = np.sort(raw_grid[k, h] + last[k] * shift)
            Es = np.sort(E, axis=0)
            fit[h] = [Es[rank(N, t) - 1, g] for g, t in enumerate(grid)]
        got = np.array([[[np.nan if v is None else v for v in b["calibrated"]["columns"][c][key(l)]]
                         for l in LEVELS] for b in r["by_origin"]], dtype=float)
        want = np.stack([cal[:, :, gi[l]] for l in LEVELS], axis=1)
        check(f"numpy: {c}: every origin's calibrated quantiles, from the outcomes before it only",
              same32(got, want), np.nanmax(np.abs(got - want)))
        check(f"numpy: {c}: the object's shifts (every origin)", same32(obj["columns"][c], fit))
        s = slice(k0, N)
        cov_raw = (raw_grid[s, :, lo_i] <= y[s]) & (y[s] <= raw_grid[s, :, hi_i])
        cov_cal = (cal[s, :, lo_i] <= y[s]) & (y[s] <= cal[s, :, hi_i])
        ans = r["columns"][c]
        for name, cov in (("model_scored", cov_raw), ("calibrated", cov_cal)):
            per = ans[name]["coverage"]["0.1-0.9"]
            all_ = ans[name]["overall"]["coverage"]["0.1-0.9"]
            check(f"numpy: {c}: {name} coverage of 0.1-0.9 per step and overall",
                  np.allclose(per, cov.mean(axis=0), rtol=0, atol=1e-6)
                  and abs(all_ - cov.mean()) <= 1e-6, (per, cov.mean(axis=0), all_, cov.mean()))
        print(f"     {c}: coverage of 0.1-0.9 raw {ans['model_scored']['overall']['coverage']['0.1-0.9']:.3f}"
              f", calibrated {ans['calibrated']['overall']['coverage']['0.1-0.9']:.3f}")
    sys.exit(1 if failed() else 0)

if CHECK == "bytes":
    obj = rolling()["calibration"]
    st, ev = post("/evaluate", dict(BASE, calibration=obj, first_origin=400, last_origin=440,
                                    return_origins=True), raw=True)
    check("/evaluate with the object: 200, columns' coverage answered", st == 200
          and sorted(ev.get("columns", {})) == sorted(COLS), ev)
    for org in ev.get("by_origin", [])[::3]:
        g = org["origin"]
        st, f = post("/forecast", {"candles": window(g), "horizon": P, "samples": S,
                                   "quantiles": LEVELS, "calibration": obj,
                                   "future_timestamps": DATA["timestamps"][g:g + P]}, raw=True)
        cal = org["calibrated"]
        ok = st == 200 and all(f["quantiles"][key(l)][c] == cal["columns"][c][key(l)]
                               for c in COLS for l in LEVELS) \
            and all(f["quantiles"][key(l)]["close"] == cal["quantiles"][key(l)] for l in LEVELS) \
            and all(len(f["raw"]["quantiles"][key(l)]) == 6 for l in LEVELS)
        check(f"/forecast at origin {g}: the evaluation's calibrated open, high, low and close,"
              " same bytes", ok, (f.get("quantiles"), cal))
    sys.exit(1 if failed() else 0)

if CHECK == "versions":
    obj = rolling()["calibration"]
    g = 400
    body = {"candles": window(g), "horizon": P, "samples": S, "quantiles": LEVELS,
            "future_timestamps": DATA["timestamps"][g:g + P]}
    st, f2 = post("/forecast", dict(body, calibration=obj), raw=True)
    v1 = {k: v for k, v in obj.items() if k != "columns"}
    v1["version"] = 1
    st, f1 = post("/forecast", dict(body, calibration=v1), raw=True)
    check("a version 1 object: 200, close only, the close as version 2's",
          st == 200 and all(list(f1["quantiles"][key(l)]) == ["close"]
                            and f1["quantiles"][key(l)]["close"] == f2["quantiles"][key(l)]["close"]
                            for l in LEVELS) and f1["calibration"]["version"] == 1, f1)
    st, e1 = post("/evaluate", dict(BASE, calibration=v1, first_origin=400, last_origin=440))
    check("/evaluate with a version 1 object: 200 without columns",
          st == 200 and "columns" not in e1 and "columns" not in e1["calibration"], e1)

    def refused(what, o, field):
        st, d = post("/forecast", dict(body, calibration=o))
        msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
        check(f"{what}: 400 naming {field}", st == 400 and msg.startswith(field), (st, d))

    bad = copy.deepcopy(obj)
    bad["version"] = 1
    refused("columns in a version 1 object", bad, "calibration.columns")
    bad = copy.deepcopy(obj)
    bad["columns"]["high"][2] = bad["columns"]["high"][2][:-1]
    refused("a column step one short", bad, "calibration.columns.high[2]")
    bad = copy.deepcopy(obj)
    del bad["columns"]["low"]
    refused("a missing column", bad, "calibration.columns.low")
    bad = copy.deepcopy(obj)
    bad["columns"]["volume"] = bad["columns"]["open"]
    refused("a column not calibrated", bad, "calibration.columns")
    sys.exit(1 if failed() else 0)

raise SystemExit(f"unknown check {CHECK}")
