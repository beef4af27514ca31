#!/usr/bin/env python3
"""openapi.py SRCDIR URL KEY_URL KEY — the daemon's real answers against its own document.

GET /openapi.json from the daemon at URL, then, for every operation it documents, at least
one request that succeeds and one that fails, each answer's status, content type and JSON
body checked against the document's response for that status (python3-jsonschema,
JSON Schema 2020-12); the request bodies that succeed are checked against the documented
request schemas too. Also:
  - the fields each JSON route takes, as the daemon lists them when refusing an unknown one,
    are the properties its request schema documents (and the query parameters of /forecast
    and /evaluate);
  - every error code the server's sources answer with (kd_reply_error, kd_refuse, the
    session and core tables) is in the document, under its status;
  - a method a documented path does not take is 405 with the error object.
KEY_URL is a daemon with an API key (KEY) and the admin key openapi-admin-key: each route
off the public ones answers 401 there without it. URL's daemon runs with --max-sessions-per-key 3 and --max-body-bytes
65536. Prints "ok"/"FAIL" per check and "N passed, N failed".
"""
import copy
import datetime
import json
import os
import re
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import jsonschema  # noqa: E402

SRC, URL, KEY_URL, KEY = sys.argv[1:5]
PASSED = FAILED = 0
EXERCISED = {}  # (path template, method) -> set of "ok"/"error"


def report(ok, name, why=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print("ok  ", name)
    else:
        FAILED += 1
        print("FAIL", name)
        if why:
            print("    ", str(why)[:600])


def call(method, url, body=None, ctype="application/json", headers=None):
    data = body if isinstance(body, (bytes, type(None))) else (
        body.encode() if isinstance(body, str) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def raw(url, request_text):
    """A hand-written request (what urllib will not send); its status, type and body."""
    u = urllib.parse.urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(request_text.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    ctype = next((l.split(":", 1)[1].strip() for l in lines[1:]
                  if l.lower().startswith("content-type:")), "")
    return status, ctype, body


status, _, text = call("GET", URL + "/openapi.json")
DOC = json.loads(text)
report(status == 200 and DOC.get("openapi") == "3.1.0", "GET /openapi.json is OpenAPI 3.1")
RESOLVER = jsonschema.RefResolver.from_schema(DOC)
jsonschema.Draft202012Validator.check_schema(DOC["components"]["schemas"]["ForecastRequest"])
for name, schema in DOC["components"]["schemas"].items():
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        report(True, f"schema {name} is JSON Schema 2020-12")
    except jsonschema.SchemaError as e:
        report(False, f"schema {name} is JSON Schema 2020-12", e.message)


def validate(instance, schema):
    """None, or what is wrong."""
    v = jsonschema.Draft202012Validator(schema, resolver=RESOLVER)
    errors = sorted(v.iter_errors(instance), key=lambda e: list(e.path))
    return None if not errors else "; ".join(
        f"{list(e.path)}: {e.message[:200]}" for e in errors[:3])


def template_of(path):
    for tpl in DOC["paths"]:
        rx = "^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(tpl)) + "$"
        if re.match(rx, path):
            return tpl
    return None


def check(name, method, base, path, want, body=None, ctype="application/json", headers=None,
          raw_text=None):
    """One request: its status is `want` and its answer is the document's for it."""
    url = base + path
    if raw_text is not None:
        status, rtype, data = raw(base, raw_text)
    else:
        status, rtype, data = call(method, url, body, ctype, headers)
    tpl = template_of(urllib.parse.urlsplit(url).path)
    op = DOC["paths"].get(tpl, {}).get(method.lower()) if tpl else None
    if op is None:
        return report(False, name, f"{method} {path}: not in the document")
    if status != want:
        return report(False, name, f"status {status}, expected {want}: {data[:300]!r}")
    resp = op["responses"].get(str(status)) or op["responses"].get("default")
    if resp is None:
        return report(False, name, f"{method} {tpl} documents no {status} response")
    if "$ref" in resp:
        resp = DOC["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    mtype = rtype.split(";")[0].strip()
    content = resp.get("content", {})
    if mtype not in content:
        return report(False, name, f"content type {mtype} not among {list(content)}")
    if mtype == "application/json":
        try:
            answer = json.loads(data)
        except ValueError as e:
            return report(False, name, f"not JSON: {e}")
        why = validate(answer, content[mtype]["schema"])
        if why:
            return report(False, name, why)
        if status >= 400:  # the code is one this status documents
            code = answer["error"]["code"]
            if f"`{code}`" not in resp["description"]:
                return report(False, name, f"{code} not documented under {status}")
    elif not data and method != "HEAD":
        return report(False, name, "empty body")
    if status < 300 and body is not None and not isinstance(body, (bytes, str)):
        rb = op.get("requestBody", {}).get("content", {}).get(ctype)
        why = "no request body documented" if rb is None else validate(body, rb["schema"])
        if why:
            return report(False, name, "request: " + why)
    EXERCISED.setdefault((tpl, method.lower()), set()).add("ok" if status < 400 else "error")
    report(True, name)
    return json.loads(data) if mtype == "application/json" else data


def bad_framing(method, path):
    """Two Content-Length headers: 400 bad_framing on any route, before its handler."""
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            f"Content-Length: 2\r\nConnection: close\r\n\r\n{{}}")


# ---- the requests ----------------------------------------------------------------------

golden = json.load(open(f"{SRC}/tests/data/tiny/golden.json"))["cases"][0]
candles = golden["input"]
csv_text = "".join(open(f"{SRC}/tests/data/kline_5min.csv").readlines()[:41])
forecast = {"candles": candles, "horizon": 3, "samples": 4, "seed": 7,
            "quantiles": [0.1, 0.5, 0.9], "return_paths": True}
rows = [{"timestamp": t, "open": o, "high": h, "low": l, "close": c}
        for t, o, h, l, c in zip(candles["timestamps"], candles["open"], candles["high"],
                                 candles["low"], candles["close"])]

# public GET routes: the answer and a badly framed request
for path in ["/", "/example.csv", "/health", "/openapi.json"]:
    check(f"GET {path}", "GET", URL, path, 200)
    check(f"GET {path} badly framed", "GET", URL, path, 400, raw_text=bad_framing("GET", path))
for path in ["/model", "/metrics"]:
    check(f"GET {path}", "GET", URL, path, 200)
    check(f"GET {path} without the key", "GET", KEY_URL, path, 401)

check("POST /forecast", "POST", URL, "/forecast", 200, forecast)
check("POST /forecast (rows, greedy)", "POST", URL, "/forecast", 200,
      {"candles": rows, "horizon": 2, "top_k": 1, "use_cache": False})
check("POST /forecast (series)", "POST", URL, "/forecast", 200,
      {"series": [{"candles": candles}, {"candles": rows, "future_timestamps":
                   golden["future_timestamps"][:2]}], "horizon": 2, "seed": 1})
check("POST /forecast (CSV, query)", "POST", URL,
      "/forecast?horizon=4&samples=3&quantiles=0.1,0.9&seed=2", 200, csv_text, "text/csv")
check("POST /forecast (CSV out)", "POST", URL, "/forecast?horizon=4&format=csv", 200, csv_text,
      "text/csv")
check("POST /forecast unknown field", "POST", URL, "/forecast", 400, {**forecast, "pred_len": 3})
check("POST /forecast horizon over the limit", "POST", URL, "/forecast", 400,
      {**forecast, "horizon": 10 ** 6})
check("POST /forecast too large", "POST", URL, "/forecast", 422,
      {**forecast, "samples": 1000, "horizon": 1024})
check("POST /forecast past its deadline", "POST", URL, "/forecast", 504,
      {"candles": candles, "horizon": 300, "samples": 32, "top_k": 1, "timeout_ms": 1})
# refused on its Content-Length, before a body byte is read (so no race with sending one)
check("POST /forecast body too large", "POST", URL, "/forecast", 413,
      raw_text="POST /forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: 70000\r\nConnection: close\r\n\r\n")
check("POST /forecast without the key", "POST", KEY_URL, "/forecast", 401, forecast)
check("POST /forecast with the key", "POST", KEY_URL, "/forecast", 200, forecast,
      headers={"Authorization": "Bearer " + KEY})
check("POST /forecast badly framed", "POST", URL, "/forecast", 400,
      raw_text=bad_framing("POST", "/forecast"))

# /evaluate: 120 candles of the example series (columns), origins every 20 from 32
series = [line.rstrip("\n").split(",") for line in
          open(f"{SRC}/tests/data/kline_5min.csv").readlines()[:121]]
head, series = series[0], series[1:]
evaluation_candles = {k: [r[head.index(k)] if k == "timestamps" else float(r[head.index(k)])
                          for r in series]
                      for k in ("timestamps", "open", "high", "low", "close", "volume", "amount")}
evaluation = {"candles": evaluation_candles, "lookback": 32, "horizon": 4, "stride": 20,
              "samples": 4, "seed": 1, "quantiles": [0.1, 0.25, 0.5, 0.75, 0.9]}
ev = check("POST /evaluate", "POST", URL, "/evaluate", 200, evaluation)
report(isinstance(ev, dict) and ev.get("origins") == 5 and "by_origin" not in ev and
       "normalization" not in ev and set(ev["model"]["coverage"]) == {"0.1-0.9", "0.25-0.75"},
       "POST /evaluate: 5 origins, the coverage pairs, no detail unasked", str(ev)[:300])
ev = check("POST /evaluate (return_origins)", "POST", URL, "/evaluate", 200,
           {**evaluation, "return_origins": True})
report(isinstance(ev, dict) and [o["origin"] for o in ev.get("by_origin", [])] ==
       [32, 52, 72, 92, 112] and all(len(o["close"]["paths"]) == 4 for o in ev["by_origin"]),
       "POST /evaluate (return_origins): each origin's detail", str(ev)[:300])
ev = check("POST /evaluate (live)", "POST", URL, "/evaluate", 200,
           {**evaluation, "mode": "live", "stride": 40, "samples": 1, "return_origins": True})
report(isinstance(ev, dict) and ev.get("mode") == "live" and "normalization" in ev and
       all("paths" not in o["close"] for o in ev["by_origin"]),
       "POST /evaluate (live): the pinned statistics, no paths of one sample", str(ev)[:300])
ev = check("POST /evaluate (CSV, query)", "POST", URL,
           "/evaluate?lookback=16&horizon=4&stride=8&samples=3&quantiles=0.1,0.5,0.9&seed=2"
           "&return_origins=true&mode=window", 200, csv_text, "text/csv")
report(isinstance(ev, dict) and ev.get("origins") == 3 and len(ev.get("by_origin", [])) == 3,
       "POST /evaluate (CSV, query): the query's fields", str(ev)[:300])
sse = check("POST /evaluate (event stream)", "POST", URL, "/evaluate", 200, evaluation,
            headers={"Accept": "text/event-stream"})
events = re.findall(r"^event: (\w+)\ndata: (.*)$", sse.decode(), re.M) if isinstance(
    sse, bytes) else []
report(len(events) >= 2 and events[0][0] == "progress" and events[-1][0] == "result" and
       not validate(json.loads(events[-1][1]), {"$ref": "#/components/schemas/EvaluateResponse"}),
       "POST /evaluate (event stream): progress, then the documented result", str(sse)[:300])
# closes <= 0: the random walk's sigma, its CRPS and coverage cannot be computed (null)
n = 40
ev = check("POST /evaluate (scores that cannot be computed)", "POST", URL, "/evaluate", 200,
           {"candles": {"timestamps": [1700000000 + 300 * i for i in range(n)],
                        "open": [1] * n, "high": [1] * n, "low": [-1] * n,
                        "close": [0 if i % 3 == 0 else -1 for i in range(n)]},
            "lookback": 16, "horizon": 4, "stride": 8, "samples": 3})
report(isinstance(ev, dict) and ev["random_walk"]["overall"]["crps"] is None,
       "POST /evaluate: a score that cannot be computed is null", str(ev)[:300])
# /evaluate with series: the same candles, and a copy with each price column reversed (the
# same timestamps, so aligned)
flipped = {k: (v if k == "timestamps" else v[::-1]) for k, v in evaluation_candles.items()}
many = {k: v for k, v in evaluation.items() if k != "candles"}
many["series"] = [{"candles": evaluation_candles}, {"candles": flipped},
                  {"candles": evaluation_candles}]
ev = check("POST /evaluate (series)", "POST", URL, "/evaluate", 200, many)
report(isinstance(ev, dict) and len(ev.get("series", [])) == 3 and
       ev["cross_section"]["top_k"] == 1 and "by_origin" not in ev["cross_section"],
       "POST /evaluate (series): one answer a series and the cross-section", str(ev)[:300])
ev = check("POST /evaluate (series, return_origins)", "POST", URL, "/evaluate", 200,
           {**many, "return_origins": True})
report(isinstance(ev, dict) and len(ev["cross_section"].get("by_origin", [])) == 5,
       "POST /evaluate (series, return_origins): each origin time's scores", str(ev)[:300])
misaligned = copy.deepcopy(many)
# candle 33, forecast from origin 32, a minute later in one series
later = datetime.datetime.fromisoformat(evaluation_candles["timestamps"][33]) + \
    datetime.timedelta(minutes=1)
moved = list(evaluation_candles["timestamps"])  # the series share one list: a copy
moved[33] = later.isoformat(sep=" ")
misaligned["series"][1]["candles"]["timestamps"] = moved
check("POST /evaluate (series) misaligned", "POST", URL, "/evaluate", 400, misaligned)
check("POST /evaluate (series) top_k over half", "POST", URL, "/evaluate", 400,
      {**many, "cross_section": {"top_k": 2}})
# calibration: rolling (warm-up 1: four origins scored), the object applied, forecasts by it
ev = check("POST /evaluate (calibration rolling)", "POST", URL, "/evaluate", 200,
           {**evaluation, "calibration": "rolling", "calibration_warmup": 1,
            "return_origins": True})
cal_obj = ev.get("calibration") if isinstance(ev, dict) else None
report(isinstance(ev, dict) and ev.get("scored_origins") == 4 and cal_obj is not None and
       ev["by_origin"][0]["calibrated"]["prob_close_up"] == [None] * 4,
       "POST /evaluate (calibration rolling): scored origins, the object", str(ev)[:300])
ev = check("POST /evaluate (anomalies, calibrated)", "POST", URL, "/evaluate", 200,
           {**evaluation, "calibration": "rolling", "calibration_warmup": 1,
            "anomalies": {"band": "0.25-0.75"}})
report(isinstance(ev, dict) and ev["anomalies"]["checked"] == 16 and
       ev["anomalies"]["count"] == len(ev["anomalies"]["points"]) > 0,
       "POST /evaluate (anomalies, calibrated): the scored origins checked", str(ev)[:300])
ev = check("POST /evaluate (series, anomalies)", "POST", URL, "/evaluate", 200,
           {**many, "anomalies": {"band": "0.1-0.9"}})
report(isinstance(ev, dict) and all(s["anomalies"]["checked"] == 20 for s in ev["series"]),
       "POST /evaluate (series, anomalies): each series its own", str(ev)[:300])
check("POST /evaluate (anomalies, a band not among the pairs)", "POST", URL, "/evaluate", 400,
      {**evaluation, "anomalies": {"band": "0.2-0.8"}})
check("POST /evaluate (a calibration object)", "POST", URL, "/evaluate", 200,
      {**evaluation, "calibration": cal_obj})
check("POST /evaluate (a calibration of another horizon)", "POST", URL, "/evaluate", 400,
      {**evaluation, "horizon": 3, "calibration": cal_obj})
cal_candles = {k: v[:40] for k, v in evaluation_candles.items()}
fc = check("POST /forecast (calibrated)", "POST", URL, "/forecast", 200,
           {"candles": cal_candles, "horizon": 4, "samples": 4, "calibration": cal_obj})
report(isinstance(fc, dict) and fc.get("calibrated") is True and "raw" in fc and
       set(fc["quantiles"]["0.5"]) == {"close", "open", "high", "low"},
       "POST /forecast (calibrated): the close, open, high and low",
       str(fc)[:300])
check("POST /forecast (series, calibrated)", "POST", URL, "/forecast", 200,
      {"series": [{"candles": cal_candles}], "horizon": 4, "samples": 4, "calibration": cal_obj})
check("POST /forecast (a calibration of other samples)", "POST", URL, "/forecast", 400,
      {"candles": cal_candles, "horizon": 4, "samples": 2, "calibration": cal_obj})
check("POST /evaluate unknown field", "POST", URL, "/evaluate", 400,
      {**evaluation, "pred_len": 4})
check("POST /evaluate lookback 1", "POST", URL, "/evaluate", 400, {**evaluation, "lookback": 1})
check("POST /evaluate format=csv", "POST", URL, "/evaluate?format=csv", 400, evaluation)
# one origin whose 1000 paths' KV cache is over the whole pool (a small body: integer
# timestamps and prices)
n = 64 + 256
check("POST /evaluate too large", "POST", URL, "/evaluate", 422,
      {"candles": {"timestamps": [1700000000 + 300 * i for i in range(n)],
                   "open": [10] * n, "high": [11] * n, "low": [9] * n,
                   "close": [10 + i % 5 for i in range(n)]},
       "lookback": 64, "horizon": 256, "samples": 1000})
check("POST /evaluate past its deadline", "POST", URL, "/evaluate", 504,
      {**evaluation, "horizon": 8, "stride": 1, "samples": 32, "timeout_ms": 1})
check("POST /evaluate without the key", "POST", KEY_URL, "/evaluate", 401, evaluation)

tok = check("POST /tokenize", "POST", URL, "/tokenize", 200, {"candles": candles})
check("POST /tokenize (CSV)", "POST", URL, "/tokenize", 200, csv_text, "text/csv")
check("POST /tokenize no candles", "POST", URL, "/tokenize", 400, {})
if isinstance(tok, dict):
    check("POST /detokenize", "POST", URL, "/detokenize", 200, tok)
check("POST /detokenize (CSV)", "POST", URL, "/detokenize", 415, csv_text, "text/csv")
check("POST /generate (temporary cache)", "POST", URL, "/generate", 200,
      {"tokens": [[5, 3], [7, 1]], "timestamps": candles["timestamps"][:2], "max_new_tokens": 2,
       "future_timestamps": candles["timestamps"][2:4], "seed": 4})
check("POST /generate token out of range", "POST", URL, "/generate", 400,
      {"tokens": [[5, 10 ** 6]], "timestamps": candles["timestamps"][:1]})

ts = check("POST /sessions (tokens)", "POST", URL, "/sessions", 201)
cs = check("POST /sessions (candles)", "POST", URL, "/sessions", 201, {"candles": candles})
check("POST /sessions (candles, CSV)", "POST", URL, "/sessions", 201, csv_text, "text/csv")
check("POST /sessions over max-sessions-per-key", "POST", URL, "/sessions", 429)
check("POST /sessions bad candles", "POST", URL, "/sessions", 400, {"candles": {"open": [1]}})
t_id = ts["session"] if isinstance(ts, dict) else "x"
c_id = cs["session"] if isinstance(cs, dict) else "x"
check("POST /sessions/{id}/generate", "POST", URL, f"/sessions/{t_id}/generate", 200,
      {"tokens": [[5, 3]], "timestamps": candles["timestamps"][:1], "max_new_tokens": 1,
       "future_timestamps": candles["timestamps"][1:2]})
check("POST /generate on a session", "POST", URL, "/generate", 200,
      {"session": t_id, "stamps": [[20, 11, 1, 18, 6]], "tokens": [[1, 2]]})
check("POST /sessions/{id}/generate (candle session)", "POST", URL,
      f"/sessions/{c_id}/generate", 400, {"tokens": []})
check("GET /sessions/{id} (tokens)", "GET", URL, f"/sessions/{t_id}", 200)
check("GET /sessions/{id} (candles)", "GET", URL, f"/sessions/{c_id}", 200)
more = {"timestamps": ["2030-01-01T00:00:00"], "open": [11.3], "high": [11.31], "low": [11.29],
        "close": [11.3], "volume": [500.0], "amount": [5650.0]}
check("POST /sessions/{id}/candles", "POST", URL, f"/sessions/{c_id}/candles", 200,
      {"candles": more})
check("POST /sessions/{id}/candles (token session)", "POST", URL,
      f"/sessions/{t_id}/candles", 400, {"candles": more})
check("POST /sessions/{id}/forecast", "POST", URL, f"/sessions/{c_id}/forecast", 200,
      {"horizon": 3, "samples": 2, "quantiles": [0.5], "seed": 9})
check("POST /sessions/{id}/forecast (calibrated)", "POST", URL, f"/sessions/{c_id}/forecast",
      200, {"horizon": 4, "samples": 4, "calibration": cal_obj})
check("POST /sessions/{id}/forecast with candles", "POST", URL, f"/sessions/{c_id}/forecast", 400,
      {"horizon": 3, "candles": candles})
for sid in (t_id, c_id):
    check("DELETE /sessions/{id}", "DELETE", URL, f"/sessions/{sid}", 200)
ls = check("POST /sessions (candles, calibration online)", "POST", URL, "/sessions", 201,
           {"candles": candles, "calibration": "online"})
l_id = ls["session"] if isinstance(ls, dict) else "x"
check("POST /sessions/{id}/forecast (calibrating itself)", "POST", URL,
      f"/sessions/{l_id}/forecast", 200, {"horizon": 2, "samples": 4, "seed": 3})
check("POST /sessions/{id}/candles (anomalies)", "POST", URL, f"/sessions/{l_id}/candles", 200,
      {"candles": more})
check("GET /sessions/{id} (calibrating itself)", "GET", URL, f"/sessions/{l_id}", 200)
check("POST /sessions bad calibration", "POST", URL, "/sessions", 400,
      {"candles": candles, "calibration": "offline"})
check("DELETE /sessions/{id} (calibrating itself)", "DELETE", URL, f"/sessions/{l_id}", 200)
gone = "kronos-1-" + "0" * 32
check("GET /sessions/{id} unknown", "GET", URL, f"/sessions/{gone}", 404)
check("DELETE /sessions/{id} deleted", "DELETE", URL, f"/sessions/{t_id}", 404)
check("POST /sessions/{id}/candles unknown", "POST", URL, f"/sessions/{gone}/candles", 404,
      {"candles": more})
check("POST /sessions/{id}/forecast unknown", "POST", URL, f"/sessions/{gone}/forecast", 404,
      {"horizon": 2})
check("POST /sessions/{id}/generate unknown", "POST", URL, f"/sessions/{gone}/generate", 404,
      {"tokens": []})
for path, method in [("/sessions", "POST"), ("/sessions/x", "GET"), ("/sessions/x", "DELETE"),
                     ("/generate", "POST"), ("/detokenize", "POST"), ("/tokenize", "POST")]:
    check(f"{method} {path} without the key", method, KEY_URL, path, 401, {})

check("GET /models", "GET", URL, "/models", 200)
check("GET /models without the key", "GET", KEY_URL, "/models", 401)
check("GET /models/{model}", "GET", URL, "/models/tiny", 200)
check("GET /models/{model} unknown", "GET", URL, "/models/nope", 404)
ADMIN = {"Authorization": "Bearer openapi-admin-key"}
tiny_dir = os.path.join(SRC, "tests", "data", "tiny")
check("POST /models without the admin key", "POST", KEY_URL, "/models", 401,
      {"id": "tiny2", "path": tiny_dir}, headers={"Authorization": f"Bearer {KEY}"})
check("POST /models", "POST", KEY_URL, "/models", 201, {"id": "tiny2", "path": tiny_dir},
      headers=ADMIN)
check("POST /models a loaded id", "POST", KEY_URL, "/models", 409,
      {"id": "tiny2", "path": tiny_dir}, headers=ADMIN)
check("POST /models no such folder", "POST", KEY_URL, "/models", 422,
      {"id": "gone", "path": os.path.join(SRC, "no-such-folder")}, headers=ADMIN)
check("POST /models an unknown field", "POST", KEY_URL, "/models", 400,
      {"path": tiny_dir, "nope": 1}, headers=ADMIN)
# fine-tuning jobs: a one-step job and a long one, cancelled
ft = {"candles": evaluation_candles, "steps": 1, "batch": 1, "lookback": 16, "predict": 2,
      "validation_share": 0, "gate_samples": 0, "id": "tiny-ft-doc"}
check("POST /finetune without the admin key", "POST", KEY_URL, "/finetune", 401, ft)
check("POST /finetune", "POST", KEY_URL, "/finetune", 202, ft, headers=ADMIN)
check("POST /finetune a bad setting", "POST", KEY_URL, "/finetune", 400, {**ft, "batch": 0},
      headers=ADMIN)
check("POST /finetune (long)", "POST", KEY_URL, "/finetune", 202,
      {**ft, "steps": 1000000, "id": "tiny-ft-long"}, headers=ADMIN)
check("DELETE /finetune/{job}", "DELETE", KEY_URL, "/finetune/ft-2", 202, headers=ADMIN)
check("DELETE /finetune/{job} unknown", "DELETE", KEY_URL, "/finetune/ft-99", 404, headers=ADMIN)
check("GET /finetune", "GET", KEY_URL, "/finetune", 200, headers=ADMIN)
check("GET /finetune without the admin key", "GET", KEY_URL, "/finetune", 401)
check("GET /finetune/{job}", "GET", KEY_URL, "/finetune/ft-1", 200, headers=ADMIN)
check("GET /finetune/{job} unknown", "GET", KEY_URL, "/finetune/ft-99", 404, headers=ADMIN)
check("DELETE /models/{model} without the admin key", "DELETE", KEY_URL, "/models/tiny2", 401,
      headers={"Authorization": f"Bearer {KEY}"})
check("DELETE /models/{model} the default", "DELETE", KEY_URL, "/models/tiny", 409, headers=ADMIN)
check("DELETE /models/{model}", "DELETE", KEY_URL, "/models/tiny2", 200, headers=ADMIN)
check("DELETE /models/{model} unknown", "DELETE", KEY_URL, "/models/tiny2", 404, headers=ADMIN)
check("POST /forecast unknown model", "POST", URL, "/forecast", 404,
      {"candles": candles, "horizon": 2, "model": "nope"})

# every operation, at least one success and one failure
for tpl, item in DOC["paths"].items():
    for method in item:
        got = EXERCISED.get((tpl, method), set())
        report(got == {"ok", "error"}, f"{method.upper()} {tpl}: a success and an error checked",
               f"checked: {sorted(got)}")

# a method a documented path does not take: 405 with the error object
error_schema = {"$ref": "#/components/schemas/Error"}
for tpl, item in DOC["paths"].items():
    path = tpl.replace("{session}", gone)
    other = "PUT"  # no route takes it
    status, _, data = call(other, URL + path, b"{}")
    why = validate(json.loads(data), error_schema) if data else "no body"
    report(status == 405 and not why, f"{other} {tpl} is 405", f"{status} {why} {data[:200]!r}")
status, _, data = call("GET", URL + "/nowhere")
report(status == 404 and not validate(json.loads(data), error_schema), "GET /nowhere is 404")

# ---- the fields the daemon takes are the documented ones --------------------------------


def listed(answer, what="fields"):
    m = re.search(rf"the {what} are: (.*)$", answer["error"]["message"])
    return set(m.group(1).split(", ")) if m else None


def props(name):
    return set(DOC["components"]["schemas"][name]["properties"])


series_element = DOC["components"]["schemas"]["SeriesForecastRequest"]["properties"]["series"]
eval_series = DOC["components"]["schemas"]["SeriesEvaluateRequest"]["properties"]
for name, path, body, documented in [
        ("SeriesEvaluateRequest", "/evaluate", {"series": []}, props("SeriesEvaluateRequest")),
        ("series element (evaluate)", "/evaluate", {"series": [{}]},
         set(eval_series["series"]["items"]["properties"])),
        ("cross_section (evaluate)", "/evaluate", {"series": [], "cross_section": {}},
         set(eval_series["cross_section"]["properties"])),
        ("ForecastRequest", "/forecast", {}, props("ForecastRequest")),
        ("SeriesForecastRequest", "/forecast", {"series": []}, props("SeriesForecastRequest")),
        ("series element", "/forecast", {"series": [{}]},
         set(series_element["items"]["properties"])),
        ("GenerateRequest", "/generate", {}, props("GenerateRequest")),
        ("TokenizeRequest", "/tokenize", {}, props("TokenizeRequest")),
        ("DetokenizeRequest", "/detokenize", {}, props("DetokenizeRequest")),
        ("CandleSessionRequest", "/sessions", {"candles": {}}, props("CandleSessionRequest")),
        ("EvaluateRequest", "/evaluate", {}, props("EvaluateRequest")),
        ("CandleColumns", "/forecast", {"candles": {"zz_unknown": 1}, "horizon": 1},
         props("CandleColumns")),
]:
    b = copy.deepcopy(body)
    target = (b["cross_section"] if "cross_section" in b else
              b["series"][0] if b.get("series") else b)
    if "candles" in b and b["candles"]:
        b["candles"] = {"zz_unknown": 1}
    else:
        target["zz_unknown"] = 1
    status, _, data = call("POST", URL + path, b)
    got = listed(json.loads(data)) if status == 400 else None
    report(got == documented, f"{name}: the daemon's fields are the documented ones",
           f"daemon {sorted(got or [])} vs document {sorted(documented)}")
cs = check("POST /sessions (candles) for the field lists", "POST", URL, "/sessions", 201,
           {"candles": candles})
if isinstance(cs, dict):
    for name, path in [("AppendCandlesRequest", "candles"), ("SessionForecastRequest", "forecast")]:
        status, _, data = call("POST", f"{URL}/sessions/{cs['session']}/{path}", {"zz_unknown": 1})
        got = listed(json.loads(data)) if status == 400 else None
        report(got == props(name), f"{name}: the daemon's fields are the documented ones",
               f"daemon {sorted(got or [])} vs document {sorted(props(name))}")
    call("DELETE", f"{URL}/sessions/{cs['session']}")
for path in ("/forecast", "/evaluate"):
    status, _, data = call("POST", URL + path + "?zz_unknown=1", csv_text, "text/csv")
    got = listed(json.loads(data), "query parameters") if status == 400 else None
    query = {p.get("name") or p["$ref"].rsplit("/", 1)[1]
             for p in DOC["paths"][path]["post"]["parameters"]}
    report(got == query, f"{path}: the daemon's query parameters are the documented ones",
           f"daemon {sorted(got or [])} vs document {sorted(query)}")

# ---- every error code in the sources is documented under its status ---------------------

documented = {}
for st, resp in DOC["components"]["responses"].items():
    for code in re.findall(r"`([a-z_]+)`", resp["description"]):
        documented.setdefault(code, set()).add(int(st))
listing = DOC["components"]["schemas"]["Error"]["description"]
enum = set(DOC["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
           ["enum"])
found = set()
patterns = [r'kd_reply_error\(\s*\w+,\s*(\d{3}),\s*"([a-z_]+)"',
            r'kd_refuse\([^;]*?,\s*(\d{3}),\s*"([a-z_]+)"',
            r'\{\s*(\d{3}),\s*"([a-z_]+)"']
for root, _, files in os.walk(f"{SRC}/server"):
    for f in files:
        if f.endswith(".c"):
            text = open(os.path.join(root, f)).read()
            for p in patterns:
                found |= {(int(s), c) for s, c in re.findall(p, text)}
found.discard((200, "ok"))
report(len(found) >= 15, f"the sources answer {len(found)} error codes")
for st, code in sorted(found):
    operation = st not in (405, 499)  # a path's status, and one never received
    report(code in enum and f"`{code}` ({st})" in listing and
           (not operation or st in documented.get(code, set())),
           f"{st} {code} is documented", f"in enum: {code in enum}, "
           f"under {sorted(documented.get(code, []))}")

print(f"{PASSED} passed, {FAILED} failed")
sys.exit(0 if FAILED == 0 else 1)
