"""The wire protocol between the daemon and its clients.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack. A request is
a map ``{"op": str, "v": PROTOCOL_VERSION, **args}``; a reply is ``{"ok": True, "result": ...}``
or ``{"ok": False, "error": {"code": str, "message": str}}``. Long work asked with
``progress`` (the ``index`` op) sends ``{"progress": event}`` frames before its reply.

The per-keystroke client must start in a few milliseconds, and importing the ``msgpack``
package costs more than the whole interpreter start (measured: about 6 ms against 7.5 ms),
so this module carries a small codec for the subset of msgpack the protocol uses (nil,
bool, int, float, str, bin, array, map). It imports nothing. The daemon decodes untrusted
input with the real ``msgpack`` library; tests check both agree byte for byte.
"""

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 64 * 1024
MAX_QUERY_CHARS = 1000  # longer queries are cut here, by the client and by the daemon
MAX_REPLY_BYTES = 16 * 1024 * 1024
HEADER_BYTES = 4


class ProtocolError(Exception):
    """A frame or message that does not follow the protocol."""


class FrameTooLarge(ProtocolError):
    """A frame announced as longer than the reader takes: the peer answered, too much."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes is over the limit of {limit}")
        self.size, self.limit = size, limit


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER_BYTES, "big") + body


def frame_length(header: bytes, limit: int) -> int:
    n = int.from_bytes(header, "big")
    if n > limit:
        raise FrameTooLarge(n, limit)
    return n


def recv_exact(sock, n: int) -> bytes:
    """Read exactly ``n`` bytes; raises ``ProtocolError`` if the peer closes early."""
    chunks = []
    while n:
        data = sock.recv(min(n, 1 << 20))
        if not data:
            raise ProtocolError("connection closed mid-frame")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def read_frame(sock, limit: int) -> bytes:
    return recv_exact(sock, frame_length(recv_exact(sock, HEADER_BYTES), limit))


# --- the small msgpack codec -------------------------------------------------------


def packb(obj) -> bytes:
    out = bytearray()
    _pack(obj, out)
    return bytes(out)


def _pack(obj, out: bytearray) -> None:
    if obj is None:
        out.append(0xC0)
    elif obj is True:
        out.append(0xC3)
    elif obj is False:
        out.append(0xC2)
    elif isinstance(obj, int):
        _pack_int(obj, out)
    elif isinstance(obj, float):
        out.append(0xCB)
        out += _float_bytes(obj)
    elif isinstance(obj, str):
        data = obj.encode("utf-8")
        _pack_len(len(data), out, 0xA0, 31, 0xD9, 0xDA, 0xDB)
        out += data
    elif isinstance(obj, (bytes, bytearray)):
        _pack_len(len(obj), out, None, 0, 0xC4, 0xC5, 0xC6)
        out += obj
    elif isinstance(obj, (list, tuple)):
        _pack_len(len(obj), out, 0x90, 15, None, 0xDC, 0xDD)
        for item in obj:
            _pack(item, out)
    elif isinstance(obj, dict):
        _pack_len(len(obj), out, 0x80, 15, None, 0xDE, 0xDF)
        for key, value in obj.items():
            _pack(key, out)
            _pack(value, out)
    else:
        raise TypeError(f"cannot encode {type(obj).__name__}")


def _pack_len(n: int, out: bytearray, fix, fixmax: int, b8, b16: int, b32: int) -> None:
    if fix is not None and n <= fixmax:
        out.append(fix | n)
    elif b8 is not None and n < 0x100:
        out.append(b8)
        out.append(n)
    elif n < 0x10000:
        out.append(b16)
        out += n.to_bytes(2, "big")
    else:
        out.append(b32)
        out += n.to_bytes(4, "big")


def _pack_int(n: int, out: bytearray) -> None:
    if 0 <= n < 0x80:
        out.append(n)
    elif -32 <= n < 0:
        out.append(n & 0xFF)
    elif n >= 0:
        for code, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
            if n < 1 << (8 * size):
                out.append(code)
                out += n.to_bytes(size, "big")
                return
        raise OverflowError("integer too large for msgpack")
    else:
        for code, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
            if n >= -(1 << (8 * size - 1)):
                out.append(code)
                out += n.to_bytes(size, "big", signed=True)
                return
        raise OverflowError("integer too large for msgpack")


def _float_bytes(x: float) -> bytes:
    # ``struct`` would cost an import on the hot path; a memoryview cast gives the
    # native IEEE 754 double, which msgpack wants big-endian.
    buf = bytearray(8)
    memoryview(buf).cast("B").cast("d")[0] = x
    return bytes(reversed(buf)) if _LITTLE else bytes(buf)


def _unfloat(data: bytes) -> float:
    buf = bytearray(reversed(data)) if _LITTLE else bytearray(data)
    return memoryview(buf).cast("d")[0]


_LITTLE = memoryview(b"\x01\x00").cast("H")[0] == 1


def unpackb(data: bytes):
    value, end = _unpack(data, 0, 0)
    if end != len(data):
        raise ProtocolError("trailing bytes after message")
    return value


_MAX_DEPTH = 32


def _unpack(data: bytes, i: int, depth: int):
    if depth > _MAX_DEPTH:
        raise ProtocolError("message nested too deeply")
    try:
        b = data[i]
    except IndexError:
        raise ProtocolError("truncated message") from None
    i += 1
    if b < 0x80:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0xA0 <= b <= 0xBF:
        return _take_str(data, i, b & 0x1F)
    if 0x90 <= b <= 0x9F:
        return _take_array(data, i, b & 0x0F, depth)
    if 0x80 <= b <= 0x8F:
        return _take_map(data, i, b & 0x0F, depth)
    if b == 0xC0:
        return None, i
    if b == 0xC2:
        return False, i
    if b == 0xC3:
        return True, i
    sizes = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
    if b in sizes:
        n = sizes[b]
        return int.from_bytes(_take(data, i, n), "big", signed=b >= 0xD0), i + n
    if b == 0xCB:
        return _unfloat(_take(data, i, 8)), i + 8
    if b == 0xCA:
        buf = bytearray(reversed(_take(data, i, 4))) if _LITTLE else bytearray(_take(data, i, 4))
        return memoryview(buf).cast("f")[0], i + 4
    lengths = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4, 0xDC: 2, 0xDD: 4,
               0xDE: 2, 0xDF: 4}
    if b in lengths:
        w = lengths[b]
        n = int.from_bytes(_take(data, i, w), "big")
        i += w
        if b in (0xD9, 0xDA, 0xDB):
            return _take_str(data, i, n)
        if b in (0xC4, 0xC5, 0xC6):
            return bytes(_take(data, i, n)), i + n
        if b in (0xDC, 0xDD):
            return _take_array(data, i, n, depth)
        return _take_map(data, i, n, depth)
    raise ProtocolError(f"unsupported msgpack type byte 0x{b:02x}")


def _take(data: bytes, i: int, n: int) -> bytes:
    if i + n > len(data):
        raise ProtocolError("truncated message")
    return data[i : i + n]


def _take_str(data: bytes, i: int, n: int):
    try:
        return _take(data, i, n).decode("utf-8"), i + n
    except UnicodeDecodeError:
        raise ProtocolError("invalid UTF-8 in string") from None


def _take_array(data: bytes, i: int, n: int, depth: int):
    items = []
    for _ in range(n):
        item, i = _unpack(data, i, depth + 1)
        items.append(item)
    return items, i


def _take_map(data: bytes, i: int, n: int, depth: int):
    result = {}
    for _ in range(n):
        key, i = _unpack(data, i, depth + 1)
        value, i = _unpack(data, i, depth + 1)
        if isinstance(key, (list, dict)):
            raise ProtocolError("unhashable map key")
        result[key] = value
    return result, i


def request(op: str, **args) -> dict:
    return {"op": op, "v": PROTOCOL_VERSION, **args}
