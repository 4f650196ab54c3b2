"""A copy that fails to load is never silent: the failure is logged with its error, shown
by ``notewell status`` (JSON and text) and ``doctor``, and retried with a backoff that the
injected clock decides (nothing here waits it out)."""

from __future__ import annotations

import json
import logging
import threading
import time

import apsw
import numpy as np
from index_helpers import current_copies
from notewell.engine import Engine
from notewell.index.copies import RETRY_FIRST, CopySettings
from notewell.index.database import Index
from notewell.index.schema import BuildSettings, connect
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor
from notewell.ops.checks import WARN
from notewell.serve import daemon
from reliability_helpers import FakeClock

DIM = 16


def until(done, timeout: float = 30.0) -> bool:
    """Whether ``done()`` came true before ``timeout`` (a real loader thread runs it)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class FlakyConnect:
    """A loader's ``connect`` that fails while ``broken`` is set; counts its calls."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0
        self.called = threading.Condition()

    def __call__(self, path: str) -> apsw.Connection:
        with self.called:
            self.calls += 1
            self.called.notify_all()
        if self.broken:
            raise apsw.CantOpenError("unable to open database file")
        return connect(path)

    def wait_for(self, calls: int) -> bool:
        with self.called:
            return self.called.wait_for(lambda: self.calls >= calls, timeout=30)


def test_a_failed_load_is_logged_shown_and_retried_after_a_backoff(tmp_path, caplog):
    clock, flaky = FakeClock(), FlakyConnect()
    index = Index(str(tmp_path / "index.db"), BuildSettings("fake", DIM, "c"),
                  CopySettings(vector_load_inline=0, keywords=False),  # vectors: behind
                  clock=clock)
    index.copies.connect = flaky
    vecs = np.random.default_rng(1).standard_normal((40, DIM)).astype(np.float32)
    index.add_embeddings([f"h{i}" for i in range(40)], vecs)
    with caplog.at_level(logging.WARNING, logger="notewell.index.copies"):
        index.warm_vectors(wait=True)
    assert any("vectors copy" in r.getMessage() and "unable to open" in r.getMessage()
               for r in caplog.records)
    state = index.copies.state()["vectors"]
    assert state == "failed: CantOpenError: unable to open database file, retrying in 30 s"
    checks = doctor.check_copies({"copies": index.copies.state()})
    assert [c.status for c in checks] == [WARN] and "vectors" in checks[0].name
    # A search meanwhile is answered, from SQLite, and starts no load before the retry.
    assert len(index.reads.knn(vecs[0], 3)) == 3 and current_copies(index).vectors is None
    clock.advance(RETRY_FIRST - 1)
    index.ensure_copies()
    assert flaky.calls == 1
    # Due: the next try starts by itself; it fails again, and waits twice as long.
    clock.advance(1)
    index.ensure_copies()
    assert flaky.wait_for(2)
    assert until(lambda: not index.copies.state()["vectors"].endswith("now"))
    assert index.copies.state()["vectors"].endswith("retrying in 60 s") and flaky.calls == 2
    flaky.broken = False
    clock.advance(2 * RETRY_FIRST)
    index.ensure_copies()
    assert until(lambda: index.copies.state()["vectors"] == "loaded")
    assert current_copies(index).vectors is not None and flaky.calls == 3
    assert doctor.check_copies({"copies": index.copies.state()}) == []
    index.close()


def test_a_daemon_whose_copies_fail_says_so_in_status_and_doctor(home, notes_config,
                                                                 caplog, capsys):
    from notewell.cli import main

    clock, flaky = FakeClock(), FlakyConnect()
    engines: list[Engine] = []

    def make_engine(cfg):
        engine = Engine(cfg, embedder=FakeEmbedder())
        copies = engine.index.copies
        copies.clock, copies.connect = clock, flaky
        copies.settings.vector_load_inline = 0  # as a large index: only the loader reads
        engines.append(engine)
        return engine

    d = daemon.Daemon(notes_config, engine_factory=make_engine, poll_seconds=0.5,
                      use_events=False)
    caplog.set_level(logging.WARNING, logger="notewell.index.copies")
    d.start()
    server = threading.Thread(target=d.serve_forever, daemon=True)
    server.start()
    try:
        assert flaky.wait_for(2)  # the warm-up's vectors, then keywords after the sync
        assert until(lambda: all(  # the loader threads record their failures
            s.startswith("failed") for s in engines[0].index.copies.state().values()))
        assert main(["status", "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["copies"]["vectors"].startswith("failed: CantOpenError")
        assert status["copies"]["keywords"].endswith("retrying in 30 s")
        assert main(["status"]) == 0
        text = capsys.readouterr().out
        assert "copies:  vectors failed: CantOpenError: unable to open database file" in text
        lines = doctor.check_daemon_sources("linux", doctor.daemon_status())
        assert {c.name for c in lines if c.status == WARN} == {
            "daemon's vectors copy", "daemon's keywords copy"}
        assert sum("failed to load" in r.getMessage() for r in caplog.records) >= 2
    finally:
        d.request_stop()
        server.join(timeout=5)
