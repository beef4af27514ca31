"""evaluate_check.py URL CHECK WORK — the checks of evaluate.sh that read whole answers:

  window   each origin of a window-mode /evaluate equals /forecast of its window, with the
           actual timestamps, in mean, quantiles, prob_close_up and paths (same bytes);
  live     each origin of a live-mode /evaluate equals the forecast of a candle session
           created with the first window and appended up to the origin (max_context 96,
           so the window slides);
  csv      a text/csv body with the fields in the query answers what the JSON body does;
  stream   with Accept: text/event-stream, progress events then the same result; a deadline
           mid-stream ends it with an error event;
  numpy    every score recomputed with numpy from the by_origin detail and the candles
           (run by a Python that has numpy).

Prints one line per check ("ok ..." or "FAIL ..."); exits 1 when any failed."""
import csv
import json
import math
import sys
import urllib.error
import urllib.request

from check_util import check, failed

URL, CHECK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = json.load(open(f"{WORK}/series.json"))


def post(path, body, ctype="application/json", query=""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(URL + path + query, data=data, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def window(a, b):
    return {k: v[a:b] for k, v in DATA.items()}


EVAL = {"candles": DATA, "lookback": 64, "horizon": 4, "stride": 40, "samples": 4, "seed": 3,
        "quantiles": [0.1, 0.25, 0.5, 0.75, 0.9], "return_origins": True}

if CHECK == "window":
    st, ev = post("/evaluate", EVAL)
    check("window /evaluate answers", st == 200 and ev["origins"] == 6, str(ev)[:300])
    for o in ev["by_origin"]:
        i = o["origin"]
        st, f = post("/forecast", {"candles": window(i - 64, i), "horizon": 4, "samples": 4,
                                   "seed": 3, "quantiles": EVAL["quantiles"],
                                   "future_timestamps": o["timestamps"], "return_paths": True})
        same = (st == 200 and f["mean"]["close"] == o["close"]["mean"]
                and all(f["quantiles"][q]["close"] == o["close"]["quantiles"][q]
                        for q in o["close"]["quantiles"])
                and f["prob_close_up"] == o["prob_close_up"]
                and [p["close"] for p in f["paths"]] == o["close"]["paths"]
                and f["timestamps"] == o["timestamps"]
                and o["close"]["actual"] == DATA["close"][i:i + 4]
                and o["close"]["last"] == DATA["close"][i - 1])
        check(f"origin {i} = /forecast of candles[{i - 64}, {i})", same,
              f"{o['close']['mean']} vs {f.get('mean', {}).get('close')}")
    json.dump(ev, open(f"{WORK}/window.out", "w"))

elif CHECK == "live":
    body = dict(EVAL, mode="live", max_context=96)
    st, ev = post("/evaluate", body)
    check("live /evaluate answers", st == 200 and ev["mode"] == "live", str(ev)[:300])
    first = ev["first_origin"]
    st, s = post("/sessions", {"candles": window(first - 64, first)})
    sid = s["session"]
    check("live mode pins the first window's statistics", s["normalization"] == ev["normalization"])
    have = first
    for o in ev["by_origin"]:
        i = o["origin"]
        if i > have:
            post(f"/sessions/{sid}/candles", {"candles": window(have, i)})
            have = i
        st, f = post(f"/sessions/{sid}/forecast",
                     {"horizon": 4, "samples": 4, "seed": 3, "max_context": 96,
                      "quantiles": EVAL["quantiles"], "future_timestamps": o["timestamps"]})
        check(f"live origin {i} = the session's forecast at {i - first + 64} candles",
              st == 200 and f["mean"]["close"] == o["close"]["mean"]
              and f["quantiles"]["0.1"]["close"] == o["close"]["quantiles"]["0.1"],
              f"{o['close']['mean']} vs {f.get('mean', {}).get('close')}")
    check("the live context slid past max_context", have - first + 64 > 96)

elif CHECK == "csv":
    keys = list(DATA)
    rows = [",".join(keys)] + [",".join(str(DATA[k][i]) for k in keys)
                               for i in range(len(DATA["close"]))]
    q = "?lookback=64&horizon=4&stride=40&samples=4&seed=3&quantiles=0.1,0.25,0.5,0.75,0.9"
    st, c = post("/evaluate", ("\n".join(rows) + "\n").encode(), "text/csv", q)
    j = json.load(open(f"{WORK}/window.out"))
    for d in (c, j):
        d.pop("usage", None)
        d.pop("by_origin", None)
    check("a text/csv body with the fields in the query = the JSON body", st == 200 and c == j,
          str(c)[:300])

elif CHECK == "stream":
    req = urllib.request.Request(URL + "/evaluate", data=json.dumps(EVAL).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Accept": "text/event-stream"})
    with urllib.request.urlopen(req, timeout=60) as r:
        ctype = r.headers.get("Content-Type")
        text = r.read().decode()
    events = [(b.split("\n")[0][7:], json.loads(b.split("\n")[1][6:]))
              for b in text.strip().split("\n\n")]
    kinds = [k for k, _ in events]
    check("Accept: text/event-stream answers an event stream", ctype == "text/event-stream",
          str(ctype))
    check("progress events as origins end, then one result",
          kinds == ["progress"] * 6 + ["result"]
          and [d["done"] for _, d in events[:-1]] == list(range(6))
          and all(d["total"] == 6 and d["elapsed_ms"] >= 0 for _, d in events[:-1]), str(kinds))
    j = json.load(open(f"{WORK}/window.out"))
    res = events[-1][1]
    for d in (res, j):
        d.pop("usage", None)
    check("the result event is the JSON answer", res == j, str(res)[:200])
    req = urllib.request.Request(URL + "/evaluate", data=json.dumps(
        dict(EVAL, stride=1, samples=100, horizon=16, timeout_ms=50)).encode(),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    with urllib.request.urlopen(req, timeout=60) as r:
        last = r.read().decode().strip().split("\n\n")[-1].split("\n")
    err = json.loads(last[1][6:])["error"]
    check("a deadline passed mid-stream ends it with an error event (504 deadline_exceeded)",
          last[0] == "event: error" and err["code"] == "deadline_exceeded" and err["status"] == 504,
          str(last))

elif CHECK == "numpy":
    import numpy as np

    ev = json.load(open(f"{WORK}/window.out"))
    close = np.array(DATA["close"], dtype=float)
    P, L = ev["horizon"], ev["lookback"]
    by = ev["by_origin"]
    last = np.array([o["close"]["last"] for o in by])[:, None]
    y = np.array([o["close"]["actual"] for o in by])
    mean = np.array([o["close"]["mean"] for o in by])
    paths = np.array([o["close"]["paths"] for o in by])  # origins x S x P
    prob = np.array([o["prob_close_up"] for o in by])
    qs = {k: np.array([o["close"]["quantiles"][k] for o in by]) for k in by[0]["close"]["quantiles"]}
    crps = (np.abs(paths - y[:, None, :]).mean(axis=1)
            - 0.5 * np.abs(paths[:, :, None, :] - paths[:, None, :, :]).mean(axis=(1, 2)))
    sigma = np.array([np.std(np.diff(np.log(close[o["origin"] - L:o["origin"]]))) for o in by])
    sd = last * sigma[:, None] * np.sqrt(np.arange(1, P + 1))[None, :]
    z = (y - last) / sd
    phi = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    rw_crps = sd * (z * (2 * phi - 1) + 2 * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
                    - 1 / math.sqrt(math.pi))

    def per_step_and_overall(v, rms=False):
        if rms:
            return list(np.sqrt((v ** 2).mean(axis=0))), float(np.sqrt((v ** 2).mean()))
        return list(v.mean(axis=0)), float(v.mean())

    want = {
        ("model", "mae"): per_step_and_overall(np.abs(mean - y)),
        ("model", "rmse"): per_step_and_overall(mean - y, rms=True),
        ("model", "mape"): per_step_and_overall(100 * np.abs((mean - y) / y)),
        ("model", "direction_accuracy"): per_step_and_overall(
            (np.sign(mean - last) == np.sign(y - last)).astype(float)),
        ("model", "brier"): per_step_and_overall((prob - (y > last)) ** 2),
        ("model", "crps"): per_step_and_overall(crps),
        ("persistence", "mae"): per_step_and_overall(np.abs(last - y)),
        ("persistence", "rmse"): per_step_and_overall(last - y + 0 * y, rms=True),
        ("persistence", "crps"): per_step_and_overall(np.abs(last - y)),
        ("random_walk", "mae"): per_step_and_overall(np.abs(last - y)),
        ("random_walk", "brier"): per_step_and_overall(0.25 + 0 * y),
        ("random_walk", "crps"): per_step_and_overall(rw_crps),
    }
    for lo, hi in (("0.1", "0.9"), ("0.25", "0.75")):
        key = f"{lo}-{hi}"
        want[("model", "coverage", key)] = per_step_and_overall(
            ((qs[lo] <= y) & (y <= qs[hi])).astype(float))
        want[("random_walk", "coverage", key)] = per_step_and_overall(
            ((float(lo) <= phi) & (phi <= float(hi))).astype(float))
    for m in ("mae", "crps"):
        for b in ("persistence", "random_walk"):
            ms, mo = want[("model", m)]
            bs, bo = want[(b, m)]
            want[("skill", b, m)] = (list(1 - np.array(ms) / np.array(bs)), 1 - mo / bo)

    def got(key):
        if key[0] == "skill":
            d = ev["skill"][key[1]]
            return d[key[2]], d["overall"][key[2]]
        d = ev[key[0]]
        if key[1] == "coverage":
            return d["coverage"][key[2]], d["overall"]["coverage"][key[2]]
        return d[key[1]], d["overall"][key[1]]

    for key, (steps, overall) in want.items():
        g_steps, g_overall = got(key)
        ok = np.allclose(g_steps + [g_overall], steps + [overall], rtol=2e-6, atol=1e-9)
        check("numpy: " + ".".join(key), ok, f"{g_steps} {g_overall} vs {steps} {overall}")
    u = (paths < y[:, None, :]).mean(axis=1) + 0.5 * (paths == y[:, None, :]).mean(axis=1)
    hist = np.bincount(np.minimum(np.floor(u * 10), 9).astype(int).ravel(), minlength=10) / u.size
    check("numpy: pit_histogram", np.allclose(ev["pit_histogram"], hist, rtol=2e-6),
          f"{ev['pit_histogram']} vs {hist}")

sys.exit(1 if failed() else 0)
