"""waysin.py — one rule for every way in, over HTTP.

The same bad candles sent as a JSON /forecast (columns and rows), a CSV /forecast, a JSON
and a CSV session creation, and a JSON and a CSV session append get the same status and
the same reason after each way's locator; a NUL in a query parameter is refused as in a
CSV cell; a session append compares instants (a new zone offset moves the session to it)
and then forecasts exactly what the stateless /forecast of the same candles does.
Usage: waysin.py URL (a daemon serving the tiny model). Bounded: ~60 requests."""
import datetime
import json
import sys
import urllib.parse

import http_call

URL = urllib.parse.urlparse(sys.argv[1])
passed = failed = 0


def call(method, path, body=None, csv=False):
    return http_call.call(URL, method, path, body, csv)


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + ("\n     " + detail if detail else ""))


def message(d):
    return d.get("error", {}).get("message", "") if isinstance(d, dict) else repr(d)


T0 = datetime.datetime(2024, 6, 18, 9, 0)


def rows(n, start=0, zone="Z"):
    out = []
    for i in range(start, start + n):
        t = (T0 + datetime.timedelta(minutes=5 * i)).isoformat() + zone
        out.append({"timestamp": t, "open": 100 + i % 7, "high": 101 + i % 7,
                    "low": 99 + i % 7, "close": 100.5 + i % 5})
    return out


def columns(rs):
    return {"timestamps": [r["timestamp"] for r in rs],
            **{k: [r[k] for r in rs] for k in ("open", "high", "low", "close")}}


def csv_text(rs, cell=None):
    """CSV of rows; cell(i, key, text) may replace a cell's text."""
    lines = ["timestamps,open,high,low,close"]
    for i, r in enumerate(rs):
        cells = []
        for k in ("timestamp", "open", "high", "low", "close"):
            t = r[k] if k == "timestamp" else repr(r[k])
            cells.append(cell(i, k, t) if cell else t)
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def new_session(n=20):
    s, d = call("POST", "/sessions", {"candles": columns(rows(n))})
    return d["session"] if s == 201 else None


# ---- the table: bad candles, every way in -------------------------------------------
# each: (name, rows edited, reason). The JSON value and the CSV cell carry the same text.
def with_value(i, key, value):
    def edit(rs):
        rs = [dict(r) for r in rs]
        rs[i][key] = value
        return rs
    return edit


BAD = [
    ("open=1e39", with_value(1, "open", 1e39),
     "1e+39 is outside the float32 range the model computes in (magnitude up to 3.40282e+38)"),
    ("close=-5e38", with_value(2, "close", -5e38),
     "-5e+38 is outside the float32 range the model computes in (magnitude up to 3.40282e+38)"),
    ("month 13", with_value(1, "timestamp", "2024-13-01T00:00:00Z"),
     "\"2024-13-01T00:00:00Z\" is not a valid timestamp (month 13 is out of range 1-12)"),
    ("an earlier instant in another zone", with_value(2, "timestamp", "2024-06-18T14:04:00+05:00"),
     "not after the previous timestamp (compared as instants)"),
]


def ways(rs):
    """(way name, method, path, body, csv) for the candles rs, every way in."""
    sid = new_session()
    late = rs  # appended candles must follow the session's last (09:00 + 19*5 min)
    return [
        ("JSON columns /forecast", "/forecast", {"candles": columns(rs), "horizon": 2}, False),
        ("JSON rows /forecast", "/forecast", {"candles": rs, "horizon": 2}, False),
        ("CSV /forecast", "/forecast?horizon=2", csv_text(rs), True),
        ("JSON session create", "/sessions", {"candles": columns(rs)}, False),
        ("CSV session create", "/sessions", csv_text(rs), True),
        ("JSON session append", f"/sessions/{sid}/candles", {"candles": columns(late)}, False),
        ("CSV session append", f"/sessions/{sid}/candles", csv_text(late), True),
    ]


for name, edit, reason in BAD:
    rs = edit(rows(4, start=40))
    seen = set()
    for way, path, body, csv in ways(rs):
        s, d = call("POST", path, body, csv)
        m = message(d)
        check(f"{name} via {way}: 400 ... {reason[:40]}", s == 400 and m.endswith(": " + reason),
              f"{s} {m}")
        seen.add((s, m[m.index(": ") + 2:] if ": " in m else m))
    check(f"{name}: one status and one reason across the ways in", len({r for _, r in seen}) == 1,
          repr(seen))

# the query is a way in for timestamps too (future_timestamps with a CSV body): the same
# timestamp parser, the same reason as in a JSON body
month13 = "\"2024-13-01T00:00:00Z\" is not a valid timestamp (month 13 is out of range 1-12)"
s, d = call("POST", "/forecast?horizon=1&future_timestamps=2024-13-01T00:00:00Z", csv_text(rows(4, 40)), True)
s2, d2 = call("POST", "/forecast", {"candles": rows(4, 40), "horizon": 1,
                                    "future_timestamps": ["2024-13-01T00:00:00Z"]})
check("future_timestamps=2024-13-01 in the query and in JSON: 400, one message",
      s == s2 == 400 and message(d) == message(d2) == "future_timestamps[0]: " + month13,
      f"{s} {message(d)} / {s2} {message(d2)}")

# CSV-only spellings refused with the core's reasons (JSON cannot write them)
for text, reason in (("nan", "NaN is not allowed"), ("inf", "infinity is not allowed"),
                     ("0x10", "must be a number, got \"0x10\"")):
    body = csv_text(rows(4, 40), lambda i, k, t: text if (i, k) == (1, "open") else t)
    s, d = call("POST", "/forecast?horizon=2", body, True)
    check(f"CSV open={text}: 400 naming line 3, column 2",
          s == 400 and message(d) == f"CSV line 3, column 2 (open): {reason}", f"{s} {message(d)}")

# ---- control bytes: CSV cells, query parameters, JSON strings ----------------------------
NUL = "a control byte (0x00) is not allowed"
body = csv_text(rows(4, 40), lambda i, k, t: t + "\0" + "999" if (i, k) == (1, "open") else t)
s, d = call("POST", "/forecast?horizon=2", body, True)
check("CSV 10.5\\0999: 400, not read as 10.5",
      s == 400 and message(d) == "CSV line 3, column 2: " + NUL, f"{s} {message(d)}")
body = csv_text(rows(4, 40), lambda i, k, t: "1718701200\0junk" if (i, k) == (0, "timestamp") else t)
s, d = call("POST", "/forecast?horizon=2", body, True)
check("CSV timestamp 1718701200\\0junk: 400", s == 400 and message(d).endswith(NUL), f"{s} {message(d)}")
for q in ("horizon=2%00", "horizon=2%001", "samples=1%07&horizon=2"):
    s, d = call("POST", "/forecast?" + q, csv_text(rows(4, 40)), True)
    check(f"?{q}: 400, a control byte", s == 400 and message(d).endswith(
        NUL if "%00" in q else "a control byte (0x07) is not allowed"), f"{s} {message(d)}")
s, d = call("POST", "/forecast", b'{"candles": {"timestamps": ["2024-06-18\\u0000"], "open": [1]}, "horizon": 2}')
check("JSON \\u0000 in a string: 400", s == 400, f"{s} {message(d)}")

# ---- session appends compare instants (point 3) ------------------------------------------
def last_ts(sid):
    return call("GET", f"/sessions/{sid}")[1]["last_timestamp"]


def tiny(ts):  # a candle at ts
    return {"candles": [{"timestamp": ts, "open": 100, "high": 101, "low": 99, "close": 100.5}]}


base = rows(14)  # 09:00Z .. 10:05Z
s, d = call("POST", "/sessions", {"candles": base})
sid = d["session"]
s, d = call("POST", f"/sessions/{sid}/candles", tiny("2024-06-18T12:00:00+05:00"))  # 07:00Z
check("a session at 10:05Z refuses 12:00+05:00 (07:00Z, earlier)",
      s == 400 and "not after the series' last candle" in message(d), f"{s} {message(d)}")
stateless = call("POST", "/forecast", {"candles": base + tiny("2024-06-18T12:00:00+05:00")["candles"],
                                      "horizon": 2})
check("... as the stateless /forecast does", stateless[0] == 400, repr(stateless))

base5 = rows(14, zone="+05:00")  # ends 10:05+05:00 = 05:05Z
s, d = call("POST", "/sessions", {"candles": base5})
sid = d["session"]
norm = d["normalization"]
s, d = call("POST", f"/sessions/{sid}/candles", tiny("2024-06-18T05:30:00Z"))
check("a session at 10:05+05:00 accepts 05:30Z (25 minutes later)", s == 200, f"{s} {message(d)}")
check("... and is on the Z clock from then on", last_ts(sid) == "2024-06-18T05:30:00Z", last_ts(sid))
opts = {"horizon": 4, "samples": 3, "seed": 7, "quantiles": [0.5]}
s1, d1 = call("POST", f"/sessions/{sid}/forecast", opts)
s2, d2 = call("POST", "/forecast", dict(opts, candles=base5 + tiny("2024-06-18T05:30:00Z")["candles"],
                                        normalization=norm))
for d in (d1, d2):
    if isinstance(d, dict):
        d.pop("usage", None)
check("its forecast = the stateless /forecast of the same candles (bit for bit)",
      s1 == s2 == 200 and d1 == d2, f"{s1} {s2}\n{str(d1)[:300]}\n{str(d2)[:300]}")
s, d = call("POST", f"/sessions/{sid}/candles", tiny("2024-06-18T10:30:00+05:00"))  # 05:30Z
check("then 10:30+05:00 (05:30Z, the same instant) is refused", s == 400, f"{s} {message(d)}")
check("... and the session is as it was", last_ts(sid) == "2024-06-18T05:30:00Z", last_ts(sid))
s, d = call("POST", f"/sessions/{sid}/candles", tiny("2024-06-18T10:40:00+05:00"))  # 05:40Z
s1, d1 = call("POST", f"/sessions/{sid}/forecast", opts)
s2, d2 = call("POST", "/forecast", dict(opts, candles=base5 + tiny("2024-06-18T05:30:00Z")["candles"]
                                        + tiny("2024-06-18T10:40:00+05:00")["candles"],
                                        normalization=norm))
for d in (d1, d2):
    if isinstance(d, dict):
        d.pop("usage", None)
check("back to +05:00: still = the stateless /forecast", s1 == s2 == 200 and d1 == d2,
      f"{s1} {s2}\n{str(d1)[:300]}\n{str(d2)[:300]}")

# ---- the smaller points (point 7) -------------------------------------------------------
sid = new_session()
for path, body in ((f"/sessions/{sid}/forecast?format=csv", {"horizon": 2}),
                   (f"/sessions/{sid}/candles?x=1", tiny("2024-06-18T12:00:00Z")),
                   ("/sessions?format=csv", {"candles": columns(rows(4))}),
                   ("/generate?format=csv", {"tokens": [[1, 1]], "max_new_tokens": 1}),
                   ("/detokenize?format=csv", {"tokens": [[1, 1]]})):
    s, d = call("POST", path, body)
    key = path.split("?")[1].split("=")[0]
    check(f"POST {path.split('?')[0]}?{key}=...: 400, not ignored",
          s == 400 and message(d) == f'unknown query parameter "{key}"; this endpoint takes none',
          f"{s} {message(d)}")
# a parsed body's text is freed (upload-budget): a token session's body is still checked
s, d = call("POST", "/sessions", {"foo": 1})
check("POST /sessions {\"foo\": 1}: 400 naming the field", s == 400 and '"foo"' in message(d),
      f"{s} {message(d)}")
s, d = call("POST", "/sessions", {})
check("POST /sessions {}: a token session", s == 201, f"{s} {message(d)}")
s, d = call("POST", "/forecast", {"candles": rows(4), "horizon": 2, "max_context": 0})
mc = call("GET", "/model")[1].get("max_context")
check("max_context 0: 400 with the rule the message states",
      s == 400 and message(d) == f"max_context: must be in [1, {mc}] (the model's), got 0",
      f"{s} {message(d)}")
s, d = call("GET", f"/sessions/{sid}")
check("GET a candle session: capacity is the model's window, not 0",
      s == 200 and d.get("capacity") == mc, f"{s} {d}")
slow = {"candles": rows(64), "horizon": 400, "samples": 64, "timeout_ms": 100}
s, d = call("POST", "/forecast", slow)
check("a 504 names what timed out once",
      s == 504 and message(d).startswith("forecast: ") and "forecast: forecast" not in message(d),
      f"{s} {message(d)}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
