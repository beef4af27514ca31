"""check_util.py — shared by the end-to-end *_check.py scripts: a POST to the daemon, one
printed line per check ("ok ..." or "FAIL ..."), the failures counted, answers cached in
WORK between the parts of one test."""
import json
import math
import urllib.error
import urllib.request

_failed = [0]


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f"\n     {detail}"))
    _failed[0] += not ok


def failed():
    """How many checks failed so far."""
    return _failed[0]


def post(url, body, raw=False, timeout=300):
    """POST body as JSON to url: (status, the answer), its numbers kept as written (strings)
    when raw, to compare bytes."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text, status = r.read().decode(), r.status
    except urllib.error.HTTPError as e:
        text, status = e.read().decode(), e.code
    return status, (json.loads(text, parse_float=str) if raw else json.loads(text))


def cached(work, name, fetch):
    """The answer fetch() gives, kept in WORK/name.json: parts run one process each, and the
    slow answers they share are asked for once per test."""
    path = f"{work}/{name}.json"
    try:
        return json.load(open(path))
    except OSError:
        status, r = fetch()
        if status != 200:
            raise SystemExit(f"FAIL {name}: {status} {r}")
        json.dump(r, open(path, "w"))
        return r


def lin_q(v, taus):
    """numpy's linear quantile rule on v sorted along its last axis, written out (numpy
    arrays: the caller has numpy)."""
    import numpy as np
    n = v.shape[-1]
    pos = np.array(taus) * (n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    return v[..., lo] + (v[..., hi] - v[..., lo]) * (pos - lo)


def rank(n, tau):
    """The conformal rank of level tau among n scores: floor((n + 1) tau) below the median,
    ceil above, within 1..n (the product rounded to 1e-9 first, as the core does)."""
    x = math.floor((n + 1) * tau * 1e9 + 0.5) / 1e9
    k = math.floor(x) if tau < 0.5 else math.ceil(x)
    return min(max(k, 1), n)
