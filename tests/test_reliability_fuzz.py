"""Property-based fuzzing of the socket protocol: thousands of random, malformed and
mutated frames against one running daemon (a subprocess, so a crash is a dead process),
then a real query must still answer correctly and the index must be intact.

Each frame must get an error reply, a valid answer or a closed connection within
seconds; never a hang, never a dead daemon. Set NOTEWELL_FUZZ_EXAMPLES for a longer run.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time

import msgpack
from helpers import start_daemon, wait_synced
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from notewell.wire import paths, protocol
from reliability_helpers import index_problems, search_ids

EXAMPLES = int(os.environ.get("NOTEWELL_FUZZ_EXAMPLES", "3000"))
# Frames per hypothesis example: generating one example costs more than sending it, and
# less per frame when several are drawn together (measured 11 ms vs 4-6 ms a frame).
PER_EXAMPLE = 5
OPS = ["ping", "status", "search", "similar", "schedule_sync", "sync", "nope", "", "SEARCH"]

scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
           | st.floats(allow_nan=True) | st.text(max_size=40) | st.binary(max_size=40))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=6),
                      max_leaves=10)
requests = st.fixed_dictionaries(
    {"op": st.sampled_from(OPS) | st.text(max_size=12)},
    optional={"query": st.text(max_size=200) | values, "limit": st.integers(-5, 10**6) | values,
              "format": st.sampled_from(["json", "alfred", "xml"]) | values,
              "mode": st.sampled_from(["hybrid", "dense", "bm25", "x"]),
              "v": st.sampled_from([1, 2, 0, -1]) | values, "note_id": st.text(max_size=60),
              "wait": st.booleans() | values},
)


def _pack(obj) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        return b"\xc0"


@st.composite
def mutated(draw, body: bytes) -> bytes:
    data = bytearray(protocol.frame(body))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "length", "dup"]))
        if kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut" and data:
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif kind == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "length":
            n = draw(st.sampled_from([0, 1, 3, 2**16, 2**16 + 1, 2**31, 2**32 - 1])
                     | st.integers(0, 2**32 - 1))
            data[:4] = n.to_bytes(4, "big")
        elif kind == "dup":
            data += bytes(data)
    return bytes(data)


frames = st.one_of(
    requests.map(lambda r: protocol.frame(_pack(r))),                    # well framed requests
    values.map(lambda v: protocol.frame(_pack(v))),                      # any msgpack at all
    st.binary(max_size=300).map(protocol.frame),                         # framed noise
    st.binary(max_size=64),                                              # unframed noise
    requests.flatmap(lambda r: mutated(_pack(r))),                       # mutated requests
    st.lists(requests, min_size=2, max_size=4).map(                      # several per connection
        lambda rs: b"".join(protocol.frame(_pack(r)) for r in rs)),
)


def _stops(data: bytes) -> bool:
    """A frame that asks the daemon to stop is legitimate and would end the run."""
    return b"stop" in data


def _exchange(data: bytes) -> list[dict | None]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)  # a daemon that sits on a frame (it must cut one off) times out here
    s.connect(paths.socket_path())
    replies: list[dict | None] = []
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        while True:
            try:
                body = protocol.read_frame(s, protocol.MAX_REPLY_BYTES)
            except (protocol.ProtocolError, ConnectionResetError):
                break
            replies.append(msgpack.unpackb(body, raw=False))
    finally:
        s.close()
    return replies


def test_thousands_of_random_and_mutated_frames_then_a_real_query(home, notes_config):
    d = start_daemon(home, poll=0.5)
    stats = {"frames": 0, "replies": 0, "ok": 0, "errors": 0, "closed_silently": 0}
    codes: dict[str, int] = {}
    started = time.monotonic()
    try:
        wait_synced(d)

        @settings(max_examples=EXAMPLES // PER_EXAMPLE, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(frames, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
        def some(batch: list[bytes]) -> None:
            for data in batch:
                if not _stops(data):
                    one(data)
            assert d.proc.poll() is None, "the daemon died"

        def one(data: bytes) -> None:
            replies = _exchange(data)
            stats["frames"] += 1
            stats["closed_silently"] += not replies
            for reply in replies:
                assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
                stats["replies"] += 1
                if reply["ok"]:
                    stats["ok"] += 1
                else:
                    stats["errors"] += 1
                    code = reply["error"]["code"]
                    codes[code] = codes.get(code, 0) + 1

        some()
        assert d.proc.poll() is None
        assert search_ids("banana bread")[0] == "notes:kitchen/banana-bread.md"
        assert search_ids("postgres vacuum")[0] == "notes:db/postgres-vacuum.md"
        assert d.ask("status")["result"]["notes"] == 4
    finally:
        assert d.stop() == 0
    assert "Traceback" not in d.log.read_text()
    assert not index_problems(home / "index")
    assert stats["frames"] >= min(EXAMPLES, 3000) * 0.95, stats
    print(f"fuzz: {stats['frames']} frames in {time.monotonic() - started:.1f} s; "
          f"{stats['replies']} replies ({stats['ok']} ok, {stats['errors']} errors "
          f"{dict(sorted(codes.items()))}), {stats['closed_silently']} closed without a "
          "reply; the daemon then answered real queries correctly")
