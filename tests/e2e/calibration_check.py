"""calibration_check.py URL CHECK WORK — the checks of calibration.sh that read whole answers
(WORK/series.json: the whole example series, columnar):

  targets   a rolling walk-forward over the whole series (lookback 128, horizon 8, stride 4,
            16 paths): every symmetric band's calibrated coverage pooled over steps within
            0.05 of its level, the PIT KS distance at most half the raw one, CRPS within 2% of
            the raw, Brier no worse; then an object fitted on the first half applied unchanged
            to the second half's origins covers within 0.10 of each level;
  numpy     every calibrated number of the rolling answer recomputed with numpy from its
            by_origin paths and the candles: each origin's calibrated quantiles and P(up)
            from the outcomes before it only, the scores, histograms, KS distances,
            reliability and the fitted object (run by a Python that has numpy);
  bytes     /forecast with an object is, number for number as written, the calibrated
            close /evaluate answers for that origin with the object; so are a "series"
            item and a candle session's forecast;
  refusals  malformed and mismatched objects: 400 naming the field.

Prints one line per check ("ok ..." or "FAIL ..."); exits 1 when any failed."""
import json
import sys

import check_util
from check_util import check, failed, lin_q, rank

URL, CHECK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = json.load(open(f"{WORK}/series.json"))
LEVELS = [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95]
BASE = {"candles": DATA, "lookback": 128, "horizon": 8, "stride": 4, "samples": 16,
        "quantiles": LEVELS}


def post(path, body, raw=False):
    return check_util.post(URL + path, body, raw)


def bands(levels):
    return [(lo, hi) for lo in levels for hi in levels if lo < hi and abs(lo + hi - 1) < 1e-9]


def key(x):
    return repr(x)  # the shortest decimal, as the answer's keys are written


def cached(name, body):
    """The rolling answers are shared by targets and numpy (one run each per test)."""
    return check_util.cached(WORK, name, lambda: post("/evaluate", body))


def rolling():
    return cached("rolling", dict(BASE, calibration="rolling", return_origins=True))


if CHECK == "targets":
    r = rolling()
    raw, cal = r["model_scored"]["overall"], r["calibrated"]["overall"]
    print(f"     origins {r['origins']}, scored {r['scored_origins']} from origin "
          f"{r['first_scored_origin']} (warm-up {r['calibration_warmup']} outcomes per step)")
    for lo, hi in bands(LEVELS):
        k = f"{key(lo)}-{key(hi)}"
        print(f"     coverage {k}: raw {raw['coverage'][k]:.3f}  calibrated "
              f"{cal['coverage'][k]:.3f}  nominal {hi - lo:.2f}")
        check(f"rolling: {k} covers within 0.05 of {hi - lo:.2f}",
              abs(cal["coverage"][k] - (hi - lo)) <= 0.05, cal["coverage"][k])
    ks = r["pit_ks"]
    print(f"     PIT KS: raw {ks['model_scored']:.4f} (all origins {ks['model']:.4f}), "
          f"calibrated {ks['calibrated']:.4f}")
    check("rolling: PIT KS at most half the raw", ks["calibrated"] <= ks["model_scored"] / 2, ks)
    print(f"     CRPS: raw ensemble {raw['crps']:.5f}, raw quantile form "
          f"{raw['crps_quantile']:.5f}, calibrated {cal['crps']:.5f}")
    check("rolling: CRPS no worse than raw by more than 2% (either raw form)",
          cal["crps"] <= 1.02 * min(raw["crps"], raw["crps_quantile"]), (cal, raw))
    print(f"     Brier: raw {raw['brier']:.4f}, calibrated {cal['brier']:.4f}")
    check("rolling: Brier no worse than raw", cal["brier"] <= raw["brier"], (cal, raw))
    print(f"     calibrated PIT histogram {[round(x, 3) for x in r['calibrated_pit_histogram']]}")
    # the first half's object on the second half
    n = len(DATA["close"])
    half = (n - 8) // 2
    first = cached("first_half", dict(BASE, calibration="rolling", last_origin=half))
    obj = first["calibration"]
    status, second = post("/evaluate", dict(BASE, calibration=obj, first_origin=half + 4))
    check("the first half's object applied to the second half: 200", status == 200, second)
    if status == 200:
        check("given: every origin scored", second["scored_origins"] == second["origins"])
        check("given: the object applied is answered unchanged", second["calibration"] == obj)
        c2, r2 = second["calibrated"]["overall"], second["model"]["overall"]
        print(f"     second half ({second['origins']} origins, object of {obj['origins']}):")
        for lo, hi in bands(LEVELS):
            k = f"{key(lo)}-{key(hi)}"
            print(f"       {k}: raw {r2['coverage'][k]:.3f}  calibrated {c2['coverage'][k]:.3f}")
            check(f"second half: {k} covers within 0.10 of {hi - lo:.2f}",
                  abs(c2["coverage"][k] - (hi - lo)) <= 0.10, c2["coverage"][k])
    sys.exit(1 if failed() else 0)

if CHECK == "numpy":
    import numpy as np

    r = rolling()
    N, P, S = r["origins"], r["horizon"], r["samples"]
    close = np.array(DATA["close"], dtype=float)
    o = np.array([b["origin"] for b in r["by_origin"]])
    last = close[o - 1]
    y = np.stack([close[o + h] for h in range(P)], axis=1)  # [N][P]
    # paths and means are float32 values (the model's), written as the shortest decimal that
    # reads back as that float32: read back as float32, exactly the server's
    f32 = lambda v: np.array(v, dtype=np.float32).astype(float)
    paths = np.sort(f32([b["close"]["paths"] for b in r["by_origin"]]), axis=1)
    p_raw = np.array([b["prob_close_up"] for b in r["by_origin"]], dtype=float)
    mean = f32([b["close"]["mean"] for b in r["by_origin"]])
    fine = [i / 100 for i in range(1, 100)]
    grid = sorted(set(fine) | set(LEVELS))
    G = len(grid)
    is_fine = np.array([g in fine for g in grid])
    gi = {g: i for i, g in enumerate(grid)}

    raw_grid = lin_q(paths.transpose(0, 2, 1), grid)  # [N][P][G]

    def pav(w, s):
        blocks = []  # [weight, sum, count]
        for wi, si in zip(w, s):
            blocks.append([wi, si, 1])
            while len(blocks) > 1 and blocks[-2][1] / blocks[-2][0] > blocks[-1][1] / blocks[-1][0]:
                b = blocks.pop()
                blocks[-1] = [blocks[-1][0] + b[0], blocks[-1][1] + b[1], blocks[-1][2] + b[2]]
        return np.concatenate([[b[1] / b[0]] * b[2] for b in blocks])

    def iso_fit(x, up):
        xs, inv = np.unique(x, return_inverse=True)
        w = np.bincount(inv).astype(float)
        s = np.bincount(inv, weights=up.astype(float))
        n = len(x)
        return xs, np.clip(pav(w, s), 1 / (n + 2), (n + 1) / (n + 2))

    def pit_in(q, u):
        if u < q[0]:
            return grid[0] / 2
        if u > q[-1]:
            return (1 + grid[-1]) / 2
        eq = np.nonzero(q == u)[0]
        if len(eq):
            return (grid[eq[0]] + grid[eq[-1]]) / 2
        i = np.searchsorted(q, u)  # q[i-1] < u < q[i]
        return grid[i - 1] + (grid[i] - grid[i - 1]) * (u - q[i - 1]) / (q[i] - q[i - 1])

    def ks(u):
        u = np.sort(np.asarray(u))
        n = len(u)
        i = np.arange(n)
        return max(np.max((i + 1) / n - u), np.max(u - i / n))

    warm = r["calibration_warmup"]
    known = np.array([[np.sum(o + h < ok) for ok in o] for h in range(P)])  # [P][N]
    k0 = int(np.argmax(known[P - 1] >= warm)) if np.any(known[P - 1] >= warm) else N
    check("numpy: scored origins", r["scored_origins"] == N - k0
          and r["first_scored_origin"] == int(o[k0]), (r["scored_origins"], N - k0))
    cal_q = np.full((N, P, G), np.nan)
    cal_p = np.full((N, P), np.nan)
    fit_shift = np.zeros((P, G))
    fit_up = []
    for h in range(P):
        E = (y[:, h:h + 1] - raw_grid[:, h, :]) / last[:, None]  # [N][G]
        for k in range(k0, N):
            n = known[h][k]
            Es = np.sort(E[:n], axis=0)
            shift = np.array([Es[rank(n, t) - 1, g] for g, t in enumerate(grid)])
            cal_q[k, h] = np.sort(raw_grid[k, h] + last[k] * shift)
            xs, ys = iso_fit(p_raw[:n, h], y[:n, h] > last[:n])
            cal_p[k, h] = np.interp(p_raw[k, h], xs, ys)
        Es = np.sort(E, axis=0)
        fit_shift[h] = [Es[rank(N, t) - 1, g] for g, t in enumerate(grid)]
        fit_up.append(iso_fit(p_raw[:, h], y[:, h] > last))

    def same32(a, b):  # the answer's numbers are float32: equal there, NaN (null) alike
        a = np.array(a, dtype=float)
        b = np.array(b, dtype=float)
        return bool(np.all(np.isnan(a) == np.isnan(b))
                    and np.all(np.isnan(a) | (np.float32(a) == np.float32(b))))

    def close_to(a, b, rel=2e-6, ab=1e-7):
        a = np.array(a, dtype=float)
        b = np.array(b, dtype=float)
        same_nan = np.isnan(a) == np.isnan(b)
        ok = np.isnan(a) | (np.abs(a - b) <= ab + rel * np.abs(b))
        return bool(np.all(same_nan) and np.all(ok))

    got_q = np.array([[b["calibrated"]["quantiles"][key(l)] if b["calibrated"]["quantiles"][key(l)][0]
                       is not None else [np.nan] * P for l in LEVELS] for b in r["by_origin"]],
                     dtype=float)  # [N][Q][P]
    want_q = np.stack([cal_q[:, :, gi[l]] for l in LEVELS], axis=1)
    check("numpy: every origin's calibrated quantiles, from the outcomes before it only",
          same32(got_q, want_q), np.nanmax(np.abs(got_q - want_q)))
    got_p = np.array([[np.nan if v is None else v for v in b["calibrated"]["prob_close_up"]]
                      for b in r["by_origin"]])
    check("numpy: every origin's calibrated P(up) (isotonic on the earlier outcomes)",
          same32(got_p, cal_p), np.nanmax(np.abs(got_p - cal_p)))
    obj = r["calibration"]
    check("numpy: the object's grid", obj["grid"] == grid and obj["quantiles"] == LEVELS)
    check("numpy: the object's shifts (every origin)",
          same32([s["shift"] for s in obj["steps"]], fit_shift))
    check("numpy: the object's P(up) points",
          all(same32(s["up_x"], fx) and same32(s["up_y"], fy)
              for s, (fx, fy) in zip(obj["steps"], fit_up)))
    check("numpy: the object's origins and sizes", obj["origins"] == N and obj["horizon"] == P
          and obj["samples"] == S and obj["version"] == 2)

    # the scores on the scored origins
    sc = slice(k0, N)
    yy, ll = y[sc], last[sc][:, None]
    fq = cal_q[sc][:, :, is_fine]
    point = fq.mean(axis=2)
    fl = np.array(fine)
    d = yy[:, :, None] - fq
    crps_c = 2 * np.mean(np.where(d >= 0, fl * d, (fl - 1) * d), axis=2)
    rq = raw_grid[sc][:, :, is_fine]
    d = yy[:, :, None] - rq
    crps_rq = 2 * np.mean(np.where(d >= 0, fl * d, (fl - 1) * d), axis=2)
    X = paths[sc].transpose(0, 2, 1)  # [n][P][S]
    crps_ens = (np.mean(np.abs(X - yy[:, :, None]), axis=2)
                - np.mean(np.abs(X[:, :, :, None] - X[:, :, None, :]), axis=(2, 3)) / 2)
    pc = cal_p[sc]
    pr = p_raw[sc]
    up = (yy > ll).astype(float)

    def metrics(pt, p, crps):
        out = {}
        e = pt - yy
        for name, v in (("mae", np.abs(e)), ("rmse", e * e), ("mape", 100 * np.abs(e / yy)),
                        ("direction_accuracy", (np.sign(pt - ll) == np.sign(yy - ll)) * 1.0),
                        ("brier", (p - up) ** 2), ("crps", crps)):
            step, allv = v.mean(axis=0), v.mean()
            if name == "rmse":
                step, allv = np.sqrt(step), np.sqrt(allv)
            out[name] = (step, allv)
        return out

    for name, pt, p, crps in (("calibrated", point, pc, crps_c),
                              ("model_scored", mean[sc], pr, crps_ens)):
        got = r[name]
        for m, (step, allv) in metrics(pt, p, crps).items():
            check(f"numpy: {name} {m}", close_to(got[m], step, 1e-5)
                  and close_to(got["overall"][m], allv, 1e-5), (got[m], step.tolist()))
    check("numpy: model_scored crps_quantile", close_to(r["model_scored"]["crps_quantile"],
          crps_rq.mean(axis=0), 1e-5) and close_to(r["model_scored"]["overall"]["crps_quantile"],
                                                   crps_rq.mean(), 1e-5))
    raw_q = lin_q(X, LEVELS)  # [n][P][Q]
    for lo, hi in bands(LEVELS):
        k = f"{key(lo)}-{key(hi)}"
        cov_c = (cal_q[sc][:, :, gi[lo]] <= yy) & (yy <= cal_q[sc][:, :, gi[hi]])
        cov_r = (raw_q[:, :, LEVELS.index(lo)] <= yy) & (yy <= raw_q[:, :, LEVELS.index(hi)])
        for name, cov in (("calibrated", cov_c), ("model_scored", cov_r)):
            check(f"numpy: {name} coverage {k} per step and overall",
                  close_to(r[name]["coverage"][k], cov.mean(axis=0), 1e-5)
                  and close_to(r[name]["overall"]["coverage"][k], cov.mean(), 1e-5))
    pit_c = np.array([[pit_in(cal_q[k, h], y[k, h]) for h in range(P)] for k in range(k0, N)])
    hist = np.bincount(np.minimum((pit_c * 10).astype(int), 9).ravel(), minlength=10) / pit_c.size
    check("numpy: calibrated PIT histogram", close_to(r["calibrated_pit_histogram"], hist, 1e-5))
    Xa = paths.transpose(0, 2, 1)
    pit_r = ((Xa < y[:, :, None]).sum(axis=2) + 0.5 * (Xa == y[:, :, None]).sum(axis=2)) / S
    check("numpy: PIT KS distances", close_to(r["pit_ks"]["calibrated"], ks(pit_c.ravel()), 1e-5)
          and close_to(r["pit_ks"]["model"], ks(pit_r.ravel()), 1e-5)
          and close_to(r["pit_ks"]["model_scored"], ks(pit_r[sc].ravel()), 1e-5),
          r["pit_ks"])
    rel = r["reliability"]
    for name, p, yv, lv in (("model", p_raw, y, last[:, None]), ("model_scored", pr, yy, ll),
                            ("calibrated", pc, yy, ll)):
        b = np.minimum(np.floor(p * 10).astype(int), 9).ravel()
        u = (yv > lv).astype(float).ravel()
        cnt = np.bincount(b, minlength=10)
        with np.errstate(invalid="ignore", divide="ignore"):
            mp = np.bincount(b, weights=p.ravel(), minlength=10) / cnt
            ob = np.bincount(b, weights=u, minlength=10) / cnt
        check(f"numpy: reliability of {name}", rel[name]["count"] == cnt.tolist()
              and close_to([np.nan if v is None else v for v in rel[name]["mean_prob"]], mp, 1e-5)
              and close_to([np.nan if v is None else v for v in rel[name]["observed"]], ob, 1e-5))
    sys.exit(1 if failed() else 0)

if CHECK == "bytes":
    n = len(DATA["close"])
    half = (n - 8) // 2
    obj = cached("first_half", dict(BASE, calibration="rolling", last_origin=half))["calibration"]
    st, ev = post("/evaluate", dict(BASE, calibration=obj, first_origin=1400, last_origin=1440,
                                    return_origins=True), raw=True)
    check("/evaluate with the object: 200", st == 200, ev)

    def window(o):
        return {k: v[o - 128:o] for k, v in DATA.items()}

    def same(f, org, what):
        cal = org["calibrated"]
        ok = (f.get("calibrated") is True and f["prob_close_up"] == cal["prob_close_up"]
              and all(f["quantiles"][k]["close"] == cal["quantiles"][k] for k in cal["quantiles"])
              and set(f["quantiles"]) == set(cal["quantiles"])
              and f["raw"]["prob_close_up"] == org["prob_close_up"]
              and all(f["raw"]["quantiles"][k]["close"] == org["close"]["quantiles"][k]
                      for k in org["close"]["quantiles"])
              and "paths" not in f)
        check(f"{what} at origin {org['origin']}: the evaluation's calibrated close, same bytes",
              ok, (f.get("error"), f.get("prob_close_up"), cal["prob_close_up"]))

    for org in ev["by_origin"][::3]:
        o = org["origin"]
        body = {"candles": window(o), "horizon": 8, "samples": 16, "quantiles": LEVELS,
                "future_timestamps": DATA["timestamps"][o:o + 8], "calibration": obj}
        st, f = post("/forecast", body, raw=True)
        same(f, org, "/forecast")
        if o == 1400:
            check("/forecast: says what calibrated it",
                  f["calibration"] == {"version": 2, "model": obj["model"],
                                       "origins": obj["origins"], "methods": obj["methods"]},
                  f.get("calibration"))
            del body["quantiles"]  # the object's levels
            st, f2 = post("/forecast", body, raw=True)
            f2.pop("usage", None)
            check("/forecast without quantiles: the object's levels, the same answer",
                  f2 == {k: v for k, v in f.items() if k != "usage"})
            st, f3 = post("/forecast", dict(body, return_paths=True), raw=True)
            check("/forecast return_paths: paths answered beside the calibrated close",
                  len(f3.get("paths", [])) == 16 and f3["quantiles"] == f["quantiles"])
    orgs = ev["by_origin"][1:3]
    st, s = post("/forecast", {"series": [{"candles": window(g["origin"]), "future_timestamps":
                                           DATA["timestamps"][g["origin"]:g["origin"] + 8]}
                                          for g in orgs],
                               "horizon": 8, "samples": 16, "quantiles": LEVELS,
                               "calibration": obj}, raw=True)
    check("a series request with the object: 200", st == 200, s)
    for f, g in zip(s.get("series", []), orgs):
        same(f, g, "series item")
    g = ev["by_origin"][4]
    st, sess = post("/sessions", {"candles": window(g["origin"])})
    check("a candle session of the origin's window: 201", st == 201, sess)
    st, f = post(f"/sessions/{sess.get('session')}/forecast",
                 {"horizon": 8, "samples": 16, "quantiles": LEVELS, "calibration": obj,
                  "future_timestamps": DATA["timestamps"][g["origin"]:g["origin"] + 8]}, raw=True)
    same(f, g, "session forecast")
    sys.exit(1 if failed() else 0)

if CHECK == "refusals":
    obj = json.load(open(f"{WORK}/first_half.json"))["calibration"]
    w = {k: v[200:328] for k, v in DATA.items()}
    fc = {"candles": w, "horizon": 8, "samples": 16, "quantiles": LEVELS, "calibration": obj}

    def edited(path, value):
        o = json.loads(json.dumps(obj))
        at = o
        for p in path[:-1]:
            at = at[p]
        if value is KeyError:
            del at[path[-1]]
        else:
            at[path[-1]] = value
        return o

    up_x = obj["steps"][0]["up_x"]
    cases = [
        ("another horizon", dict(fc, horizon=4), "calibration.horizon"),
        ("other samples", dict(fc, samples=8), "calibration.samples"),
        ("other levels", dict(fc, quantiles=[0.1, 0.9]), "calibration.quantiles"),
        ("another model", dict(fc, calibration=edited(["model"], "0" * 16)), "calibration.model"),
        ("version 3", dict(fc, calibration=edited(["version"], 3)), "calibration.version"),
        ("a format not ours", dict(fc, calibration=edited(["format"], "x")), "calibration.format"),
        ("no steps", dict(fc, calibration=edited(["steps"], KeyError)), "calibration.steps"),
        ("a short shift", dict(fc, calibration=edited(["steps", 1, "shift"], [0.0] * 3)),
         "calibration.steps[1].shift"),
        ("a shift not a number", dict(fc, calibration=edited(["steps", 0, "shift", 3], "x")),
         "calibration.steps[0].shift[3]"),
        ("up_x not increasing", dict(fc, calibration=edited(["steps", 0, "up_x", 1], up_x[0])),
         "calibration.steps[0].up_x[1]"),
        ("up_y without up_x's length", dict(fc, calibration=edited(["steps", 2, "up_y"], [0.5])),
         "calibration.steps[2].up_y"),
        ("more P(up) points than samples + 1",
         dict(fc, calibration=edited(["steps", 0], {"shift": obj["steps"][0]["shift"],
                                                    "up_x": [i / 40 for i in range(20)],
                                                    "up_y": [i / 40 for i in range(20)]})),
         "calibration.steps[0].up_x"),
        ("a grid level moved", dict(fc, calibration=edited(["grid", 3], 0.035)),
         "calibration.grid[3]"),
        ("an unknown field", dict(fc, calibration=edited(["bins"], 3)), "bins"),
        ("not an object", dict(fc, calibration="rolling"), "calibration"),
    ]
    for name, body, field in cases:
        st, r = post("/forecast", body)
        msg = r.get("error", {}).get("message", "")
        check(f"/forecast, {name}: 400 naming {field}", st == 400 and field in msg, (st, msg))
    ev = dict(BASE, candles={k: v[:400] for k, v in DATA.items()})
    for name, body, field in [
            ("calibration bogus", dict(ev, calibration="bogus"), "calibration"),
            ("calibration 5", dict(ev, calibration=5), "calibration"),
            ("calibration_warmup 0", dict(ev, calibration="rolling", calibration_warmup=0),
             "calibration_warmup"),
            ("calibration_warmup without rolling", dict(ev, calibration_warmup=10),
             "calibration_warmup"),
            ("an object of another horizon", dict(ev, horizon=4, calibration=obj),
             "calibration.horizon"),
            ("an object of other levels", dict(ev, quantiles=[0.1, 0.9], calibration=obj),
             "calibration.quantiles")]:
        st, r = post("/evaluate", body)
        msg = r.get("error", {}).get("message", "")
        check(f"/evaluate, {name}: 400 naming {field}", st == 400 and field in msg, (st, msg))
    st, r = post("/forecast", {"series": [{"candles": w}], "horizon": 4, "samples": 16,
                               "quantiles": LEVELS, "calibration": obj})
    msg = r.get("error", {}).get("message", "")
    check("a series request, another horizon: 400 naming calibration.horizon",
          st == 400 and "calibration.horizon" in msg, (st, msg))
    sys.exit(1 if failed() else 0)

print(f"unknown check {CHECK}")
sys.exit(2)
