"""body_memory.py — the memory one large JSON candle body costs the daemon.

Sends a /forecast body of about BODY_BYTES with candles as Unix seconds and six columns
of prices, refused after its candles are parsed (horizon -1: what reading the body costs,
not the model's work). Before it the daemon's peak RSS is reset (/proc/PID/clear_refs);
after it, VmHWM less the RSS before is what the request took. Checks that this is under 3
times the body. Prints the numbers.
Usage: body_memory.py HOST PORT PID BODY_BYTES [sanitized]"""
import json
import random
import socket
import sys
import time

host, port, pid, body_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sanitized = len(sys.argv) > 5 and sys.argv[5] == "sanitized"


def status_kib(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def body_of(rows, horizon):
    rnd = random.Random(7)
    price = [round(10000 + rnd.random() * 100, 2) for _ in range(rows)]
    cols = {k: [round(p + d, 2) for p in price] for k, d in
            (("open", 0), ("high", 1.25), ("low", -1.25), ("close", 0.5))}
    cols["volume"] = [round(rnd.random() * 1000, 3) for _ in range(rows)]
    cols["amount"] = [round(v * 10000, 2) for v in cols["volume"]]
    return json.dumps({"candles": {"timestamps": [1700000000 + 60 * i for i in range(rows)],
                                   **cols}, "horizon": horizon}).encode()


def post(body):
    c = socket.create_connection((host, port))
    c.sendall(b"POST /forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    c.settimeout(120)
    reply = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        reply += d
    c.close()
    return reply.split(b" ")[1].decode(), reply.split(b"\r\n\r\n", 1)[-1][:200]


rows = body_bytes // 70
body = body_of(rows, -1)
while len(body) > body_bytes:
    rows = rows * 99 // 100
    body = body_of(rows, -1)
ok = True
for horizon, want in ((-1, "400"),):
    body = body_of(rows, horizon)
    time.sleep(1.0)
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the RSS now
    idle = status_kib("VmRSS")
    status, text = post(body)
    peak = status_kib("VmHWM")
    ratio = (peak - idle) * 1024 / len(body)
    what = "refused after parsing"
    print(f"{len(body) / 2**20:.2f} MiB body, {rows} candles, {what} ({status}): RSS "
          f"{idle / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB: "
          f"{(peak - idle) / 1024:.1f} MiB = {ratio:.2f}x the body")
    if status != want:
        print(f"FAIL: expected {want}: {text!r}")
        ok = False
    if horizon < 0 and ratio >= 3 and not sanitized:
        print("FAIL: parsing took 3x the body or more")
        ok = False
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
