"""journal_full.py — the full-disk steps of tests/e2e/journal.sh.

  journal_full.py fill URL WORK SID           appends WORK/more1.json's candles one at a time
                                              until one is refused; prints "acked status" and
                                              writes the refusal's body to WORK/full.json
  journal_full.py compare URL WORK SID ACKED  exit 0 when the session's forecast equals a
                                              stateless forecast of its 40 + ACKED candles
  journal_full.py one WORK I                  the I-th candle of WORK/more1.json as a body
  journal_full.py creates URL WORK            token sessions created until one is refused;
                                              prints "created status", the body in full.json
  journal_full.py deletes URL WORK ID...      the sessions deleted in turn until one is
                                              refused; prints "deleted status id"
"""
import http.client
import json
import sys
import urllib.parse


def caller(url):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)

    def call(method, path, body=None):
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    return call


def main():
    cmd = sys.argv[1]
    if cmd == "one":
        w, i = sys.argv[2], int(sys.argv[3])
        print(json.dumps({"candles": json.load(open(f"{w}/more1.json"))[i]}))
        return
    call, w = caller(sys.argv[2]), sys.argv[3]
    if cmd == "creates":
        for n in range(1000):
            st, d = call("POST", "/sessions", {})
            if st != 201:
                json.dump(d, open(f"{w}/full.json", "w"))
                print(n, st)
                return
        print(1000, "none")
        return
    if cmd == "deletes":
        for n, sid in enumerate(sys.argv[4:]):
            st, d = call("DELETE", f"/sessions/{sid}")
            if st != 200:
                json.dump(d, open(f"{w}/full.json", "w"))
                print(n, st, sid)
                return
        print(len(sys.argv) - 4, "none", "-")
        return
    sid = sys.argv[4]
    more = json.load(open(f"{w}/more1.json"))
    if cmd == "fill":
        for acked, one in enumerate(more):
            st, d = call("POST", f"/sessions/{sid}/candles", {"candles": one})
            if st != 200:
                json.dump(d, open(f"{w}/full.json", "w"))
                print(acked, st)
                return
        json.dump({}, open(f"{w}/full.json", "w"))
        print(len(more), "none")
    elif cmd == "compare":
        acked = int(sys.argv[5])
        fc = {"horizon": 3, "samples": 2, "seed": 5}
        st, info = call("GET", f"/sessions/{sid}")
        cand = json.load(open(f"{w}/create1.json"))["candles"]
        for one in more[:acked]:
            for k in cand:
                cand[k] += one[k]
        s1, a = call("POST", f"/sessions/{sid}/forecast", fc)
        s2, b = call("POST", "/forecast", {**fc, "candles": cand,
                                           "normalization": info["normalization"]})
        a.pop("usage", None)
        b.pop("usage", None)
        sys.exit(0 if s1 == s2 == 200 and a == b else 1)


main()
