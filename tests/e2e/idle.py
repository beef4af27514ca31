"""idle.py — idle keep-alive connections cannot lock new clients out.

Opens HOLD keep-alive connections spread over ADDRS loopback addresses (each asks
GET /health once, then stays open and silent), more than the daemon's max-connections;
then a client from another address asks /health PROBES times, each on a new connection,
and a forecast: every one must be answered within a second or two. Prints the p50/p99 of
the probes and how many held connections the daemon closed to make room.
Usage: idle.py HOST PORT HOLD ADDRS PROBES [FORECAST_BODY_FILE]."""
import resource
import socket
import sys
import time

host, port, hold, addrs, probes = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6])
body = open(sys.argv[6], "rb").read() if len(sys.argv) > 6 else None
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < hold + 64:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, hold + 256), hard))

GET = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def answer(s, deadline):
    """Reads one response on s (headers and Content-Length body); its status or None."""
    s.settimeout(max(0.01, deadline - time.monotonic()))
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                return None
            rest += chunk
        return int(head.split(b" ")[1])
    except (socket.timeout, OSError, ValueError):
        return None


held, answered_first = [], 0
t0 = time.monotonic()
for i in range(hold):
    s = socket.socket()
    s.bind((f"127.0.0.{10 + i % addrs}", 0))
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    held.append(s)
for s in held:  # one request each, then silence (keep-alive)
    try:
        s.setblocking(True)
        s.settimeout(2)
        s.sendall(GET)
    except OSError:
        pass
deadline = time.monotonic() + 5
for s in held:
    answered_first += answer(s, deadline) == 200
print(f"held {hold} connections from {addrs} addresses; {answered_first} answered their "
      f"first /health within 5 s ({time.monotonic() - t0:.1f} s)")

lat, failures = [], 0
for i in range(probes):
    t = time.monotonic()
    s = socket.socket()
    s.bind(("127.0.0.200", 0))
    s.settimeout(3)
    try:
        s.connect((host, port))
        s.sendall(GET)
        ok = answer(s, t + 3) == 200
    except OSError:
        ok = False
    s.close()
    lat.append(time.monotonic() - t)
    failures += not ok
lat.sort()
p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
forecast = None
if body:
    s = socket.socket()
    s.bind(("127.0.0.201", 0))
    s.settimeout(10)
    try:
        s.connect((host, port))
        s.sendall(b"POST /forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        forecast = answer(s, time.monotonic() + 10)
    except OSError:
        pass
    s.close()
closed = 0
for s in held:  # the daemon closed some of them to make room
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(f"/health from a new address while they are held: {probes - failures}/{probes} answered, "
      f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms; forecast: {forecast}; "
      f"{closed} held connections closed by the daemon")
for s in held:
    s.close()
ok = failures == 0 and p99 < 2.0 and (body is None or forecast == 200) and closed > 0
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
