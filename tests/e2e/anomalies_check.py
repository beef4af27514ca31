"""anomalies_check.py URL WORK — the checks of anomalies.sh that read whole answers; needs
numpy. Each answer's "anomalies" recomputed from its by_origin detail (return_origins):

  raw         the origin-steps whose actual close is outside the band's returned quantiles
              (strictly), each with its step (1-based), the actual row's timestamp, the
              share of the returned paths below the actual (ties half), the band's bounds
              and every pair it fell outside of, outermost first; count, checked, rate;
  calibrated  "calibration": "rolling": the same against each scored origin's calibrated
              quantiles; the origins of the warm-up (calibrated quantiles null) not checked;
              the calibrated PIT below the band's lower level where the actual is below its
              lower bound, above the upper level where above;
              every rate 1 - the answer's pooled coverage of the band (raw or calibrated);
  series      each series of the "series" form carries its own flags, recomputed alike.

Prints one line per check ("ok ..." or "FAIL ..."); writes WORK/flagged (the points of every
answer together, for the metrics check); exits 1 when any failed."""
import json
import sys
import urllib.error
import urllib.request

from check_util import check, failed

import numpy as np

URL, WORK = sys.argv[1], sys.argv[2]
DATA = json.load(open(f"{WORK}/series.json"))
FLAGGED = [0, 0]  # points, checked: every answer's


def post(path, body):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


LEVELS = [0.05, 0.1, 0.5, 0.9, 0.95]
PAIRS = [(0.05, 0.95), (0.1, 0.9)]  # outermost first


def key(x):
    return f"{x:g}"


def expected(ev, band, calibrated):
    """The flags of answer ev for band (lo, hi), from its by_origin detail."""
    pts, checked = [], 0
    for o in ev["by_origin"]:
        qs = o["calibrated"]["quantiles"] if calibrated else o["close"]["quantiles"]
        if qs[key(LEVELS[0])][0] is None:  # a warm-up origin: not scored, not checked
            continue
        y = np.array(o["close"]["actual"], dtype=float)
        paths = np.array(o["close"]["paths"], dtype=float)
        for h in range(len(y)):
            checked += 1
            out = [f"{key(lo)}-{key(hi)}" for lo, hi in PAIRS
                   if y[h] < qs[key(lo)][h] or y[h] > qs[key(hi)][h]]
            if f"{key(band[0])}-{key(band[1])}" not in out:
                continue
            below = np.sum(paths[:, h] < y[h]) + 0.5 * np.sum(paths[:, h] == y[h])
            pts.append({"origin": o["origin"], "step": h + 1, "timestamp": o["timestamps"][h],
                        "actual": y[h], "lower": qs[key(band[0])][h],
                        "upper": qs[key(band[1])][h], "outside": out,
                        "share": below / paths.shape[0]})
    return pts, checked


def same_points(ev, band, calibrated, name):
    a = ev["anomalies"]
    pts, checked = expected(ev, band, calibrated)
    FLAGGED[0] += a["count"]
    FLAGGED[1] += a["checked"]
    check(f"{name}: band, calibrated, count, checked, rate",
          a["band"] == f"{key(band[0])}-{key(band[1])}" and a["calibrated"] is calibrated
          and a["count"] == len(pts) == len(a["points"]) and a["checked"] == checked
          and checked > 0 and abs(a["rate"] - len(pts) / checked) <= 1e-6 * len(pts) / checked,
          f"{ {k: v for k, v in a.items() if k != 'points'} } expected {len(pts)} of {checked}")
    ok, bad = True, None
    for got, want in zip(a["points"], pts):
        fields = ("origin", "step", "timestamp", "outside")
        same = all(got[f] == want[f] for f in fields) and all(
            abs(got[f] - want[f]) <= 1e-9 * abs(want[f]) for f in ("actual", "lower", "upper"))
        if calibrated:  # the calibrated PIT is below / above the band's levels as y is
            lo, hi = band
            pit_ok = got["pit"] <= lo if want["actual"] < want["lower"] else got["pit"] >= hi
        else:
            pit_ok = abs(got["pit"] - want["share"]) < 1e-12
        if not (same and pit_ok):
            ok, bad = False, (got, want)
            break
    check(f"{name}: every point as numpy finds it, in origin then step order", ok, str(bad))
    cov = ev["calibrated" if calibrated else "model"]["overall"]["coverage"][a["band"]]
    check(f"{name}: rate = 1 - the band's pooled coverage", abs(a["rate"] - (1 - cov)) < 1e-6,
          (a["rate"], cov))
    return a


BODY = {"candles": DATA, "lookback": 64, "horizon": 4, "stride": 4, "samples": 8, "seed": 5,
        "quantiles": LEVELS, "return_origins": True}

st, raw = post("/evaluate", dict(BODY, anomalies={"band": "0.1-0.9"}))
check("raw: 200", st == 200, str(raw)[:300])
if st == 200:
    a = same_points(raw, (0.1, 0.9), False, "raw 0.1-0.9")
    check("raw: some flagged, not all", 0 < a["count"] < a["checked"], a["count"])
st, raw95 = post("/evaluate", dict(BODY, anomalies={"band": "0.05-0.95"}))
if st == 200:
    same_points(raw95, (0.05, 0.95), False, "raw 0.05-0.95")
    check("the outer band flags no more than the inner",
          raw95["anomalies"]["count"] <= raw["anomalies"]["count"])
    strip = {k: v for k, v in raw95.items() if k not in ("anomalies", "usage")}
    check("the rest of the answer is the answer without anomalies",
          strip == {k: v for k, v in post("/evaluate", BODY)[1].items() if k != "usage"})

st, cal = post("/evaluate", dict(BODY, calibration="rolling", calibration_warmup=10,
                                 anomalies={"band": "0.1-0.9"}))
check("calibrated: 200", st == 200, str(cal)[:300])
if st == 200:
    a = same_points(cal, (0.1, 0.9), True, "calibrated 0.1-0.9")
    skipped = sum(o["calibrated"]["quantiles"]["0.1"][0] is None for o in cal["by_origin"])
    check("calibrated: the warm-up origins are not checked",
          skipped > 0 and a["checked"] == (cal["origins"] - skipped) * 4, (skipped, a["checked"]))

second = dict(DATA, close=[c * 1.01 for c in DATA["close"]])
st, ser = post("/evaluate", {k: v for k, v in dict(BODY, series=[{"candles": DATA},
                                                                 {"candles": second}],
                                                      anomalies={"band": "0.1-0.9"}).items()
                             if k != "candles"})
check("series: 200", st == 200, str(ser)[:300])
if st == 200:
    for i, s in enumerate(ser["series"]):
        same_points(s, (0.1, 0.9), False, f"series[{i}]")
    check("series[0]'s flags are the single series'", ser["series"][0]["anomalies"] == raw["anomalies"])

open(f"{WORK}/flagged", "w").write(f"{FLAGGED[0]} {FLAGGED[1]}\n")
sys.exit(1 if failed() else 0)
