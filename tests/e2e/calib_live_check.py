"""calib_live_check.py URL CSV N [STATE_OUT]: a live candle session that calibrates itself
(POST /sessions {"calibration": "online"}), recomputed with numpy from its answers alone.

The session is created with the first half of CSV; then N candles of the second half are
appended one at a time, a forecast (horizon 8, 16 paths, its paths returned) made before each.
The online calibration (docs/api.md: a conformal shift per step and level from a window of
scores, adaptive conformal inference of each level, isotonic P(up)) is written again here from
the forecasts' raw paths and P(up) and the closes, and checked against:
  * every forecast's calibrated quantiles and P(up), and "calibrated": true;
  * every append's "anomalies" (the most recent forecast: step 1, its PIT, the bands outside);
  * GET /sessions/{id}'s "calibration": resolved, coverage, pit_ks, brier.
It prints "ok ..." lines, and with STATE_OUT writes the session id and the last forecast's
request and answer for the restart check. Exit 1 on the first mismatch.
"""
import csv
import json
import math
import sys
import urllib.error
import urllib.request

import numpy as np

URL, CSV, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
STATE_OUT = sys.argv[4] if len(sys.argv) > 4 else None
H, S, LEVELS = 8, 16, [0.1, 0.5, 0.9]
GAMMA, WINDOW, WARMUP = 0.005, 250, 20
GRID = np.array([i / 100 for i in range(1, 100)])
G = len(GRID)
AT = {lv: int(round(lv * 100)) - 1 for lv in LEVELS}  # each level's index in the grid
COLS = ["open", "high", "low", "close", "volume", "amount"]


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def near(a, b, tol=1e-6):
    """Within tol of each other, relative: the answers write float32 (paths included, so a PIT
    interpolated between close quantiles is compared to 1e-4 absolute)."""
    return abs(a - b) <= tol * max(abs(a), abs(b))


def near_abs(a, b, tol=1e-4):
    return abs(a - b) <= tol


def c_round(x):  # C's round(): half away from zero
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def conformal_rank(n, tau):
    x = c_round((n + 1) * tau * 1e9) / 1e9
    k = math.floor(x) if tau < 0.5 else math.ceil(x)
    return min(max(k, 1), n)


def linear_quantiles(sorted_row):
    pos = GRID * (S - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, S - 1)
    return sorted_row[lo] + (sorted_row[hi] - sorted_row[lo]) * (pos - lo)


def isotonic(points):
    """PAV of {x: [weight, ups]} in x order, clamped to [1/(n+2), (n+1)/(n+2)]."""
    xs = sorted(points)
    blocks = []  # [weight, sum, count of points]
    for x in xs:
        w, s = points[x]
        blocks.append([w, s, 1])
        while len(blocks) > 1 and blocks[-2][1] * blocks[-1][0] > blocks[-1][1] * blocks[-2][0]:
            w2, s2, c2 = blocks.pop()
            blocks[-1][0] += w2
            blocks[-1][1] += s2
            blocks[-1][2] += c2
    ys = []
    for w, s, c in blocks:
        ys += [s / w] * c
    total = sum(points[x][0] for x in xs)
    lo, hi = 1 / (total + 2), (total + 1) / (total + 2)
    return xs, [min(max(y, lo), hi) for y in ys]


def isotonic_at(xs, ys, p):
    if p <= xs[0]:
        return ys[0]
    if p >= xs[-1]:
        return ys[-1]
    j = int(np.searchsorted(xs, p, side="right")) - 1
    if xs[j] == p:
        return ys[j]
    return ys[j] + (ys[j + 1] - ys[j]) * (p - xs[j]) / (xs[j + 1] - xs[j])


def pit_in_grid(q, y):
    if y < q[0]:
        return GRID[0] / 2
    if y > q[-1]:
        return (1 + GRID[-1]) / 2
    lo = int(np.searchsorted(q, y, side="left"))
    if q[lo] == y:
        end = lo
        while end + 1 < G and q[end + 1] == y:
            end += 1
        return (GRID[lo] + GRID[end]) / 2
    t = (y - q[lo - 1]) / (q[lo] - q[lo - 1])
    return GRID[lo - 1] + (GRID[lo] - GRID[lo - 1]) * t


class Online:
    def __init__(self):
        self.tau = np.tile(GRID, (H, 1))
        self.window = [[] for _ in range(H)]  # arrays of G scores, oldest first
        self.count = [0] * H
        self.shift = np.zeros((H, G))
        self.ups = [dict() for _ in range(H)]
        self.upmap = [([0.0, 1.0], [0.0, 1.0]) for _ in range(H)]
        self.kept = {}  # origin -> forecast
        self.pits, self.within, self.brier = [], 0, 0.0

    def issue(self, origin, last, sorted_paths, p_raw):
        f = {"last": last, "next": 0, "raw": [], "shift": self.shift.copy(), "p_raw": p_raw,
             "aci": [c >= WARMUP for c in self.count], "cal": [], "p_cal": []}
        for h in range(H):
            raw = linear_quantiles(sorted_paths[h])
            f["raw"].append(raw)
            f["cal"].append(np.sort(raw + last * self.shift[h]))
            f["p_cal"].append(isotonic_at(*self.upmap[h], p_raw[h]))
        self.kept[origin] = f
        return f

    def resolve(self, index, y):
        best = None
        for origin in sorted(self.kept):
            f = self.kept[origin]
            h = f["next"]
            if origin + h != index:
                continue
            cal, last = f["cal"][h], f["last"]
            u = pit_in_grid(cal, y)
            self.pits.append(u)
            inside = cal[AT[0.1]] <= y <= cal[AT[0.9]]
            self.within += inside
            up = 1.0 if y > last else 0.0
            self.brier += (f["p_cal"][h] - up) ** 2
            if best is None or h < best[0]:
                best = (h, u, not inside)
            self.learn(f, h, y, up)
            f["next"] += 1
        self.kept = {o: f for o, f in self.kept.items() if f["next"] < H and o + f["next"] > index}
        return best

    def learn(self, f, h, y, up):
        raw, last = f["raw"][h], f["last"]
        self.window[h].append((y - raw) / last)
        if len(self.window[h]) > WINDOW:
            self.window[h].pop(0)
        if f["aci"][h]:
            issued = raw + last * f["shift"][h]
            self.tau[h] += GAMMA * (GRID - (y <= issued).astype(float))
        self.count[h] += 1
        w = self.ups[h].setdefault(f["p_raw"][h], [0.0, 0.0])
        w[0] += 1
        w[1] += up
        if self.count[h] < WARMUP:
            return
        scores = np.sort(np.array(self.window[h]), axis=0)
        n = len(self.window[h])
        for g in range(G):
            self.shift[h][g] = scores[conformal_rank(n, self.tau[h][g]) - 1][g]
        self.upmap[h] = isotonic(self.ups[h])


def main():
    with open(CSV) as fh:
        rows = list(csv.DictReader(fh))
    half = len(rows) // 2

    def candles(rs):
        d = {"timestamps": [r["timestamps"] for r in rs]}
        for c in COLS:
            d[c] = [float(r[c]) for r in rs]
        return d

    st, b = call("POST", "/sessions", {"candles": candles(rows[:half]), "calibration": "online"})
    if st != 201:
        fail("create: %d %s" % (st, b[:300]))
    sid = json.loads(b)["session"]
    print("ok   created %s with %d candles, calibration online" % (sid, half))
    model = Online()
    req = {"horizon": H, "samples": S, "seed": 7, "return_paths": True}
    checked_q = checked_a = 0
    for i in range(half, min(half + N, len(rows))):
        st, b = call("POST", "/sessions/%s/forecast" % sid, dict(req, seed=7 + i))
        if st != 200:
            fail("forecast at %d: %d %s" % (i, st, b[:300]))
        ans = json.loads(b)
        if ans.get("calibrated") is not True:
            fail("forecast at %d: not calibrated" % i)
        paths = np.array([p["close"] for p in ans["paths"]])  # [S][H]
        p_raw = ans["raw"]["prob_close_up"]
        f = model.issue(i, float(rows[i - 1]["close"]), np.sort(paths.T, axis=1), p_raw)
        for lv in LEVELS:
            got = ans["quantiles"][str(lv)]["close"]
            for h in range(H):
                if not near(got[h], f["cal"][h][AT[lv]]):
                    fail("forecast at %d, quantile %g step %d: answered %r, numpy %r"
                         % (i, lv, h, got[h], f["cal"][h][AT[lv]]))
                checked_q += 1
        for h in range(H):
            if not near_abs(ans["prob_close_up"][h], f["p_cal"][h], 1e-7):
                fail("forecast at %d, P(up) step %d: answered %r, numpy %r"
                     % (i, h, ans["prob_close_up"][h], f["p_cal"][h]))
        last_req, last_ans = dict(req, seed=7 + i), ans
        st, b = call("POST", "/sessions/%s/candles" % sid, {"candles": candles(rows[i:i + 1])})
        if st != 200:
            fail("append %d: %d %s" % (i, st, b[:300]))
        got = json.loads(b).get("anomalies")
        best = model.resolve(i, float(rows[i]["close"]))
        want_outside = ["0.1-0.9"] if best[2] else []
        if (len(got) != 1 or got[0]["timestamp"] != rows[i]["timestamps"].replace(" ", "T") or got[0]["step"] != 1
                or not near_abs(got[0]["pit"], best[1]) or got[0]["outside"] != want_outside):
            fail("append %d: anomalies %r, numpy step 1 pit %r outside %r"
                 % (i, got, best[1], want_outside))
        checked_a += 1
    print("ok   %d calibrated quantiles and %d P(up) equal numpy's" % (checked_q, N * H))
    print("ok   %d appends' anomalies (step, PIT, bands outside) equal numpy's" % checked_a)
    st, b = call("GET", "/sessions/%s" % sid)
    cal = json.loads(b)["calibration"]
    n = len(model.pits)
    u = np.sort(np.array(model.pits))
    ks = max(np.max(np.arange(1, n + 1) / n - u), np.max(u - np.arange(n) / n))
    cov = model.within / n
    if (cal["mode"] != "online" or cal["resolved"] != n or not near(cal["coverage"]["0.1-0.9"], cov)
            or not near_abs(cal["pit_ks"], ks) or not near(cal["brier"], model.brier / n)):
        fail("GET calibration %r; numpy resolved %d coverage %r pit_ks %r brier %r"
             % (cal, n, cov, ks, model.brier / n))
    print("ok   GET: resolved %d, 0.1-0.9 coverage %.4f, PIT KS %.4f, Brier %.4f equal numpy's"
          % (n, cov, ks, model.brier / n))
    print("coverage %.6f" % cov)
    if STATE_OUT:
        with open(STATE_OUT, "w") as fh:
            json.dump({"session": sid, "request": last_req, "calibration": cal}, fh)


main()
