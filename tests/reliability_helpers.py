"""Helpers for the reliability tests: a daemon in this process (so timeouts and hooks can
be patched), raw socket exchanges, a generated corpus and index checks; and a fake clock,
which the watcher and response-cache tests use too."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
from notewell import config
from notewell.engine import Engine
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.model.fake import FakeEmbedder
from notewell.serve import daemon
from notewell.wire import client, paths, protocol

FAKE_SETTINGS = BuildSettings(FakeEmbedder().fingerprint(), FakeEmbedder().dim,
                              ChunkSettings().fingerprint())

WORDS = (
    "river", "stone", "lantern", "orchard", "copper", "meadow", "harbor", "violet", "summit",
    "cedar", "falcon", "ember", "glacier", "hollow", "juniper", "kettle", "linen", "marble",
    "nectar", "oyster", "pepper", "quartz", "saffron", "thistle", "umber", "velvet", "willow",
    "yarrow", "zephyr", "anchor", "bramble", "cobalt", "dune",
)


class FakeClock:
    """A ``Clock`` (``notewell.clock``) that moves only when told to: debounce,
    backoff, lag and expiry are tested by advancing it, never by waiting them out."""

    def __init__(self, wall: float = 1_700_000_000.0) -> None:
        self._wall = wall
        self._elapsed = 0.0

    def monotonic(self) -> float:
        return 1_000.0 + self._elapsed

    def time(self) -> float:
        return self._wall + self._elapsed

    def advance(self, seconds: float) -> None:
        self._elapsed += seconds


@contextlib.contextmanager
def inproc_daemon(cfg: config.Config, embedder: FakeEmbedder | None = None,
                  timeout: float = 20.0,
                  engine_factory: Callable[[config.Config], Engine] | None = None
                  ) -> Iterator[daemon.Daemon]:
    """A real ``Daemon`` on the real socket, run by threads of this process (its engine
    made by ``engine_factory``, by default on the fake embedder)."""
    emb = embedder or FakeEmbedder()
    d = daemon.Daemon(cfg, engine_factory=engine_factory or (
        lambda c: Engine(c, embedder=emb)), poll_seconds=0.5, use_events=False)
    d.start()
    server = threading.Thread(target=d.serve_forever, daemon=True)
    server.start()
    deadline = time.monotonic() + timeout
    while (d.background.state not in ("ready", "rebuilding") or not d.background.last_reports) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    assert d.background.state in ("ready", "rebuilding"), d.background.problem
    try:
        yield d
    finally:
        d.request_stop()
        server.join(timeout=5)


def connect(timeout: float = 10.0) -> socket.socket:
    """Connected as the real client connects (waiting when the listen queue is full)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    client._connect(s, paths.socket_path(), timeout)
    return s


def read_reply(s: socket.socket) -> dict | None:
    """The next reply on ``s``, or None if the daemon closed the connection instead."""
    try:
        body = protocol.read_frame(s, protocol.MAX_REPLY_BYTES)
    except (protocol.ProtocolError, ConnectionResetError):
        return None
    return msgpack.unpackb(body, raw=False)


def exchange(data: bytes, timeout: float = 10.0) -> dict | None:
    """Send raw bytes, end our side, and return the daemon's reply (None: it closed)."""
    s = connect(timeout)
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        return read_reply(s)
    finally:
        s.close()


def ask(op: str, timeout: float = 10.0, **args) -> dict:
    s = connect(timeout)
    try:
        s.sendall(protocol.frame(protocol.packb(protocol.request(op, **args))))
        reply = read_reply(s)
        assert reply is not None, f"daemon closed the connection on {op}"
        return reply
    finally:
        s.close()


def search_ids(query: str, limit: int = 5, timeout: float = 10.0) -> list[str]:
    reply = ask("search", timeout=timeout, query=query, limit=limit)
    assert reply["ok"], reply
    return [h["note_id"] for h in reply["result"]["hits"]]


def note_text(i: int, version: int = 0, paragraphs: int = 3) -> str:
    """A note with a unique marker word and a few headed sections (several chunks). The
    marker dominates every section, so with the fake embedder too its note is the one
    answer to a query for it, whatever the ranking's fusion details."""
    rng = random.Random(i * 1000 + version)
    marker = f"zq{i}x"
    parts = [f"# Note {marker}\n"]
    for p in range(paragraphs):
        body = " ".join(rng.choice(WORDS) for _ in range(30))
        parts.append(f"## Part {p} v{version}\n\n{' '.join([marker] * 10)} {body}.\n")
    return "\n".join(parts)


def write_corpus(root: Path, n: int, version: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"n{i:03d}.md").write_text(note_text(i, version), encoding="utf-8")
    return root


def markdown_config(root: Path, **options) -> config.Config:
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(root), (),
                                                     options),),
                        debug_log=bool(options.pop("debug_log", False)))
    config.save(cfg)
    return config.load()


def index_problems(index_dir: Path | str) -> list[str]:
    """Integrity and one-to-one consistency problems of the current index generation."""
    from notewell.index import store

    index = Index(store.current_path(str(index_dir)), FAKE_SETTINGS)
    try:
        return index.consistency_problems()
    finally:
        index.close()


_FORKER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from notewell import config
from notewell.model.fake import FakeEmbedder
from notewell.engine import Engine

signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
for line in sys.stdin:
    cfg_path, index_dir, delay = line.rstrip("\n").split("\t")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            Engine(config.load(cfg_path), embedder=FakeEmbedder(delay=float(delay)),
                   index_dir=index_dir).sync()
            code = 0
        finally:
            os._exit(code)
    print(pid, flush=True)
"""


class SyncForker:
    """Starts syncs as forks of one single-threaded helper that has already imported
    notewell: each starts in milliseconds (so a random kill lands in the work, not in the
    interpreter's start), and no fork ever copies a thread's held lock."""

    def __init__(self) -> None:
        import subprocess
        import sys

        repo = Path(__file__).resolve().parent.parent
        self.proc = subprocess.Popen([sys.executable, "-c", _FORKER, str(repo / "daemon")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def start(self, cfg_path: str, index_dir: str, delay: float) -> int:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{cfg_path}\t{index_dir}\t{delay}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    @staticmethod
    def kill(pid: int, timeout: float = 10.0) -> None:
        import os
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.005)
        raise TimeoutError(f"process {pid} survived SIGKILL")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
