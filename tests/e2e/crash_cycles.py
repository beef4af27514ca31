"""crash_cycles.py — kill -9 under load, restart, check that nothing acknowledged was lost.

  crash_cycles.py KRONOSD MODEL CSV WORK [--cycles N] [--modes always,everysec,no]

For each journal-fsync mode: a daemon with a journal in WORK, and N cycles of: load for a
random 0.4-1.2 s (two clients appending candles to their sessions one at a time, one
generating on a token session, one creating and deleting sessions), kill -9 at a random
moment, restart, then check every acknowledged operation: each candle session holds every
acknowledged candle and at most the one in flight, and forecasts exactly as a stateless
forecast of those candles; the token session holds every acknowledged pair and at most the
generation in flight; every acknowledged creation is there and every acknowledged deletion
is gone. Prints one line a cycle and "P passed, F failed"; exit 1 on any failure. Servers
listen on 127.0.0.1 only; every cycle is bounded in time.
"""
import csv
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

LOAD_S = (0.4, 1.2)
HELD = 8          # sessions the churn holds at once
CANDLES = 100000  # candles a candle session may be given, after its first 40
TOKENS = 480      # pairs a token session holds before the generator takes a new one
FC = {"horizon": 2, "samples": 2, "seed": 9}


class Daemon:
    def __init__(self, kronosd, model, state, mode, log):
        self.args = [kronosd, "serve", "--model", model, "--port", "0", "--state-dir", state,
                     "--journal-fsync", mode, "--node-id", "crash", "--workers", "2"]
        self.log = log

    def start(self):
        out = open(self.log, "w")
        self.p = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            text = open(self.log).read()
            m = re.search(r"listening on http://[^ ]*:(\d+) ", text)
            if m and "kronosd: ready" in text:
                self.port = int(m.group(1))
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"the daemon did not start:\n{open(self.log).read()}")

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def client(self, timeout=30):
        return Client(self.port, timeout)


class Client:
    def __init__(self, port, timeout):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path, body=None):
        self.c.request(method, path, body=json.dumps(body) if body is not None else None,
                       headers={"Content-Type": "application/json"})
        r = self.c.getresponse()
        return r.status, json.loads(r.read() or b"{}")


def candles(rows, hdr, a, b):
    """Candles a..b of an endless series: the CSV's values over and over, every 5 minutes."""
    picked = [rows[i % len(rows)] for i in range(a, b)]
    return {"timestamps": [1700000000 + 300 * i for i in range(a, b)],
            **{n: [float(x[i]) for x in picked] for i, n in enumerate(hdr[1:], 1)}}


class State:
    """What the clients were told was done."""

    def __init__(self):
        self.appended = {}   # candle session -> acknowledged candles (after its first 40)
        self.in_flight = {}  # candle session -> an append sent and not answered
        self.tokens = 0      # acknowledged length of the token session
        self.token_flight = 0
        self.full_tokens = {}  # token sessions filled earlier -> their length
        self.created, self.deleted = set(), set()
        self.deleting = set()  # a DELETE sent and not answered: either way is right
        self.order = []        # the churn's sessions held, oldest first
        self.lock = threading.Lock()


def load(d, st, sids, base, tok, rows, hdr, stop):
    def appender(k):
        c = d.client(5)
        sid = sids[k]
        while not stop.is_set():
            i = base[k] + 40 + st.appended[sid]
            if i >= base[k] + 40 + CANDLES:
                return
            st.in_flight[sid] = True
            try:
                s, _ = c.call("POST", f"/sessions/{sid}/candles",
                              {"candles": candles(rows, hdr, i, i + 1)})
            except Exception:
                return
            if s != 200:
                return
            with st.lock:
                st.appended[sid] += 1
                st.in_flight[sid] = False

    def generator():
        c = d.client(5)
        while not stop.is_set():
            n = st.tokens
            body = {"tokens": [[1, 2]], "stamps": [[0, 9, 0, 3, 6]], "max_new_tokens": 1,
                    "future_stamps": [[5, 9, 0, 3, 6]], "seed": n}
            try:
                if n + 2 > TOKENS:  # full: a new token session, the old one kept as it is
                    s, r = c.call("POST", "/sessions", {})
                    if s != 201:
                        return
                    with st.lock:
                        st.full_tokens[tok[0]] = n
                        tok[0], st.tokens = r["session"], 0
                    continue
                st.token_flight = 2
                s, r = c.call("POST", f"/sessions/{tok[0]}/generate", body)
            except Exception:
                return
            if s != 200:
                return
            st.tokens = r["length"]
            st.token_flight = 0

    def churn():  # creates sessions and deletes the oldest, holding up to HELD
        c = d.client(5)
        while not stop.is_set():
            try:
                s, r = c.call("POST", "/sessions", {})
                if s != 201:
                    return
                with st.lock:
                    st.created.add(r["session"])
                    st.order.append(r["session"])
                    old = st.order.pop(0) if len(st.order) > HELD else None
                    if old:
                        st.created.discard(old)
                        st.deleting.add(old)
                if old and c.call("DELETE", f"/sessions/{old}")[0] == 200:
                    with st.lock:
                        st.deleting.discard(old)
                        st.deleted.add(old)
            except Exception:
                return

    threads = [threading.Thread(target=appender, args=(k,)) for k in range(len(sids))]
    threads += [threading.Thread(target=generator), threading.Thread(target=churn)]
    for t in threads:
        t.start()
    return threads


def check(d, st, sids, base, tok, rows, hdr):
    c = d.client()
    bad = []
    for k, sid in enumerate(sids):
        s, info = c.call("GET", f"/sessions/{sid}")
        n = info.get("length", -1) - 40
        acked = st.appended[sid]
        if s != 200 or not (acked <= n <= acked + (1 if st.in_flight[sid] else 0)):
            bad.append(f"candle session {k}: {s}, {n} appended, {acked} acknowledged")
            continue
        st.appended[sid] = n  # the one in flight, if it landed, is the session's now
        st.in_flight[sid] = False
        s1, a = c.call("POST", f"/sessions/{sid}/forecast", FC)
        s2, b = c.call("POST", "/forecast", {**FC, "candles": candles(rows, hdr, base[k],
                                                                      base[k] + 40 + n),
                                             "normalization": info["normalization"]})
        a.pop("usage", None)
        b.pop("usage", None)
        if s1 != 200 or s2 != 200 or a != b:
            bad.append(f"candle session {k}: its forecast differs from the stateless one")
    for sid, length in sorted(st.full_tokens.items()):
        s, info = c.call("GET", f"/sessions/{sid}")
        if s != 200 or info.get("length") != length:
            bad.append(f"token session {sid}: {s}, {info.get('length')} pairs, {length} acknowledged")
    s, info = c.call("GET", f"/sessions/{tok[0]}")
    n = info.get("length", -1)
    if s != 200 or not (st.tokens <= n <= st.tokens + st.token_flight):
        bad.append(f"token session: {s}, length {n}, {st.tokens} acknowledged")
    else:
        st.tokens = n
        st.token_flight = 0
    for sid in sorted(st.created):
        if c.call("GET", f"/sessions/{sid}")[0] != 200:
            bad.append(f"created session {sid} is gone")
    for sid in sorted(st.deleting):
        (st.created if c.call("GET", f"/sessions/{sid}")[0] == 200 else st.deleted).add(sid)
    st.deleting.clear()
    for sid in sorted(st.deleted):
        if c.call("GET", f"/sessions/{sid}")[0] != 404:
            bad.append(f"deleted session {sid} came back")
    return bad


def run_mode(args, mode, rows, hdr, cycles, rnd):
    state = os.path.join(args["work"], f"state-{mode}")
    shutil.rmtree(state, ignore_errors=True)  # a journal of an earlier run is not this one's
    os.makedirs(args["work"], exist_ok=True)
    d = Daemon(args["kronosd"], args["model"], state, mode,
               os.path.join(args["work"], f"{mode}.log"))
    d.start()
    c = d.client()
    st, sids, base = State(), [], []
    for k in range(2):
        base.append(k * 1000000)
        s, r = c.call("POST", "/sessions", {"candles": candles(rows, hdr, base[k], base[k] + 40)})
        sids.append(r["session"])
        st.appended[r["session"]] = 0
        st.in_flight[r["session"]] = False
    s, r = c.call("POST", "/sessions", {})
    tok = [r["session"]]  # the token session being generated on
    passed = failed = 0
    totals = {"appends": 0, "tokens": 0, "created": 0, "deleted": 0}
    for cycle in range(cycles):
        before = (sum(st.appended.values()), sum(st.full_tokens.values()) + st.tokens,
                  len(st.created), len(st.deleted))
        stop = threading.Event()
        threads = load(d, st, sids, base, tok, rows, hdr, stop)
        time.sleep(rnd.uniform(*LOAD_S))
        d.kill9()
        stop.set()
        for t in threads:
            t.join(10)
        d.start()
        bad = check(d, st, sids, base, tok, rows, hdr)
        after = (sum(st.appended.values()), sum(st.full_tokens.values()) + st.tokens,
                 len(st.created), len(st.deleted))
        for key, b, a in zip(totals, before, after):
            totals[key] += a - b
        verdict = "ok  " if not bad else "FAIL"
        print(f"{verdict} {mode} cycle {cycle + 1}: {after[0] - before[0]} appends, "
              f"{after[1] - before[1]} token pairs, sessions {after[2]} held / {after[3]} "
              f"deleted so far" + ("" if not bad else ": " + "; ".join(bad[:3])), flush=True)
        passed += not bad
        failed += bool(bad)
    d.kill9()
    print(f"     {mode}: {cycles} kill -9 cycles, {totals['appends']} acknowledged appends, "
          f"{totals['tokens']} token pairs, {len(st.created) + len(st.deleted)} creates, "
          f"{len(st.deleted)} deletes", flush=True)
    return passed, failed


def main():
    a = sys.argv[1:]
    if len(a) < 4:
        raise SystemExit(__doc__)
    args = {"kronosd": a[0], "model": a[1], "csv": a[2], "work": a[3]}
    cycles, modes = 2, ["always", "everysec", "no"]
    rest = a[4:]
    for i in range(0, len(rest), 2):
        if rest[i] == "--cycles":
            cycles = int(rest[i + 1])
        elif rest[i] == "--modes":
            modes = rest[i + 1].split(",")
    rows = list(csv.reader(open(args["csv"])))
    hdr, rows = rows[0], rows[1:]
    rnd = random.Random(7)
    passed = failed = 0
    for mode in modes:
        p, f = run_mode(args, mode, rows, hdr, cycles, rnd)
        passed += p
        failed += f
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
