"""journal_edit.py — reads and damages a kronosd session journal, for tests/e2e/journal.sh.

The format is server/runtime/exec/journal/journal_format.h's: a header ("KRONOSJ1", u64
fingerprint, u32 length + description, u32 CRC-32), then records of u32 payload length,
u32 CRC-32 (zlib's) and the payload (u8 type, u16 length + id, ...), little-endian here.

  journal_edit.py records FILE             one line a record: offset type id
  journal_edit.py flip FILE OFFSET         one byte inverted
  journal_edit.py header-length FILE N     the header's description length set to N
  journal_edit.py hostile-append FILE ID   a record with a valid CRC appending a candle
                                           whose close is NaN to session ID
"""
import struct
import sys
import zlib


def header_end(b):
    (n,) = struct.unpack_from("<I", b, 16)
    return 20 + n + 4


def records(b):
    off = header_end(b)
    while off + 8 <= len(b):
        (n,) = struct.unpack_from("<I", b, off)
        payload = b[off + 8 : off + 8 + n]
        (idlen,) = struct.unpack_from("<H", payload, 1)
        yield off, chr(payload[0]), payload[3 : 3 + idlen].decode(), payload
        off += 8 + n


def column_mask(b, sid):
    """The column mask of session sid's creation record."""
    for _, t, i, p in records(b):
        if t == "C" and i == sid:
            at = 3 + len(sid)
            (olen,) = struct.unpack_from("<H", p, at)
            at += 2 + olen + 6 + 24 + 24
            return p[at]
    raise SystemExit(f"no creation record of {sid}")


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    b = bytearray(open(path, "rb").read())
    if cmd == "records":
        for off, t, i, _ in records(b):
            print(off, t, i)
        return
    if cmd == "flip":
        b[int(sys.argv[3])] ^= 0xFF
    elif cmd == "header-length":
        struct.pack_into("<I", b, 16, int(sys.argv[3]))
    elif cmd == "hostile-append":
        sid = sys.argv[3]
        mask = column_mask(b, sid)
        cols = [k for k in range(6) if mask & (1 << k)]
        values = [float("nan") if k == 3 else 100.0 for k in cols]
        payload = (b"A" + struct.pack("<H", len(sid)) + sid.encode()
                   + struct.pack("<BBi", 1, 0, 0) + struct.pack("<BI", mask, 1)
                   + struct.pack("<q", 4102444800) + struct.pack(f"<{len(cols)}d", *values))
        b += struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    else:
        raise SystemExit(f"unknown command {cmd}")
    open(path, "wb").write(b)


main()
