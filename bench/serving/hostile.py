"""hostile.py — hostile and careless inputs, once each, with the status each gets
and whether that is the wanted answer; prints status counts. Usage: hostile.py URL.
(Idle connections and upload memory are tests/e2e/idle.py and uploads.py.)"""
import collections
import datetime
import json
import os
import socket
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "e2e"))
import http_call  # noqa: E402

URL = urllib.parse.urlparse(sys.argv[1])
results = []


def call(method, path, body=None, csv=False):
    return http_call.call(URL, method, path, body, csv)


def raw(req):
    s = socket.create_connection((URL.hostname, URL.port), timeout=3)
    s.sendall(req)
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        pass
    s.close()
    return got


def record(point, name, status, ok):
    results.append((point, name, status, ok))


T0 = datetime.datetime(2024, 6, 18, 9, 0)


def rows(n, start=0, zone="Z", step=5):
    return [{"timestamp": (T0 + datetime.timedelta(minutes=step * i)).isoformat() + zone,
             "open": 100.0 + i % 7, "high": 101.0 + i % 7, "low": 99.0 + i % 7,
             "close": 100.5 + i % 5} for i in range(start, start + n)]


def csv(rs, edit=None):
    out = ["timestamps,open,high,low,close"]
    for i, r in enumerate(rs):
        cells = [r["timestamp"]] + [repr(r[k]) for k in ("open", "high", "low", "close")]
        if edit:
            cells = edit(i, cells)
        out.append(",".join(cells))
    return "\n".join(out) + "\n"


# 1. framing: a smuggled GET /model behind each must never be answered
SMUGGLE = b"GET /model HTTP/1.1\r\nHost: x\r\nX-Request-Id: SMUGGLED\r\n\r\n"
for name, head in (("Content-Length : 56", b"Content-Length : 56\r\n"),
                   ("Content-Length\\t: 56", b"Content-Length\t: 56\r\n"),
                   ("obs-fold Content-Length: 0 / 56", b"Content-Length: 0\r\n 56\r\n"),
                   ("obs-fold Content-Length: 0 / \\t56", b"Content-Length: 0\r\n\t56\r\n"),
                   ("Transfer-Encoding : chunked", b"Transfer-Encoding : chunked\r\n"),
                   ("obs-fold Transfer-Encoding: / chunked", b"Transfer-Encoding:\r\n chunked\r\n")):
    got = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n" + SMUGGLE)
    status = int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.1 ") else 0
    record(1, name, status, status == 400 and b"SMUGGLED" not in got and got.count(b"HTTP/1.1 ") == 1)

# 3. session appends compare instants
s, d = call("POST", "/sessions", {"candles": rows(14)})  # ends 10:05Z
s, d = call("POST", f"/sessions/{d['session']}/candles",
            {"candles": [dict(rows(1)[0], timestamp="2024-06-18T12:00:00+05:00")]})
record(3, "session at 10:05Z + 12:00+05:00 (07:00Z)", s, s == 400)
s, d = call("POST", "/sessions", {"candles": rows(14, zone="+05:00")})  # ends 10:05+05:00
s, d = call("POST", f"/sessions/{d['session']}/candles",
            {"candles": [dict(rows(1)[0], timestamp="2024-06-18T05:30:00Z")]})
record(3, "session at 10:05+05:00 + 05:30Z", s, s == 200)

# 4. CSV = JSON: offsets and range
mixed = [dict(r, timestamp=t) for r, t in zip(rows(3), ("2024-06-18T10:00:00+05:00",
                                                        "2024-06-18T10:05:00+05:00",
                                                        "2024-06-18T10:10:00Z"))]
sj, dj = call("POST", "/forecast", {"candles": mixed, "horizon": 1})
sc, dc = call("POST", "/forecast?horizon=1", csv(mixed), True)
record(4, "10:00+05, 10:05+05, 10:10Z: JSON next step", sj, sj == 200 and dj["timestamps"] == ["2024-06-18T15:15:00Z"])
record(4, "10:00+05, 10:05+05, 10:10Z: CSV next step", sc, sc == 200 and dc["timestamps"] == ["2024-06-18T15:15:00Z"])
late = [dict(r) for r in mixed]
late[2]["timestamp"] = "2024-06-18T05:20:00Z"
sj, _ = call("POST", "/forecast", {"candles": late, "horizon": 1})
sc, _ = call("POST", "/forecast?horizon=1", csv(late), True)
record(4, "10:00+05, 10:05+05, 05:20Z: JSON", sj, sj == 200)
record(4, "10:00+05, 10:05+05, 05:20Z: CSV", sc, sc == 200)
s, d = call("POST", "/sessions", {"candles": rows(14)})
sid = d["session"]
s, d = call("POST", f"/sessions/{sid}/candles", csv(rows(2, 20), lambda i, c: [c[0], "1e39"] + c[2:] if i == 0 else c), True)
record(4, "CSV append open=1e39", s, s == 400 and "line 2, column 2" in d["error"]["message"])
s, d = call("POST", f"/sessions/{sid}/candles", {"candles": [dict(rows(1, 20)[0], open=1e39)]})
record(4, "JSON append open=1e39", s, s == 400 and "candles[0].open" in d["error"]["message"])
s, d = call("POST", "/forecast?horizon=2", csv(rows(100), lambda i, c: [c[0], "1e39"] + c[2:] if i == 50 else c), True)
record(4, "CSV /forecast, one 1e39 among 100 rows", s, s == 400 and "line 52, column 2" in d["error"]["message"])

# 5. NUL bytes
s, d = call("POST", "/forecast?horizon=2", csv(rows(4), lambda i, c: [c[0], "10.5\0" "999"] + c[2:] if i == 1 else c), True)
record(5, "CSV cell 10.5\\u0000999", s, s == 400)
s, d = call("POST", "/forecast?horizon=2", csv(rows(4), lambda i, c: ["1718701200\0junk"] + c[1:] if i == 0 else c), True)
record(5, "CSV cell 1718701200\\u0000junk", s, s == 400)
s, d = call("POST", "/forecast?horizon=2%00", csv(rows(4)), True)
record(5, "?horizon=2%00", s, s == 400)

# 7. the smaller points
s, d = call("POST", "/sessions", {"candles": rows(14)})
sid = d["session"]
for path, body in ((f"/sessions/{sid}/forecast?format=csv", {"horizon": 2}),
                   (f"/sessions/{sid}/candles?x=1", {"candles": rows(1, 30)}),
                   ("/generate?format=csv", {"tokens": [[1, 1]], "max_new_tokens": 1}),
                   ("/detokenize?format=csv", {"tokens": [[1, 1]]})):
    s, d = call("POST", path, body)
    record(7, "query parameter on " + path.split("?")[0].replace(sid, "{id}"), s,
           s == 400 and "query parameter" in d["error"]["message"])
s, d = call("POST", "/forecast", {"candles": rows(4), "horizon": 2, "max_context": 0})
record(7, "max_context 0", s, s == 400)
s, d = call("GET", f"/sessions/{sid}")
record(7, "GET candle session: capacity", s, s == 200 and d["capacity"] > 0)
s, d = call("POST", "/forecast", {"candles": rows(64), "horizon": 400, "samples": 64, "timeout_ms": 100})
record(7, "504 message", s, s == 504 and "forecast: forecast" not in d["error"]["message"])

for point, name, status, ok in results:
    print(f"  point {point}  {status:3d}  {'ok  ' if ok else 'NOT '} {name}")
counts = collections.Counter(st for _, _, st, _ in results)
print(f"{len(results)} requests: statuses " +
      ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) +
      f"; {sum(ok for *_, ok in results)} as wanted, {sum(not ok for *_, ok in results)} not")
