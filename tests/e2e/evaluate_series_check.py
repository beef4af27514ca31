"""evaluate_series_check.py URL CHECK WORK — the checks of evaluate_series.sh that read whole
answers of POST /evaluate with "series" (the bodies are made by evaluate_series.sh in WORK):

  solo     each series' answer equals the single-series /evaluate of that series, number for
           number as written (every field in order) but usage.elapsed_ms, in window mode and
           in live mode, and with calibration; saves the answers;
  numpy    every cross-sectional score recomputed with numpy from the series' by_origin
           detail (Pearson; Spearman with average ranks for ties, written here; hit rate;
           top-k minus bottom-k spread with ties by series index), per origin, per step and
           over every origin and step, for the default k and for cross_section.top_k 3.

Prints one line per check ("ok ..." or "FAIL ..."); exits 1 when any failed."""
import json
import math
import sys
import urllib.error
import urllib.request

from check_util import check, failed

URL, CHECK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]


def post(body, raw=False):
    req = urllib.request.Request(URL + "/evaluate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            text = r.read().decode()
            return r.status, text if raw else json.loads(text)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def exact(text):
    """The JSON with its objects as ordered pairs and its numbers as written."""
    return json.loads(text, object_pairs_hook=list, parse_float=str, parse_int=str)


def drop_elapsed(pairs):
    out = []
    for k, v in pairs:
        if k == "usage":
            v = [(a, b) for a, b in v if a != "elapsed_ms"]
        out.append((k, v))
    return out


BODY = json.load(open(f"{WORK}/series_body.json"))

if CHECK == "solo":
    st, text = post(BODY, raw=True)
    check("the series form answers", st == 200, str(text)[:300])
    if st == 200:
        open(f"{WORK}/series_k_default.json", "w").write(text)
        pairs = dict(exact(text))
        got = pairs["series"]
        check("one answer a series, in order", len(got) == len(BODY["series"]))
        shared = {k: v for k, v in BODY.items() if k != "series"}
        for i, s in enumerate(BODY["series"]):
            st, solo = post(dict(shared, candles=s["candles"]), raw=True)
            same = st == 200 and drop_elapsed(exact(solo)) == drop_elapsed(got[i])
            check(f"series[{i}] = /evaluate of it alone (but elapsed_ms)", same, str(solo)[:200])
    def each_as_alone(body, what, save=None):
        """body's series form answers, and each series' answer is its solo /evaluate; save:
        the name its body and answer are kept under"""
        st, text = post(body, raw=True)
        check(f"the series form {what} answers", st == 200, str(text)[:300])
        if st != 200:
            return []
        if save:
            json.dump(body, open(f"{WORK}/{save}_body.json", "w"))
            open(f"{WORK}/{save}.json", "w").write(text)
        got = dict(exact(text))["series"]
        shared = {k: v for k, v in body.items() if k != "series"}
        for i, s in enumerate(body["series"]):
            st, solo = post(dict(shared, candles=s["candles"]), raw=True)
            same = st == 200 and drop_elapsed(exact(solo)) == drop_elapsed(got[i])
            check(f"{what}: series[{i}] = /evaluate of it alone", same, str(solo)[:200])
        return got

    # live mode: each series grown from its own first window, one after another
    each_as_alone(dict(BODY, series=BODY["series"][:3], mode="live", max_context=96), "in live mode")
    # calibration: every series calibrated from its own history, as alone
    got = each_as_alone(dict(BODY, series=BODY["series"][:2], calibration="rolling",
                             calibration_warmup=2), "with calibration", "series_calibrated")
    for i, g in enumerate(got):
        check(f"with calibration: series[{i}] has its calibration object", "calibration" in dict(g),
              str(g)[:200])
    st, text = post(dict(BODY, cross_section={"top_k": 3}), raw=True)
    check("cross_section.top_k 3 answers", st == 200, str(text)[:300])
    if st == 200:
        open(f"{WORK}/series_k3.json", "w").write(text)

elif CHECK == "numpy":
    import numpy as np

    def ranks(x):
        """Average ranks (1-based), ties sharing the mean of their positions."""
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        xs = x[order]
        a = 0
        while a < len(x):
            b = a + 1
            while b < len(x) and xs[b] == xs[a]:
                b += 1
            r[order[a:b]] = (a + 1 + b) / 2.0
            a = b
        return r

    def pearson(x, y):
        if np.all(x == x[0]) or np.all(y == y[0]):
            return math.nan
        return float(np.corrcoef(x, y)[0, 1])

    def summary(v):
        """mean, sample sd, IR, count of the defined values of v."""
        d = v[~np.isnan(v)]
        m = float(d.mean()) if d.size else math.nan
        sd = float(d.std(ddof=1)) if d.size > 1 else math.nan
        ir = m / sd if sd > 0 else math.nan
        return m, sd, ir, int(d.size)

    def same(a, b):
        a = np.array([math.nan if v is None else v for v in np.ravel(a)], dtype=float)
        b = np.ravel(np.array(b, dtype=float))
        # the answer's reals are float32 (the means too, read here as such): an IC
        # recomputed from them is off by about 5e-8 (a wrong definition is off by far more)
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-7,
                                                       equal_nan=True))

    for name, k_asked in (("series_k_default", None), ("series_k3", 3)):
        ans = json.load(open(f"{WORK}/{name}.json"))
        cs = ans["cross_section"]
        series = ans["series"]
        n = len(series)
        k = k_asked or max(1, n // 5)
        by = [s["by_origin"] for s in series]
        N, P = len(by[0]), ans["series"][0]["horizon"]
        # the closes as sent (the answer writes reals as float32); the mean forecast as
        # written, read as the float32 it is, so that a series scaled by 2 still ties
        close = [np.array(s["candles"]["close"]) for s in BODY["series"]]
        last = np.array([[close[i][o["origin"] - 1] for o in b] for i, b in enumerate(by)])
        last = last[:, :, None]
        actual = np.array([[close[i][o["origin"]:o["origin"] + P] for o in b]
                           for i, b in enumerate(by)])
        mean = np.array([[o["close"]["mean"] for o in b] for b in by], dtype=np.float32)
        mean = mean.astype(float)
        fr, ar = mean / last - 1, actual / last - 1  # series x origins x steps
        ic = np.full((N, P), math.nan)
        ric = np.full((N, P), math.nan)
        hit = np.zeros((N, P))
        spread = np.zeros((N, P))
        ties = 0
        for o in range(N):
            for h in range(P):
                x, y = fr[:, o, h], ar[:, o, h]
                ic[o, h] = pearson(x, y)
                ric[o, h] = pearson(ranks(x), ranks(y))
                ties += len(set(x.tolist())) < n
                hit[o, h] = np.mean(np.sign(x) == np.sign(y))
                order = np.argsort(x, kind="stable")  # ascending, ties by series index
                spread[o, h] = y[order[-k:]].mean() - y[order[:k]].mean()
        tag = f"numpy ({name}): "
        check(tag + "the series are scored together", cs["series"] == n and cs["origins"] == N
              and cs["horizon"] == P and cs["top_k"] == k, str(cs)[:200])
        check(tag + "some ICs are defined and some forecasts tie (not vacuous)",
              cs["ic_count"] > 0 and ties > 0, f"{cs['ic_count']} defined, {ties} with ties")
        check(tag + "by_origin timestamps are the origins'",
              [o["timestamp"] for o in cs["by_origin"]] == [o["timestamp"] for o in by[0]])
        for key, v in (("ic", ic), ("rank_ic", ric), ("hit_rate", hit),
                       ("top_bottom_spread", spread)):
            check(tag + f"by_origin {key}", same([o[key] for o in cs["by_origin"]], v),
                  f"{[o[key] for o in cs['by_origin']][:2]} vs {v[:2]}")
        for key, v in (("ic", ic), ("rank_ic", ric)):
            steps = [summary(v[:, h]) for h in range(P)]
            m, sd, ir, cnt = summary(v.ravel())
            check(tag + f"{key} per step", same(cs[key], [s[0] for s in steps]),
                  f"{cs[key]} vs {steps}")
            check(tag + f"{key}_std, {key}_ir, {key}_count per step",
                  same(cs["per_step"][f"{key}_std"], [s[1] for s in steps])
                  and same(cs["per_step"][f"{key}_ir"], [s[2] for s in steps])
                  and cs["per_step"][f"{key}_count"] == [s[3] for s in steps],
                  f"{cs['per_step']} vs {steps}")
            check(tag + f"{key}_mean, _std, _ir, _count, _undefined over every origin and step",
                  same([cs[f"{key}_mean"], cs[f"{key}_std"], cs[f"{key}_ir"]], [m, sd, ir])
                  and cs[f"{key}_count"] == cnt and cs[f"{key}_undefined"] == N * P - cnt,
                  f"{[cs[f'{key}_mean'], cs[f'{key}_std'], cs[f'{key}_ir'], cs[f'{key}_count']]}"
                  f" vs {[m, sd, ir, cnt]}")
        check(tag + "hit_rate per step", same(cs["hit_rate"], hit.mean(axis=0)),
              f"{cs['hit_rate']} vs {hit.mean(axis=0)}")
        check(tag + "top_bottom_spread per step", same(cs["top_bottom_spread"],
                                                        spread.mean(axis=0)),
              f"{cs['top_bottom_spread']} vs {spread.mean(axis=0)}")

sys.exit(1 if failed() else 0)
