"""The client's import-free msgpack codec agrees with the real msgpack, and frames are bounded."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from notewell.wire import protocol

scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
           | st.floats(allow_nan=False) | st.text(max_size=300) | st.binary(max_size=300))
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=20)
    | st.dictionaries(st.text(max_size=20), children, max_size=20),
    max_leaves=60,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_codec_matches_msgpack_both_ways(value):
    ours = protocol.packb(value)
    theirs = msgpack.packb(value, use_bin_type=True)
    assert ours == theirs
    assert protocol.unpackb(theirs) == msgpack.unpackb(theirs, raw=False, strict_map_key=False)


@pytest.mark.parametrize("n", [0, 31, 32, 255, 256, 65535, 65536])
def test_lengths_at_every_boundary(n):
    for value in ("x" * n, b"x" * n, [0] * min(n, 70000), {str(i): i for i in range(min(n, 300))}):
        assert protocol.unpackb(protocol.packb(value)) == value
        assert protocol.packb(value) == msgpack.packb(value, use_bin_type=True)


def test_float32_from_other_encoders_decodes():
    data = msgpack.packb(1.5, use_single_float=True)
    assert protocol.unpackb(data) == 1.5


@pytest.mark.parametrize("data", [b"", b"\x92\x01", b"\xa5abc", b"\xd9", b"\xc1", b"\x81\x90\x01",
                                  b"\xa2\xff\xfe", b"\x01\x02"])
def test_malformed_input_raises_protocol_error(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.unpackb(data)


def test_deep_nesting_is_refused():
    data = b"\x91" * 100 + b"\x00"
    with pytest.raises(protocol.ProtocolError):
        protocol.unpackb(data)


def test_frame_length_limit():
    assert protocol.frame_length((100).to_bytes(4, "big"), 1000) == 100
    with pytest.raises(protocol.ProtocolError):
        protocol.frame_length((2**31).to_bytes(4, "big"), protocol.MAX_REQUEST_BYTES)
    assert protocol.frame(b"abc") == b"\x00\x00\x00\x03abc"
