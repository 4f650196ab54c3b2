"""State shared between threads has one owner and a lock: the in-memory copies' references
(``index.copies``) and what the sync thread records for the handlers (``Background``'s
lag and errors). Each test makes the interleaving happen on purpose."""

from __future__ import annotations

import sys
import threading

from index_helpers import current_copies
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.ingest.sync import SyncReport
from notewell.model.fake import FakeEmbedder
from notewell.serve.background import Background
from reliability_helpers import FakeClock


def test_a_keyword_copy_published_while_a_sync_follows_is_not_overwritten(engine, notes_dir):
    """A loader thread publishes a fresh copy while the sync thread is moving the old one
    along: the older base must not replace it."""
    copies = engine.index.copies
    copies.warm_keywords(wait=True)
    old = current_copies(engine.index).keywords
    assert old is not None
    fresh = object()
    with_changes = type(old).with_changes

    def loader_finishes_meanwhile(self, *args, **kwargs):
        copies._publish("_keywords", fresh)  # as _load_keywords does, from its thread
        return with_changes(self, *args, **kwargs)

    type(old).with_changes = loader_finishes_meanwhile
    try:
        (notes_dir / "new.md").write_text("# Sourdough\n\nFeed the starter.\n")
        engine.sync()
    finally:
        type(old).with_changes = with_changes
    assert copies._keywords is fresh


def test_a_copy_loaded_after_the_index_closed_is_dropped(engine):
    copies = engine.index.copies
    conn = engine.index.db
    copies.close()
    copies._load_keywords(conn)  # a loader that finished its read after the close
    copies._load_vocabulary(conn)
    assert copies._keywords is None and copies._vocab is None


def test_lag_reads_the_sync_threads_records_whole_while_they_change(tmp_path):
    """Handlers call ``lag()`` while the sync thread records failures and recoveries:
    never a KeyError or a changed-size error, and every answer is one of the two states."""
    folder = tmp_path / "notes"
    folder.mkdir()
    names = [f"s{i}" for i in range(200)]
    cfg = Config(sources=tuple(SourceConfig(n, "markdown", str(folder)) for n in names))
    engine = Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx"))
    clock = FakeClock()
    bg = Background(lambda: engine, threading.Event(), use_events=False, clock=clock)
    failing = [SyncReport(source=n, error="database is locked") for n in names]
    fine = [SyncReport(source=n) for n in names]
    stop = threading.Event()
    problems: list[str] = []
    lags: list[dict] = []

    def handler() -> None:
        while not stop.is_set():
            try:
                lag = bg.lag()
                if lag is not None:
                    lags.append(lag)
                if lag is not None and lag["error"] is None:
                    problems.append("behind with no error")
            except Exception as e:  # every failure is reported
                problems.append(f"{type(e).__name__}: {e}")

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    readers = [threading.Thread(target=handler) for _ in range(2)]
    try:
        for t in readers:
            t.start()
        # The sync thread: sources fail for a while, then recover; until the readers
        # have seen the sources behind often enough.
        for _ in range(20_000):
            if len(lags) >= 300:
                break
            bg.note_reports(failing)
            clock.advance(120.0)
            bg.note_reports(fine)
    finally:
        stop.set()
        for t in readers:
            t.join(30)
        sys.setswitchinterval(before)
        engine.close()
    assert not problems, problems[:3]
    assert lags  # the readers did see the sources behind
