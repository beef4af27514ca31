"""http_call.py — one HTTP request to a kronosd and its decoded answer, for the e2e and bench
scripts that send bodies of every kind (JSON, CSV, raw bytes)."""
import http.client
import json


def call(url, method, path, body=None, csv=False):
    """url: a urllib.parse result. Returns (status, JSON if the answer parses, else bytes)."""
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    data = body if isinstance(body, (bytes, type(None))) else (
        body.encode() if isinstance(body, str) else json.dumps(body).encode())
    c.request(method, path, data, {"Content-Type": "text/csv" if csv else "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw
