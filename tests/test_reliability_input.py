"""Bad input never crashes or hangs anything: queries that look like FTS5 syntax or are
huge or broken, frames that trickle, stall or flood, and note files that are binary,
enormous, looping, vanishing, unreadable or not files at all."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from helpers import GatedEmbedder, run_client, write_notes
from notewell import config
from notewell.engine import Engine
from notewell.model.fake import FakeEmbedder
from notewell.serve import transport
from notewell.sources import markdown as markdown_source
from notewell.wire import protocol
from reliability_helpers import (
    FakeClock,
    ask,
    connect,
    exchange,
    inproc_daemon,
    read_reply,
    search_ids,
    write_corpus,
)

TEXT_NOTES = {
    "near.md": "# Bakery walk\n\nMeet near the bakery, then walk AND talk to the river.\n",
    "title.md": "# Lisbon title deeds\n\nThe title: deeds for the Lisbon flat, in the safe.\n",
    "quotes.md": "# Quoting\n\nShe said \"star\" * twice - then a colon: done.\n",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """One daemon for the module's read-only tests (each would otherwise start its own)."""
    tmp = tmp_path_factory.mktemp("served")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NOTEWELL_HOME", str(tmp / "home"))
        notes = write_notes(tmp / "notes", TEXT_NOTES)
        cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),))
        config.save(cfg)
        with inproc_daemon(cfg) as d:
            yield d


@pytest.fixture
def served_home(served) -> Path:
    return Path(os.environ["NOTEWELL_HOME"])


# -- queries ------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    '"', '""', '"unterminated', "*", "**", "NEAR(", "NEAR(a b", "AND", "OR", "NOT", "-",
    ":", "a:b", "title:", "^", "(", ")", "((", "{body}", "x AND", "- - -", "'; DROP TABLE notes;",
    "\\", "%_", "#", "in:", "#%", "similar:", "similar:nope", "in:no such", "\u202e", "\ufffd",
])
def test_fts5_syntax_is_searched_as_text_never_as_query_syntax(served, query):
    reply = ask("search", query=query)
    assert reply["ok"], reply
    for ending in (" ", ""):  # finished, and still being typed (prefix)
        assert ask("search", query=f"bakery {query}{ending}")["ok"]


def test_operator_words_match_literally(served):
    assert search_ids("NEAR( bakery")[0] == "notes:near.md"
    assert search_ids("title: deeds")[0] == "notes:title.md"
    assert search_ids('"star" * twice')[0] == "notes:quotes.md"
    # column filters are text too: "title:" does not restrict to the title column
    assert "notes:quotes.md" in search_ids("colon: done")


ODD_QUERIES = ["", " ", "\t\n  ", "\x00\x01\x02", "\x1b[31mred", "bakery\x00river",
               "é" * 30_000, "\U0001f600" * 1000, "bakery " * 9000]


@pytest.mark.parametrize("query", ODD_QUERIES[:-1])
def test_empty_blank_control_and_odd_queries_answer(served, query):
    reply = ask("search", query=query)
    assert reply["ok"], reply


@pytest.mark.bench
def test_odd_and_huge_queries_answer_within_two_seconds(served):
    # A speed bound, so a benchmark (make bench): the default run checks the answers.
    for query in ODD_QUERIES:
        start = time.monotonic()
        assert ask("search", query=query)["ok"]
        assert time.monotonic() - start < 2, repr(query[:20])


def test_invalid_utf8_inside_a_request_is_an_error_reply(served):
    body = b"\x82\xa2op\xa6search\xa5query\xa3\xed\xa0\x80"  # a lone surrogate, encoded
    reply = exchange(protocol.frame(body))
    assert reply["error"]["code"] == "bad_message"
    assert ask("ping")["ok"]


def test_a_query_over_the_frame_limit_is_refused_and_one_under_it_is_cut(served):
    reply = exchange(protocol.frame(msgpack.packb({"op": "search", "query": "x" * 100_000})))
    assert reply["error"]["code"] == "bad_frame"
    reply = ask("search", query=ODD_QUERIES[-1])  # 63 KB: accepted, cut to the query cap
    assert reply["ok"]
    assert reply["result"]["hits"][0]["note_id"] == "notes:near.md"


def test_client_with_huge_invalid_and_control_argv_prints_valid_json(served_home):
    cases = [
        ["x" * 100_000],
        [os.fsdecode(b"caf\xe9 \xff\xfe bakery")],
        ["\x01\x02\x1b", "bakery"],
        ['"', "NEAR(", "AND", "-", ":"],
        [""],
    ]
    for argv in cases:
        out = run_client(served_home, *argv)
        assert out.returncode == 0 and out.stderr == b"", out.stderr
        doc = json.loads(out.stdout)
        assert doc["items"], argv


# -- frames and connections ------------------------------------------------------------------

def test_a_frame_split_into_single_bytes_is_still_answered(served):
    data = protocol.frame(protocol.packb(protocol.request("search", query="bakery")))
    s = connect()
    for i in range(len(data)):
        s.sendall(data[i:i + 1])
        time.sleep(0.002)
    reply = read_reply(s)
    s.close()
    assert reply["ok"] and reply["result"]["hits"][0]["note_id"] == "notes:near.md"


def _search_beside_a_trickling_client() -> tuple[list[float], dict]:
    """Searches while another client sends its request one byte a second: their
    latencies, and what the slow client got and after how long."""
    data = protocol.frame(protocol.packb(protocol.request("search", query="bakery")))
    outcome: dict = {}

    def trickle() -> None:
        s = connect()
        start = time.monotonic()
        try:
            for b in data:
                s.sendall(bytes([b]))
                time.sleep(1.0)
        except (BrokenPipeError, ConnectionResetError):
            pass
        outcome["reply"] = read_reply(s)
        outcome["after"] = time.monotonic() - start
        s.close()

    slow = threading.Thread(target=trickle)
    slow.start()
    latencies = []
    while slow.is_alive():
        start = time.monotonic()
        assert search_ids("river bakery")[0] == "notes:near.md"
        latencies.append(time.monotonic() - start)
        time.sleep(0.01)
    slow.join()
    return latencies, outcome


class WatchedClock(FakeClock):
    """A fake clock that counts its reads, so a test moves it only once the server has
    read a deadline off it (a connection's thread reads it: 1, the idle deadline, before
    its first byte; 2 and 3 around that byte's arrival; 4, the frame's deadline)."""

    def __init__(self) -> None:
        super().__init__()
        self._reads = 0
        self._read = threading.Condition()

    def monotonic(self) -> float:
        with self._read:
            self._reads += 1
            self._read.notify_all()
        return super().monotonic()

    def wait_reads(self, n: int) -> None:
        with self._read:
            assert self._read.wait_for(lambda: self._reads >= n, timeout=30), self._reads


def _with_its_op(req, send) -> dict:
    return {"ok": True, "result": {"op": req["op"]}}


@contextlib.contextmanager
def clocked_server(clock: FakeClock, answer=_with_its_op) -> Iterator[None]:
    """The daemon's socket server on ``clock``, answering every request with its op."""
    stop = threading.Event()
    server = transport.Server(answer, stop, clock=clock)
    server.open()
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        yield
    finally:
        stop.set()
        server.wake()
        serving.join(30)
        server.close_socket()
        server.release_lock()


def test_a_trickling_client_delays_nobody_and_is_cut_off_on_the_clock(home):
    """The frame's deadline is read on the daemon's clock: a request whose rest comes
    after ``FRAME_TIMEOUT`` on it is refused, however fast it came in real time; others
    are answered meanwhile."""
    clock = WatchedClock()
    data = protocol.frame(protocol.packb(protocol.request("search", query="bakery")))
    with clocked_server(clock):
        slow = connect()
        clock.wait_reads(1)
        slow.sendall(data[:1])  # its connection thread now waits for the rest
        clock.wait_reads(4)
        for _ in range(3):
            assert ask("ping")["result"] == {"op": "ping"}
        clock.advance(transport.FRAME_TIMEOUT - 0.5)
        slow.sendall(data[1:3])  # in time
        clock.advance(1.0)
        slow.sendall(data[3:])
        reply = read_reply(slow)
        slow.close()
    assert reply["error"]["code"] == "timeout"
    assert f"within {transport.FRAME_TIMEOUT:g} s" in reply["error"]["message"]


def test_a_request_in_time_is_answered_on_the_clock(home):
    clock = WatchedClock()
    data = protocol.frame(protocol.packb(protocol.request("ping")))
    with clocked_server(clock):
        s = connect()
        clock.wait_reads(1)
        clock.advance(transport.IDLE_TIMEOUT - 0.5)  # idle, within bounds
        s.sendall(data[:2])
        clock.wait_reads(4)
        clock.advance(transport.FRAME_TIMEOUT / 2)
        s.sendall(data[2:])
        assert read_reply(s) == {"ok": True, "result": {"op": "ping"}}
        s.close()


@pytest.mark.bench
def test_searches_beside_a_trickling_client_stay_fast(served):
    latencies, outcome = _search_beside_a_trickling_client()
    print(f"{len(latencies)} searches beside a 1 byte/s client: max {max(latencies) * 1e3:.0f} "
          f"ms; the slow client was cut off after {outcome['after']:.1f} s")
    assert max(latencies) < 0.5, max(latencies)
    assert outcome["after"] < transport.FRAME_TIMEOUT + 2


def test_an_answer_that_sent_its_reply_itself_keeps_the_connection(home):
    """``Handlers.answer`` sends a read's reply itself (the preview writer waits on the
    sending too) and says so with ``REPLIED``: nothing more is sent, the next request
    on the connection is read."""
    def replied(req, send):
        send(_with_its_op(req, send))
        return transport.REPLIED

    with clocked_server(WatchedClock(), replied):
        s = connect(timeout=10)
        for op in ("ping", "status", "ping"):
            s.sendall(protocol.frame(protocol.packb(protocol.request(op))))
            assert read_reply(s) == {"ok": True, "result": {"op": op}}
        s.close()


def test_an_idle_connection_is_closed_on_the_clock(home):
    clock = WatchedClock()
    with clocked_server(clock):
        s = connect(timeout=10)
        clock.wait_reads(1)
        clock.advance(transport.IDLE_TIMEOUT + 0.5)
        s.sendall(protocol.frame(protocol.packb(protocol.request("ping"))))
        assert read_reply(s) is None  # closed by the daemon, without an answer
        s.close()


def test_two_hundred_simultaneous_connections_are_served_or_refused_never_left(served):
    socks = [connect(timeout=10) for _ in range(200)]
    request = protocol.frame(protocol.packb(protocol.request("search", query="river")))
    for s in socks:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused: closed
            s.sendall(request)
    answers: dict[str, int] = {}
    for s in socks:
        reply = read_reply(s)
        key = "ok" if reply and reply["ok"] else (reply or {}).get("error", {}).get(
            "code", "closed")
        answers[key] = answers.get(key, 0) + 1
        s.close()
    assert set(answers) <= {"ok", "busy"}, answers
    assert answers.get("ok", 0) >= 1 and sum(answers.values()) == 200
    assert search_ids("river")  # every slot was given back
    print(f"200 simultaneous connections: {answers}")


def test_idle_connections_holding_every_slot_get_busy_then_are_released(served):
    held = [connect() for _ in range(transport.MAX_CONNECTIONS)]
    time.sleep(0.2)
    extra = exchange(protocol.frame(protocol.packb(protocol.request("ping"))))
    assert extra["error"]["code"] == "busy" and "retry" in extra["error"]["message"]
    for s in held:
        s.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if ask("ping")["ok"]:
            break
    assert ask("search", query="bakery")["ok"]


@pytest.mark.parametrize("request_obj", [
    {"op": "search", "query": "x", "limit": 2**63 - 1},
    {"op": "search", "query": "x", "limit": -(2**63)},
    {"op": "search", "query": ["x"] * 1000},
    {"op": "search", "query": {"nested": {"deeper": [1, 2, {"x": None}]}}},
    {"op": "search", "query": "x", "mode": "dense" * 1000},
    {"op": "similar", "note_id": "\x00" * 5000},
    {"op": "sync", "wait": "yes"},
    {"op": "sync_now", "rebuild": "yes"},
    {"op": "search", "query": "x", **{f"k{i}": i for i in range(60)}},
    {"op": "ping", "v": 1.5},
    {"op": "x" * 60_000},
])
def test_nested_huge_and_mistyped_arguments_get_an_error_or_an_answer(served, request_obj):
    reply = exchange(protocol.frame(msgpack.packb(request_obj)))
    assert reply is not None and isinstance(reply["ok"], bool)
    assert ask("ping")["ok"]


@pytest.mark.parametrize("body", [
    b"\x91" * 60_000 + b"\xc0",                   # arrays nested 60,000 deep
    b"\xdd\xff\xff\xff\xff",                      # an array that claims 4 billion items
    b"\xdf\x7f\xff\xff\xff",                      # a map that claims 2 billion pairs
    b"\xdb\xff\xff\xff\xff" + b"a" * 100,         # a string that claims 4 GB
    b"\xc6\x00\x00\xff\xff" + b"\x00" * 1000,     # binary
    msgpack.packb({1: "int key", "op": "ping"}),
    b"",
])
def test_hostile_msgpack_is_refused_without_allocating_it(served, body):
    reply = exchange(protocol.frame(body))
    assert reply is not None and reply["ok"] is False
    assert ask("ping")["ok"]


def test_waiting_syncs_never_hold_the_workers_that_answer_searches(home, tmp_path):
    """`notewell sync` waits for the background sync; six of them at once while a slow
    sync runs must not leave the 4 search workers busy (they once ran the sync)."""
    notes = write_corpus(tmp_path / "notes", 12)
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),))
    config.save(cfg)
    emb = GatedEmbedder()
    with inproc_daemon(config.load(), embedder=emb) as d:  # as on disk: sync_now checks
        emb.block = True  # the sync of this change stops inside its first model call
        write_corpus(notes, 12, version=1)  # every chunk changes
        waiting = [threading.Thread(target=ask, args=("sync_now",),
                                    kwargs={"timeout": 60}) for _ in range(6)]
        for t in waiting:
            t.start()
        assert emb.inside.wait(30)
        for _ in range(12):  # three times the workers: none of them is left to a sync
            assert ask("search", query="zq3x")["ok"]
        assert not emb.passed.is_set() and all(t.is_alive() for t in waiting)
        emb.gate.set()
        for t in waiting:
            t.join()
        assert d.background.last_reports[0]["error"] is None
        assert search_ids("zq3x")[0] == "notes:n003.md"


# -- bad notes ---------------------------------------------------------------------------

GOOD = {f"good/g{i}.md": f"# Good {i}\n\nA perfectly ordinary note about topic{i}.\n"
        for i in range(5)}


def _bad_vault(root: Path) -> dict[str, str]:
    """Write good notes and one of each kind of bad file; returns what each bad one is."""
    write_notes(root, GOOD)
    bad = root / "bad"
    bad.mkdir()
    (bad / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (bad / "utf16-broken.md").write_bytes(b"\xff\xfe" + "# Hi".encode("utf-16-le") + b"\x00\xd8")
    with open(bad / "huge.md", "wb") as f:  # 20 MB
        f.write(b"# Huge\n\n" + b"word " * (4 * 1024 * 1024))
    os.mkfifo(bad / "fifo.md")  # opening it for reading would block forever
    os.symlink("/dev/zero", bad / "zero.md")  # out of the folder: skipped, never read
    os.symlink(".", bad / "loop")  # a folder loop
    os.symlink("b-link.md", bad / "a-link.md")  # a file symlink loop
    os.symlink("a-link.md", bad / "b-link.md")
    os.symlink("missing-target.md", bad / "dangling.md")
    (bad / "denied.md").write_text("# Denied\n\nroot reads anything; open() is patched\n")
    (bad / "vanishing.md").write_text("# Vanishing\n\ndeleted between scan and load\n")
    (root / "latin1.md").write_bytes("# Café notes\n\nCrème brûlée recipe.\n".encode("cp1252"))
    return {"binary.md": "binary", "utf16-broken.md": "could not be read", "huge.md": "MB",
            "fifo.md": "not a regular file", "denied.md": "permission denied"}


def test_bad_notes_are_skipped_with_one_warning_each_and_the_rest_indexed(
        tmp_path, monkeypatch, caplog):
    """Running as root, chmod 000 does not stop a read, so permission denied is simulated
    by making ``os.open`` raise for that one file, as the kernel would."""
    root = tmp_path / "vault"
    expected = _bad_vault(root)
    real_open = os.open

    def guarded_open(path, flags, *args, **kwargs):
        if str(path).endswith("denied.md"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(markdown_source.os, "open", guarded_open)
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(root)),))
    engine = Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "index"))
    src = engine.sources[0]
    real_load = src.load

    def load_after_vanishing(note_id: str):
        if note_id.endswith("vanishing.md"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(root / "bad" / "vanishing.md")
        return real_load(note_id)

    src.load = load_after_vanishing
    caplog.set_level(logging.WARNING)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(engine.sync()[0]), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "a sync hung on a bad file"
    report = result[0]
    assert report.error is None
    titles = {r[0] for r in engine.index.db.execute("SELECT title FROM notes")}
    assert {f"Good {i}" for i in range(5)} | {"Café notes"} <= titles
    assert not titles & {"Huge", "Denied", "Vanishing", "Hi"}
    for name, why in expected.items():
        mine = [w for w in report.warnings if name in w]
        assert len(mine) == 1 and why in mine[0], (name, report.warnings)
        assert sum(name in r.getMessage() for r in caplog.records) == 1, name
    assert len(report.warnings) == len(expected), report.warnings
    assert report.links_out == 1  # zero.md -> /dev/zero, counted, not read (issue 36.3)
    assert not engine.index.consistency_problems()

    caplog.clear()
    again = engine.sync()[0]  # unchanged bad files: not read again, not warned again
    assert again.warnings == [] and not caplog.records
    engine.close()
    print("skipped with one warning each: " + ", ".join(sorted(expected)) +
          "; skipped silently by the folder walk: loop, a-link.md/b-link.md, dangling.md; "
          "a link out of the folder, counted: zero.md; "
          "vanished: vanishing.md")


def test_a_bad_vault_through_the_daemon_and_client(home, tmp_path):
    root = tmp_path / "vault"
    _bad_vault(root)
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(root)),))
    config.save(cfg)
    with inproc_daemon(cfg) as d:
        assert d.background.last_reports[0]["error"] is None
        out = json.loads(run_client(home, "ordinary", "topic3").stdout)
        assert out["items"][0]["title"] == "Good 3"
        assert ask("status")["result"]["notes"] >= 6


@pytest.mark.parametrize("op", [{"a": 1}, ["ping"], None, 7])
def test_an_op_that_is_no_string_gets_an_error_reply(op):
    from notewell.config import Config
    from notewell.serve.handlers import Handlers

    handlers = Handlers(Config(), None, request_stop=lambda: None)  # type: ignore[arg-type]
    sent: list[dict] = []
    try:
        assert handlers.answer({"op": op}, sent.append) is transport.REPLIED
    finally:
        handlers.shutdown()
    assert [r["error"]["code"] for r in sent] == ["bad_request"]
