#!/usr/bin/env python3
"""slowclients.py — misbehaving HTTP clients against a kronosd on 127.0.0.1, bounded in time.

  slowloris PORT CONNS ADDRS SECS   CONNS connections spread over ADDRS loopback source
                                    addresses (127.0.0.2, ...), each sending a header byte
                                    every 5 s and reconnecting when closed, for SECS seconds,
                                    while /health is asked from 127.0.0.1 every 0.1 s. Prints
                                    JSON: health latencies (max, p99), failures, connections
                                    held and closed by the server.
  trickle PORT HEX TIMEOUT          sends HEX, then one header byte every 0.5 s; prints JSON
                                    {seconds, closed}: how long until the server hung up.
  raw PORT HEX TIMEOUT              sends bytes, prints JSON {seconds, closed, reply}: the
                                    time to the server's close (or TIMEOUT) and its reply.
"""
import json
import resource
import selectors
import socket
import sys
import time


def health(port):
    t = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        s.close()
        ok = data.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return ok, time.monotonic() - t


def slowloris(port, conns, addrs, secs):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, conns + 256)), hard))
    sel = selectors.DefaultSelector()
    header = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-a: " + b"b" * 4000
    state = {}  # sock -> [bytes sent, next send time]
    opened = closed_by_server = refused = 0

    def open_one(i):
        nonlocal opened, refused
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((f"127.0.0.{2 + i % addrs}", 0))
            s.connect_ex(("127.0.0.1", port))
        except OSError:
            refused += 1
            s.close()
            return
        opened += 1
        state[s] = [0, time.monotonic(), i]
        sel.register(s, selectors.EVENT_READ)

    for i in range(conns):
        open_one(i)
    lat, fails, reopen = [], 0, []
    end = time.monotonic() + secs
    next_health = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        for s, st in list(state.items()):
            if now >= st[1]:
                try:
                    s.send(header[st[0] : st[0] + 1])
                    st[0] += 1
                except OSError:
                    pass
                st[1] = now + 5
        for key, _ in sel.select(timeout=0.02):
            s = key.fileobj
            try:
                gone = s.recv(4096) == b""
            except OSError:
                gone = True
            if gone:  # the server hung up: come back a second later, as an attacker would
                i = state.pop(s)[2]
                sel.unregister(s)
                s.close()
                closed_by_server += 1
                reopen.append((time.monotonic() + 1, i))
        while reopen and reopen[0][0] <= now:
            open_one(reopen.pop(0)[1])
        if now >= next_health:
            ok, t = health(port)
            lat.append(t)
            fails += not ok
            next_health = now + 0.1
    held = len(state)
    for s in state:
        s.close()
    lat.sort()
    print(json.dumps({
        "health_requests": len(lat), "health_failed": fails,
        "health_max_s": round(lat[-1], 4) if lat else None,
        "health_p99_s": round(lat[int(len(lat) * 0.99) - 1], 4) if lat else None,
        "opened": opened, "closed_by_server": closed_by_server, "held_at_end": held,
        "open_errors": refused}))


def raw(port, hexdata, timeout):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    t = time.monotonic()
    s.sendall(bytes.fromhex(hexdata))
    out, closed = b"", False
    try:
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except socket.timeout:
        pass
    except OSError:
        closed = True
    print(json.dumps({"seconds": round(time.monotonic() - t, 3), "closed": closed,
                      "reply": out.decode("latin-1")}))


def trickle(port, hexdata, timeout):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.5)
    t = time.monotonic()
    s.sendall(bytes.fromhex(hexdata))
    closed = False
    while time.monotonic() - t < timeout and not closed:
        try:
            s.send(b"x")
            closed = s.recv(4096) == b""
        except socket.timeout:
            pass
        except OSError:
            closed = True
    print(json.dumps({"seconds": round(time.monotonic() - t, 3), "closed": closed}))


if __name__ == "__main__":
    if sys.argv[1] == "slowloris":
        slowloris(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "trickle":
        trickle(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    else:
        raw(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
