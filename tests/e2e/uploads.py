"""uploads.py — request bodies are bounded in total and memory goes back.

Opens N uploads that declare max-body-bytes and stall after sending most of it, reads the
daemon's RSS while they are held, then closes them (or lets read-timeout close them) and
reads it again after a big JSON body has been parsed and answered. Prints the numbers;
checks that RSS while held stays within the budget (plus a margin), that the uploads
beyond it were refused (503 uploads_busy or closed), and that RSS afterwards came back
near where it started.
Usage: uploads.py HOST PORT PID N BODY_BYTES SENT_BYTES BUDGET_BYTES [sanitized]"""
import json
import socket
import sys
import time

host, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n, body_bytes, sent_bytes, budget = map(int, sys.argv[4:8])


def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1


def status_of(s, wait):
    s.settimeout(wait)
    try:
        data = s.recv(4096)
    except (socket.timeout, BlockingIOError):
        return "held"
    except OSError:
        return "closed"
    if not data:
        return "closed"
    return data.split(b" ")[1].decode() + (" uploads_busy" if b"uploads_busy" in data else "")


base = rss_mib()
socks = []
chunk = b"1" * (1 << 20)
t0 = time.monotonic()
for i in range(n):
    s = socket.socket()
    s.bind((f"127.0.1.{1 + i // 50}", 0))  # under max-connections-per-ip
    s.connect((host, port))
    s.sendall(b"POST /forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % body_bytes)
    socks.append(s)
for s in socks:  # most of each body, then a stall
    left = sent_bytes
    s.settimeout(5)
    try:
        while left > 0:
            s.sendall(chunk[:min(left, len(chunk))])
            left -= min(left, len(chunk))
    except OSError:
        pass
time.sleep(1.0)
held = rss_mib()
states = {}
for s in socks:
    st = status_of(s, 0.05)
    states[st] = states.get(st, 0) + 1
print(f"{n} stalled uploads of {body_bytes >> 20} MiB ({sent_bytes >> 20} MiB sent each): "
      f"RSS {base:.0f} MiB before, {held:.0f} MiB while held; uploads: {states}")
for s in socks:
    s.close()
time.sleep(1.0)
# one large JSON body parsed and answered (a refused one: a bad horizon), then idle
rows = 200000
while True:  # as large as max-body-bytes (BODY_BYTES) takes
    big = json.dumps({"candles": {"timestamps": list(range(1, rows + 1)),
                                  **{k: [1.5] * rows for k in ("open", "high", "low", "close")}},
                      "horizon": -1}).encode()
    if len(big) <= body_bytes:
        break
    rows = rows * 9 // 10
c = socket.create_connection((host, port))
c.sendall(b"POST /forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(big) + big)
c.settimeout(30)
reply = b""
while True:
    d = c.recv(65536)
    if not d:
        break
    reply += d
c.close()
time.sleep(1.5)
after = rss_mib()
print(f"after they closed and a {len(big) / 2**20:.1f} MiB JSON body was parsed and refused "
      f"({reply.split(b' ')[1].decode()}): RSS {after:.0f} MiB")
rss_ok = held - base <= budget / 2**20 + 64 and after - base <= 64
if not rss_ok and len(sys.argv) > 8 and sys.argv[8] == "sanitized":
    print("(a sanitizer's quarantine and shadow memory: RSS not checked)")
    rss_ok = True
ok = rss_ok and states.get("held", 0) * body_bytes <= budget + body_bytes and n * body_bytes > budget
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
