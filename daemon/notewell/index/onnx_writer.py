"""Small ONNX graphs as bytes, without the ``onnx`` package.

``coarse`` builds two tiny graphs (a projection, a 4-bit scoring product) whenever a
vector copy is loaded. Importing ``onnx`` just to serialize them kept 12 MB resident in
the daemon for good (measured), 4% of its memory budget at 100k chunks; ``model_file``
still uses ``onnx`` to read and edit the model itself, once. ONNX files are protocol
buffers, and these few messages are simple to write: the field numbers below are those
of ``onnx.proto``, and ``tests/test_perf_coarse.py`` reads what this module writes back
through ``onnx`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence

FLOAT, UINT8, INT64 = 1, 2, 7  # TensorProto.DataType
IR_VERSION = 8  # opset 17 needs 8; onnxruntime 1.17 reads up to 9
_ATTRIBUTE_INT = 2  # AttributeProto.AttributeType.INT
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 fields: negatives as two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def tensor(name: str, dtype: int, dims: Sequence[int], raw: bytes | None = None,
           external: bool = False) -> bytes:
    """A ``TensorProto``: data in ``raw``, or ``external``: supplied at session creation
    (``SessionOptions.add_external_initializers``)."""
    out = b"".join(_int(1, d) for d in dims) + _int(2, dtype) + _str(8, name)
    if raw is not None:
        out += _bytes(9, raw)
    if external:
        out += _bytes(13, _str(1, "location") + _str(2, "in-memory")) + _int(14, _EXTERNAL)
    return out


def value_info(name: str, dtype: int, dims: Sequence[int | str]) -> bytes:
    """A graph input or output: a tensor of ``dtype``; a ``str`` dimension is symbolic."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d))
                     for d in dims)
    tensor_type = _int(1, dtype) + _bytes(2, shape)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], domain: str = "",
         **ints: int) -> bytes:
    """A ``NodeProto`` whose attributes are all integers."""
    out = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    out += _str(4, op) + (_str(7, domain) if domain else b"")
    for key, value in ints.items():
        out += _bytes(5, _str(1, key) + _int(3, value) + _int(20, _ATTRIBUTE_INT))
    return out


def model(nodes: Sequence[bytes], inputs: Sequence[bytes], outputs: Sequence[bytes],
          initializers: Sequence[bytes] = (), name: str = "notewell") -> bytes:
    """A ``ModelProto`` with the standard opset 17 and Microsoft's contrib operators."""
    graph = (b"".join(_bytes(1, n) for n in nodes) + _str(2, name)
             + b"".join(_bytes(5, t) for t in initializers)
             + b"".join(_bytes(11, i) for i in inputs)
             + b"".join(_bytes(12, o) for o in outputs))
    opsets = (_bytes(8, _str(1, "") + _int(2, 17))
              + _bytes(8, _str(1, "com.microsoft") + _int(2, 1)))
    return _int(1, IR_VERSION) + opsets + _bytes(7, graph)
